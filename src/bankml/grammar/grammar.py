"""A grammar state over a vocabulary: llama.cpp's grammar sampler (llama_sampler_init_grammar / _apply / _accept).

    vocab = GrammarVocab.from_gguf_file(path)            # or .from_tokenizer(tok)
    g = Grammar.parse('root ::= [a-z]+ "."', vocab=vocab) # GrammarError when llama.cpp would refuse it
    g.apply(ids, logits)    # logits[i] = -inf for every candidate the grammar rejects (in place)
    g.accept(token)         # advance past a sampled token
    g.is_done               # True when end-of-generation is allowed (some stack is complete)

Compiling a grammar text gives an `_engine.Engine` (rules + memo tables + cached masks); engines are cached per
vocabulary and text, so every request with the same grammar (the same JSON schema, say) shares the work
already done. A `Grammar` is just (engine, state): cheap to create, clone and reset.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from bankml.errors import GrammarError
from bankml.grammar import gbnf
from bankml.grammar._engine import Engine, EngineError, Vocab
from bankml.grammar.vocab import GrammarVocab

_ENGINE_CACHE = 16  # compiled grammars kept per vocabulary


def _engine_vocab(vocab: GrammarVocab) -> Vocab:
    ev = getattr(vocab, "_engine_vocab", None)
    if ev is None:
        ev = Vocab(vocab.pieces, sorted(vocab.eog_ids))
        object.__setattr__(vocab, "_engine_vocab", ev)
        object.__setattr__(vocab, "_engines", OrderedDict())
    return ev


def compile_rules(parsed: gbnf.ParsedGrammar, root: str, vocab: GrammarVocab) -> Engine:
    """llama_grammar_init_impl's checks (rules present, root symbol known, no left recursion), then the
    compiled engine with its initial stacks."""
    if not parsed.rules:
        raise GrammarError("the grammar defines no rule")
    if root not in parsed.symbol_ids:
        raise GrammarError(f"the grammar has no {root!r} symbol")
    bad = gbnf.left_recursive_rule(parsed.rules)
    if bad is not None:
        names = {v: k for k, v in parsed.symbol_ids.items()}
        raise GrammarError(f"left recursion in rule {names.get(bad, bad)!r} (llama.cpp refuses it)")
    starts, elems = [], []
    for rule in parsed.rules:
        starts.append(len(elems))
        elems.extend(rule)
    arr = np.asarray(elems, dtype=np.uint32).reshape(-1, 2)
    return Engine(arr, np.asarray(starts, dtype=np.int32), parsed.symbol_ids[root], _engine_vocab(vocab))


def compile_grammar(text: str | bytes, root: str, vocab: GrammarVocab) -> Engine:
    """The engine for a grammar text (cached per vocabulary)."""
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
    _engine_vocab(vocab)
    cache: OrderedDict = vocab._engines
    key = (raw, root)
    eng = cache.get(key)
    if eng is not None:
        cache.move_to_end(key)
        return eng
    eng = compile_rules(gbnf.parse(raw, vocab.tokenize), root, vocab)
    cache[key] = eng
    if len(cache) > _ENGINE_CACHE:
        cache.popitem(last=False)
    return eng


class Grammar:
    """One grammar-constrained generation's state (llama_grammar: stacks + partial UTF-8)."""

    __slots__ = ("engine", "vocab", "text", "root", "state", "_pv", "_pr")

    def __init__(self, engine: Engine, vocab: GrammarVocab, text: bytes = b"", root: str = "root"):
        self.engine = engine
        self.vocab = vocab
        self.text = text
        self.root = root
        self.state = engine.initial_set
        self._pv = 0
        self._pr = 0

    @classmethod
    def parse(cls, text: str | bytes, root: str = "root", *, vocab: GrammarVocab) -> "Grammar":
        """llama_grammar_init_impl on GBNF text; raises GrammarError when llama.cpp returns NULL."""
        raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
        return cls(compile_grammar(raw, root, vocab), vocab, raw, root)

    # -- the sampler's interface ---------------------------------------------------------------------------

    def apply(self, ids, logits) -> None:
        """llama_grammar_apply_impl on a candidate array: `ids` int32[n] (IN), `logits` float32[n] (IN/OUT,
        rejected candidates become -inf). End-of-generation tokens pass only when `is_done`; tokens with an
        empty piece never pass."""
        self.engine.apply(self.state, self._pv, self._pr, ids, logits)

    def allowed(self, token: int) -> bool:
        """Would `apply` keep this one token (the check after the first draw)."""
        return self.engine.allowed(self.state, self._pv, self._pr, int(token))

    def mask(self) -> np.ndarray:
        """bool[n_vocab]: every token the grammar allows now."""
        return self.engine.mask(self.state, self._pv, self._pr)

    def accept(self, token: int) -> None:
        """llama_grammar_accept_impl: advance past `token` (an end-of-generation token leaves the state as it
        is). Raises GrammarError when no stack survives (llama.cpp throws "Unexpected empty grammar stack
        after accepting piece: ..."; the message is the same)."""
        try:
            self.state, self._pv, self._pr = self.engine.accept_token(self.state, self._pv, self._pr, int(token))
        except EngineError as e:
            raise self._accept_error(e, int(token), self._piece(int(token))) from None

    def accept_piece(self, token: int, piece: bytes) -> None:
        """llama_grammar_accept_token with an explicit piece (lazy-grammar replay, tests)."""
        try:
            self.state, self._pv, self._pr = self.engine.accept_piece(self.state, self._pv, self._pr, int(token),
                                                                      bytes(piece))
        except EngineError as e:
            raise self._accept_error(e, int(token), bytes(piece)) from None

    @property
    def is_done(self) -> bool:
        """True when some stack is complete: end-of-generation tokens are allowed."""
        return self.engine.allow_eog(self.state)

    def clone(self) -> "Grammar":
        g = Grammar(self.engine, self.vocab, self.text, self.root)
        g.state, g._pv, g._pr = self.state, self._pv, self._pr
        return g

    def reset(self) -> None:
        """llama_sampler_reset on the grammar sampler: back to the initial stacks."""
        self.state, self._pv, self._pr = self.engine.initial_set, 0, 0

    @property
    def partial_utf8(self) -> tuple[int, int]:
        return self._pv, self._pr

    def stacks(self) -> list[tuple[int, ...]]:
        return self.engine.stacks(self.state)

    # -- helpers -------------------------------------------------------------------------------------------

    def _piece(self, token: int) -> bytes:
        return self.vocab.pieces[token] if 0 <= token < self.vocab.n_vocab else b""

    @staticmethod
    def _accept_error(e: EngineError, token: int, piece: bytes) -> GrammarError:
        from bankml.grammar._engine import EngineError as _E  # noqa: F401  (same class, for clarity)
        if e.code == -3:  # BK_GR_EEMPTY
            text = piece.decode("utf-8", "replace")
            return GrammarError(f"Unexpected empty grammar stack after accepting piece: {text} ({token})")
        return GrammarError(str(e))


def init_grammar(text: str | bytes | None, vocab: GrammarVocab, root: str = "root") -> Grammar | None:
    """llama_sampler_init_grammar: None for an empty grammar text (no constraint: the text is read as a C
    string, so a text starting with NUL is empty too), a Grammar otherwise; GrammarError when refused."""
    if text is None:
        return None
    raw = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else bytes(text)
    if not raw or raw[0] == 0:
        return None
    return Grammar.parse(raw, root, vocab=vocab)
