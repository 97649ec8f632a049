"""common_sampler of llama-server b11192: the request's chain and grammar, sampled and fed as the server does.

    sampler = Sampler(params, tokenizer)     # common_sampler_init; raises RequestError (400, llama-server's text)
    sampler.begin(prompt_tokens)             # init_sampler: reset, then every prompt token accepted (chain only)
    t = sampler.sample(logits)               # common_sampler_sample(grammar_first = false)
    sampler.accept(t)                        # common_sampler_accept(is_generated = true)
    sampler.post_sampling(n)                 # the candidates after the chain (n_probs with post_sampling_probs)

The grammar seam is docs/grammar.md's: the chain runs on the raw candidates; when the drawn token does not
fit the grammar, the candidates are rebuilt, masked by the grammar and the same chain runs again.

A lazy grammar on a template that thinks (a chat request with tools, reasoning markers in the request's
reasoning_budget_start_tag / _end_tags) comes with llama-server's reasoning budget sampler at an unlimited budget
(common/reasoning-budget.cpp): `ReasoningGate` follows the reasoning block in the sampled tokens, and the grammar
neither masks nor sees the tokens inside it; the end marker's tokens are fed to the grammar when the block
closes. A budget (reasoning_budget_tokens >= 0) or reasoning_control, which force tokens, is refused.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from bankml.sampling import backend
from bankml.sampling import chain as ch
from bankml.sampling.params import Params, RequestError, f32
from bankml.sampling.probs import TokenProbs, post_sampling_of

_INIT = "Failed to initialize samplers: "


def check_penalties(p: Params) -> None:
    """common_sampler_init's first checks (std::invalid_argument -> 400)"""
    r = p.penalty_repeat
    if not math.isfinite(r) or r <= 0.0 or not math.isfinite(_f32_div(1.0, r)):
        raise RequestError(_INIT + "penalty_repeat must be finite and greater than 0")
    if not math.isfinite(p.penalty_freq):
        raise RequestError(_INIT + "penalty_freq must be finite")
    if not math.isfinite(p.penalty_present):
        raise RequestError(_INIT + "penalty_present must be finite")


def _f32_div(a: float, b: float) -> float:
    if b == 0:
        return math.inf
    with np.errstate(over="ignore"):
        return float(np.float32(a) / np.float32(b))


@functools.lru_cache(maxsize=8)
def _breakers_cached(tok, breakers: tuple) -> dict:
    return ch.dry_breakers(tok, list(breakers))


@functools.lru_cache(maxsize=4)
def _grammar_vocab(tok):
    from bankml.grammar import GrammarVocab
    return GrammarVocab.from_tokenizer(tok)


def unsupported(what: str) -> RequestError:
    return RequestError(f"bankml does not reproduce {what} (llama-server b11192 would run it)", 501)


