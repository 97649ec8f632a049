"""The sampler chain of llama-server b11192 (common/sampling.cpp's common_sampler over llama-sampler.cpp).

    chain = Chain(steps, n_vocab, dry_breakers=...)     # steps: [("top_k", 40), ("dist", seed), ...]
    chain.reset(); chain.accept(t); chain.apply(cands)   # llama_sampler_chain_{reset,accept,apply}
    sampler = Sampler(params, tokenizer)                 # common_sampler_init: checks, grammar, the chain
    sampler.begin(prompt_tokens); t = sampler.sample(logits); sampler.accept(t)
    sampler.post_sampling(n) -> (ids, probs)            # common_sampler_get_candidates(do_sort=true)

The steps are the samplers llama.cpp builds, with the same arguments (`chain_steps(params)` is
common_sampler_init's choice); each holds its own state (generators seeded per reset, the penalties' window and
counts, DRY's token history, mirostat's mu, adaptive-p's average). The arithmetic is in src/kernels/sampling.c.
"""

from __future__ import annotations

import math
import os
from collections import deque

import numpy as np

from bankml.sampling import _chain
from bankml.sampling.params import DEFAULT_SEED, Params, RequestError, f32

Candidates = _chain.Candidates
MT19937 = _chain.MT19937


def rng_seed(seed: int) -> int:
    """get_rng_seed: LLAMA_DEFAULT_SEED (0xFFFFFFFF) draws a fresh one"""
    if seed == DEFAULT_SEED:
        return int.from_bytes(os.urandom(4), "little")
    return seed


class _Step:
    name = "?"
    stateful_rng = False

    def reset(self):
        pass

    def accept(self, token: int):
        pass

    def apply(self, c: Candidates):
        raise NotImplementedError


class LogitBias(_Step):
    name = "logit-bias"

    def __init__(self, biases):
        self.tokens = np.array([t for t, _ in biases], dtype=np.int32)
        self.biases = np.array([b for _, b in biases], dtype=np.float32)

    def apply(self, c):
        c.logit_bias(self.tokens, self.biases)


class Penalties(_Step):
    name = "penalties"

    def __init__(self, n_vocab, last_n, repeat, freq, present):
        self.last_n, self.repeat, self.freq, self.present = max(last_n, 0), repeat, freq, present
        self.counts = np.zeros(n_vocab, dtype=np.int32)
        self.prev: deque = deque()

    @property
    def disabled(self) -> bool:
        """llama_sampler_init_penalties makes an empty sampler instead"""
        return self.last_n == 0 or (self.repeat == 1.0 and self.freq == 0.0 and self.present == 0.0)

    def reset(self):
        for t in self.prev:
            self.counts[t] = 0
        self.prev.clear()

    def accept(self, token):
        if self.last_n == 0:
            return
        if 0 <= token < len(self.counts):
            self.counts[token] += 1
        if len(self.prev) >= self.last_n:
            old = self.prev.popleft()
            if 0 <= old < len(self.counts):
                self.counts[old] -= 1
        self.prev.append(token)

    def apply(self, c):
        c.penalties(self.counts, self.repeat, self.freq, self.present)


class Dry(_Step):
    name = "dry"

    def __init__(self, n_vocab, multiplier, base, allowed_length, last_n, breakers):
        """breakers: {token: [sequence, ...]} as get_overlapping_token_sequences builds them"""
        self.multiplier, self.base, self.allowed = multiplier, base, allowed_length
        self.last_n = max(last_n, 0)
        self.hist: deque = deque(maxlen=max(self.last_n, 1))
        tok_off = np.zeros(n_vocab + 1, dtype=np.int32)
        seq_off, flat = [0], []
        for t in range(n_vocab):
            for seq in breakers.get(t, ()):
                flat += seq
                seq_off.append(len(flat))
            tok_off[t + 1] = len(seq_off) - 1
        self.tok_off = tok_off
        self.seq_off = np.array(seq_off, dtype=np.int32)
        self.brk = np.array(flat, dtype=np.int32)
        self.has = np.zeros(n_vocab, dtype=np.uint8)
        self.pen = np.zeros(n_vocab, dtype=np.float32)
        self.touched = np.zeros(max(self.last_n, 1), dtype=np.int32)

    def reset(self):
        self.hist.clear()

    def accept(self, token):
        self.hist.append(token)

    def apply(self, c):
        last = np.array(self.hist, dtype=np.int32)
        n = c.dry(last, self.last_n, self.allowed, self.multiplier, self.base, self.tok_off, self.seq_off,
                  self.brk, self.has, self.pen, self.touched)
        if n:
            self.has[self.touched[:n]] = 0


class _Call(_Step):
    """a stateless sampler: one Candidates method with fixed arguments"""

    def __init__(self, *args):
        self.args = args

    def apply(self, c):
        getattr(c, self.method)(*self.args)


class TopNSigma(_Call):
    name, method = "top-n-sigma", "top_n_sigma"


class TopK(_Call):
    name, method = "top-k", "top_k"


class Typical(_Call):
    name, method = "typical", "typical"


class TopP(_Call):
    name, method = "top-p", "top_p"