def chain_steps(p: Params, n_vocab: int, tok=None, suppress: tuple = ()) -> list:
    """the samplers common_sampler_init adds to the chain, in order"""
    steps: list = []
    merged = list(p.logit_bias) + [(t, -math.inf) for t in suppress]
    if merged:
        steps.append(ch.LogitBias(merged))
    if p.mirostat == 0:
        use_adaptive = False
        for name in p.samplers:
            if name == "dry":
                enabled = p.dry_multiplier != 0.0 and p.dry_base >= 1.0 and max(p.dry_penalty_last_n, 0) != 0
                if enabled:
                    brk = tuple(p.dry_sequence_breakers)
                    steps.append(ch.Dry(n_vocab, p.dry_multiplier, p.dry_base, p.dry_allowed_length,
                                        p.dry_penalty_last_n, _breakers_cached(tok, brk) if tok is not None else {}))
            elif name == "top_k":
                steps.append(ch.TopK(p.top_k))
            elif name == "top_p":
                steps.append(ch.TopP(p.top_p, p.min_keep))
            elif name == "top_n_sigma":
                steps.append(ch.TopNSigma(p.top_n_sigma))
            elif name == "min_p":
                steps.append(ch.MinP(p.min_p, p.min_keep))
            elif name == "xtc":
                steps.append(ch.Xtc(p.xtc_probability, p.xtc_threshold, p.min_keep, p.seed))
            elif name == "typ_p":
                steps.append(ch.Typical(p.typ_p, p.min_keep))
            elif name == "temperature":
                steps.append(ch.TempExt(p.temp, p.dynatemp_range, p.dynatemp_exponent))
            elif name == "infill":
                raise unsupported("the infill sampler")
            elif name == "penalties":
                pen = ch.Penalties(n_vocab, p.penalty_last_n, p.penalty_repeat, p.penalty_freq,
                                   p.penalty_present)
                if not pen.disabled:
                    steps.append(pen)
            elif name == "adaptive_p":
                use_adaptive = True
        if use_adaptive:
            steps.append(ch.AdaptiveP(n_vocab, p.adaptive_target, p.adaptive_decay, p.seed))
        else:
            steps.append(ch.Dist(p.seed))
    elif p.mirostat == 1:
        steps.append(ch.Temp(p.temp))
        steps.append(ch.Mirostat(n_vocab, p.seed, p.mirostat_tau, p.mirostat_eta, 100))
    else:
        steps.append(ch.Temp(p.temp))
        steps.append(ch.MirostatV2(p.seed, p.mirostat_tau, p.mirostat_eta))
    return steps


IDLE, COUNTING, DONE = 0, 1, 2      # common_reasoning_budget_state (FORCING is never reached without a budget)


class _TokenMatcher:
    """token_matcher: the longest of `seqs` (token sequences, duplicates and empty ones dropped) that ends the
    tokens advanced since the last match or reset (the Aho-Corasick automaton's output)."""

    def __init__(self, seqs):
        self.seqs: list[list[int]] = []
        for q in seqs:
            q = [int(t) for t in q]
            if q and q not in self.seqs:
                self.seqs.append(q)
        self.longest = max((len(q) for q in self.seqs), default=0)
        self.recent: list[int] = []

    def advance(self, token: int) -> int:
        """The index of the matched sequence (the state then restarts), or -1."""
        self.recent = (self.recent + [token])[-self.longest:] if self.longest else []
        best = -1
        for i, q in enumerate(self.seqs):
            if self.recent[-len(q):] == q and (best < 0 or len(q) > len(self.seqs[best])):
                best = i
        if best >= 0:
            self.recent = []
        return best

    def reset(self) -> None:
        self.recent = []


class ReasoningGate:
    """common_reasoning_budget with an unlimited budget: IDLE until the start marker's tokens, COUNTING inside
    the reasoning, DONE after an end marker's tokens (and COUNTING again on a new start marker)."""

    def __init__(self, start, ends):
        self.start = _TokenMatcher([start])
        self.end = _TokenMatcher(ends)
        self.state = IDLE
        self.end_match = -1

    def accept(self, token: int) -> None:
        if self.state == COUNTING:
            m = self.end.advance(token)
            if m >= 0:
                self.state, self.end_match = DONE, m
        elif self.start.advance(token) >= 0:
            if self.state == DONE:
                self.end.reset()
                self.end_match = -1
            self.state = COUNTING

    def end_tokens(self) -> list[int]:
        """The end marker that closed the block (common_reasoning_budget_get_end_match), [] if none."""
        return self.end.seqs[self.end_match] if self.end_match >= 0 else []


class Sampler:
    """common_sampler for one request (see the module text)."""

    def __init__(self, params: Params, tokenizer, grammar=None, n_vocab: int | None = None):
        self.params = p = params
        self.tok = tokenizer
        self.n_vocab = n_vocab or tokenizer.n_vocab
        check_penalties(p)
        if grammar is None and p.grammar is not None:
            grammar = self._make_grammar()
        self.grammar = grammar
        self.gate = None
        if p.reasoning_budget_start and p.reasoning_budget_end:
            if p.reasoning_budget_tokens >= 0 or p.reasoning_control:
                raise unsupported("the reasoning budget sampler with a budget or reasoning_control")
            if p.grammar_lazy:
                self.gate = ReasoningGate(p.reasoning_budget_start, p.reasoning_budget_end)
                for t in self._prefill():
                    self.gate.accept(t)
        if p.backend_sampling and self.grammar is not None:
            p.backend_sampling = False    # common_sampler_init turns it off in the task's params (not with grammar)
        self.chain = ch.Chain(chain_steps(p, self.n_vocab, tokenizer))
        self.backend = backend.plan(p, self.chain.steps, self.n_vocab, self.grammar)
        self.cands = ch.Candidates(self.n_vocab)
        self.prev: list[int] = []

    def _make_grammar(self):
        from bankml.grammar import request as greq
        spec = self.params.grammar
        if spec.text.startswith("%llguidance"):
            raise unsupported("llguidance grammars")
        try:
            return greq.sampler_grammar(spec, _grammar_vocab(self.tok), self._prefill())
        except greq.ConstrainedRequestError as e:
            raise RequestError(e.message, e.status) from None

    def _prefill(self) -> list[int]:
        """The generation prompt's tokens (but a leading space token the tokenizer adds), which
        common_sampler_init feeds to the grammar and the reasoning budget sampler (tokenized once a request)."""
        cached = getattr(self, "_prefill_tokens", None)
        if cached is not None:
            return cached
        from bankml.grammar import request as greq
        gp = self.params.generation_prompt
        toks = list(self.tok.tokenize(gp, add_special=False, parse_special=True)) if gp else []
        self._prefill_tokens = greq.prefill_tokens(gp, toks, lambda t: self.tok.token_to_piece(t, special=True)
                                                   .decode("utf-8", "replace")) if gp else []
        return self._prefill_tokens

    def _grammar_applies(self) -> bool:
        """grammar_should_apply: a lazy grammar is left out inside a reasoning block."""
        if self.grammar is None:
            return False
        return self.gate is None or self.gate.state != COUNTING

    def begin(self, prompt_tokens) -> None:
        """the slot's init_sampler: reset, then every prompt token accepted by the chain"""
        self.prev = []
        self.chain.reset()
        for t in prompt_tokens:
            self.accept(int(t), is_generated=False)

    def sample(self, logits) -> int:
        logits = np.ascontiguousarray(logits, dtype=np.float32)
        c = self.cands
        c.fill(logits)
        if self.backend is not None:      # the sampling graph (no grammar: see bankml.sampling.backend)
            self.backend.apply(c)
            return c.selected_id()
        self.chain.apply(c)
        tok = c.selected_id()
        g = self.grammar if self._grammar_applies() else None
        if g is None or g.allowed(tok):
            return tok
        c.fill(_masked(logits, g))
        self.chain.apply(c)
        if c.selected < 0:
            raise RuntimeError("no selected token during sampling - check your sampling configuration")
        return c.selected_id()

    def accept(self, token: int, is_generated: bool = True) -> None:
        to_grammar = is_generated and self._grammar_applies()
        if self.gate is not None and is_generated:
            self.gate.accept(token)
            if self.grammar is not None and not to_grammar and self.gate.state == DONE:
                for t in self.gate.end_tokens():     # the end marker may hold the grammar's trigger
                    self.grammar.accept(t)
        if to_grammar:
            self.grammar.accept(token)
        self.chain.accept(token)
        self.prev.append(token)

    def post_sampling(self, n: int, token: int | None = None) -> TokenProbs:
        """populate_token_probs(post_sampling = true) on the last sample's candidates"""
        return post_sampling_of(self.cands, n, token)


def _masked(logits: np.ndarray, g) -> np.ndarray:
    ids = np.arange(len(logits), dtype=np.int32)
    out = logits.copy()
    g.apply(ids, out)
    return out