class MinP(_Call):
    name, method = "min-p", "min_p"


class Xtc(_Step):
    name = "xtc"

    def __init__(self, probability, threshold, min_keep, seed):
        self.probability, self.threshold, self.min_keep, self.seed = probability, threshold, min_keep, seed
        self.rng = MT19937(rng_seed(seed))

    def reset(self):
        self.rng.seed(rng_seed(self.seed))

    def apply(self, c):
        c.xtc(self.probability, self.threshold, self.min_keep, self.rng)


class TempExt(_Call):
    name, method = "temp-ext", "temp_ext"


class Temp(_Call):
    name, method = "temp", "temp"


class Dist(_Step):
    name = "dist"

    def __init__(self, seed):
        self.seed = seed
        self.rng = MT19937(rng_seed(seed))

    def reset(self):
        self.rng.seed(rng_seed(self.seed))

    def apply(self, c):
        c.dist(self.rng)


class Mirostat(_Step):
    name = "mirostat"

    def __init__(self, n_vocab, seed, tau, eta, m):
        self.n_vocab, self.seed, self.tau, self.eta, self.m = n_vocab, seed, tau, eta, m
        self.mu = f32(2.0 * tau)
        self.rng = MT19937(rng_seed(seed))

    def reset(self):
        self.mu = f32(2.0 * self.tau)
        self.rng.seed(rng_seed(self.seed))

    def apply(self, c):
        self.mu = c.mirostat(self.n_vocab, self.tau, self.eta, self.m, self.mu, self.rng)


class MirostatV2(_Step):
    name = "mirostat-v2"

    def __init__(self, seed, tau, eta):
        self.seed, self.tau, self.eta = seed, tau, eta
        self.mu = f32(2.0 * tau)
        self.rng = MT19937(rng_seed(seed))

    def reset(self):
        self.mu = f32(2.0 * self.tau)
        self.rng.seed(rng_seed(self.seed))

    def apply(self, c):
        self.mu = c.mirostat_v2(self.tau, self.eta, self.mu, self.rng)


class AdaptiveP(_Step):
    name = "adaptive-p"

    def __init__(self, n_vocab, target, decay, seed):
        self.target = target
        self.decay = f32(min(max(decay, 0.0), f32(0.99))) if not math.isnan(decay) else decay
        self.seed = seed
        self.rng = MT19937(rng_seed(seed))
        self.orig = np.zeros(n_vocab, dtype=np.float32)
        self._init_state()

    def _init_state(self):
        one = np.float32(1.0)
        d = np.float32(self.decay)
        self.ws = float(np.float32(self.target) / (one - d))
        self.tw = float(one / (one - d))
        self.pending = (-1, -1)

    def reset(self):
        self._init_state()
        self.rng.seed(rng_seed(self.seed))

    def apply(self, c):
        c.adaptive_p(self.target, self.ws, self.tw, self.orig, self.rng)
        if self.target >= 0.0:
            idx = c.selected
            self.pending = (int(c.array()["id"][idx]), idx)

    def accept(self, token):
        pid, idx = self.pending
        if pid == token and pid != -1:
            d = np.float32(self.decay)
            self.ws = float(np.float32(self.orig[idx]) + d * np.float32(self.ws))
            self.tw = float(np.float32(1.0) + d * np.float32(self.tw))
        self.pending = (-1, -1)


class Chain:
    """llama_sampler_chain over the steps"""

    def __init__(self, steps: list[_Step]):
        self.steps = steps

    def reset(self):
        for s in self.steps:
            s.reset()

    def accept(self, token: int):
        for s in self.steps:
            s.accept(token)

    def apply(self, c: Candidates):
        for s in self.steps:
            s.apply(c)


# ---------------------------------------------------------------------------------------------------------------
# DRY's sequence breakers (get_overlapping_token_sequences)

def dry_breakers(tok, breakers: list[str], max_char_len: int = 40, max_seq_len: int = 20) -> dict:
    """{token: [token sequence, ...]}: a token whose text contains a breaker gets the empty sequence; a token
    whose text ends with a proper prefix of the breaker (at any position where the breaker's first byte occurs
    and the rest of the token matches) gets the tokenization of the breaker's remaining tail"""
    out: dict[int, list[list[int]]] = {}
    words = [tok.detokenize([t], remove_special=False, unparse_special=True) for t in range(tok.n_vocab)]
    for b in breakers:
        s = b.encode("utf-8")
        if not s:
            continue
        s = s[:max_char_len]
        for t, word in enumerate(words):
            if s in word:
                out.setdefault(t, []).append([])
                continue
            pos = word.find(s[:1])
            while pos != -1:
                i = 1
                match = True
                while i < len(s) and i + pos < len(word):
                    if word[pos + i] != s[i]:
                        match = False
                        break
                    i += 1
                if match:
                    tail = s[i:].decode("utf-8", "surrogateescape")
                    seq = list(tok.tokenize(tail, add_special=False, parse_special=False))[:max_seq_len]
                    lst = out.setdefault(t, [])
                    if seq not in lst:
                        lst.append(seq)
                pos = word.find(s[:1], pos + 1)
    return out
