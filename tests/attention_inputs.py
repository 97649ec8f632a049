"""Inputs of the attention oracle cases, regenerated from a seed (shared by tests/test_attention.py and the
recorder testing/record_attention.py, so the records hold only the case parameters and output hashes).

A case is a dict: seed, n_tokens, n_kv, kv_size, n_head, n_head_kv, dk, dv, scale, qscale, mask (kind), nth
(the oracle's thread count). Layouts are llama.cpp's: q float32 [n_tokens, n_head, dk]; caches uint16 F16 bits
[kv_size, n_head_kv*d]; mask uint16 F16 bits [n_tokens, n_kv] or None.
"""

from __future__ import annotations

import hashlib

import numpy as np

F16_NEG_INF = np.uint16(0xFC00)

MASK_KINDS = ("causal", "causal_holes", "random", "blocks", "finite", "none", "poison")

# (name, n_head, n_head_kv, dk, dv, scale): SmolLM2-135M, Gemma 3 270M (Q pre-scaled, FA scale 1), MHA,
# odd head sizes that exercise the scalar tails
SHAPES = {
    "smollm2": (9, 3, 64, 64, 0.125),
    "gemma3": (4, 1, 256, 256, 1.0),
    "mha128": (4, 4, 128, 128, float(np.float32(1 / np.sqrt(128)))),
    "odd80": (4, 2, 80, 80, float(np.float32(1 / np.sqrt(80)))),
    "odd36": (6, 2, 36, 36, float(np.float32(1 / np.sqrt(36)))),
}


def sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _mask(rng, kind: str, n_tokens: int, n_kv: int):
    m = np.zeros((n_tokens, n_kv), dtype=np.float16)
    ninf = np.float16(-np.inf)
    if kind in ("causal", "causal_holes"):
        # llama.cpp's causal mask: cells 0..used-1 hold positions 0..used-1, the ubatch is the last n_tokens
        used = int(rng.integers(n_tokens, n_kv + 1))
        p0 = used - n_tokens
        for t in range(n_tokens):
            m[t, p0 + t + 1:] = ninf
        if kind == "causal_holes":
            m[:, rng.random(n_kv) < 0.1] = ninf
    elif kind == "random":
        m[rng.random((n_tokens, n_kv)) < float(rng.uniform(0.1, 0.9))] = ninf
    elif kind == "blocks":
        # whole 64-cell tiles dropped for some rows: exercises tile skips in the tiled path
        for t in range(n_tokens):
            for b in range(0, n_kv, 64):
                if rng.random() < 0.4:
                    m[t, b:b + 64] = ninf
    elif kind == "finite":
        m[:] = rng.standard_normal((n_tokens, n_kv)).astype(np.float16)
        m[rng.random((n_tokens, n_kv)) < 0.2] = ninf
    elif kind == "poison":
        pass  # set with the caches below
    elif kind == "none":
        return None
    else:
        raise ValueError(f"unknown mask kind {kind!r}")
    return m


def make_inputs(case: dict):
    """(q, kcache, vcache, mask) for a case, deterministic in case['seed']."""
    rng = np.random.default_rng(case["seed"])
    nt, nkv, kvs = case["n_tokens"], case["n_kv"], case["kv_size"]
    nh, nhk, dk, dv = case["n_head"], case["n_head_kv"], case["dk"], case["dv"]
    q = (rng.standard_normal((nt, nh, dk)) * case["qscale"]).astype(np.float32)
    k = rng.standard_normal((kvs, nhk * dk)).astype(np.float16)
    v = rng.standard_normal((kvs, nhk * dv)).astype(np.float16)
    m = _mask(rng, case["mask"], nt, nkv)
    if case["mask"] == "poison":
        # inf in V (and K) of a cell dropped for every row, inside 64-cell tiles that one row still sees:
        # the oracle's tiled path adds 0*inf = NaN to the rows sharing a query tile with that row, so the
        # result shows whether the oracle's query tiles are reproduced
        for b in rng.choice(max(nkv // 64, 1), size=min(3, max(nkv // 64, 1)), replace=False):
            lo, hi = int(b) * 64, min(int(b) * 64 + 64, nkv)
            m[:, lo:hi] = np.float16(-np.inf)
            m[int(rng.integers(0, nt)), lo:hi] = 0
            c = int(rng.integers(lo, hi))
            m[:, c] = np.float16(-np.inf)
            v[c, :] = np.inf
            k[c, int(rng.integers(0, nhk * dk))] = np.inf
    return q, k.view(np.uint16), v.view(np.uint16), None if m is None else m.view(np.uint16)


def make_store_inputs(case: dict):
    """(cache, x, idx) for a SET_ROWS case: values hitting F16 rounding corners (ties, subnormals, overflow)."""
    rng = np.random.default_rng(case["seed"])
    n, nt, kvs = case["n"], case["n_tokens"], case["kv_size"]
    x = rng.standard_normal((nt, n)).astype(np.float32) * np.float32(case["xscale"])
    # exact ties between two halves, tiny values, values past the F16 range
    flat = x.reshape(-1)
    sel = rng.random(flat.size)
    halves = rng.standard_normal(flat.size).astype(np.float16).astype(np.float32)
    ulp = np.spacing(halves.astype(np.float16)).astype(np.float32)
    flat[sel < 0.1] = (halves + ulp / 2)[sel < 0.1]
    flat[(sel >= 0.1) & (sel < 0.15)] = (rng.standard_normal(flat.size) * 1e-6).astype(np.float32)[(sel >= 0.1) & (sel < 0.15)]
    flat[(sel >= 0.15) & (sel < 0.17)] = (rng.standard_normal(flat.size) * 7e4).astype(np.float32)[(sel >= 0.15) & (sel < 0.17)]
    cache = rng.standard_normal((kvs, n)).astype(np.float16).view(np.uint16)
    idx = rng.choice(kvs, size=nt, replace=False).astype(np.int64)
    return cache, x, idx


def make_q8_inputs(case: dict):
    """(q, kcache, vcache, mask) for a Q8_0-cache case: the caches hold the oracle's own quantization of random
    rows (ggml SET_ROWS), passed in as `quantize(rows) -> blocks` so that the test and the recorder each use
    their own (bankml's, or ggml's)."""
    rng = np.random.default_rng(case["seed"])
    nt, nkv, kvs = case["n_tokens"], case["n_kv"], case["kv_size"]
    nh, nhk, dk, dv = case["n_head"], case["n_head_kv"], case["dk"], case["dv"]
    q = (rng.standard_normal((nt, nh, dk)) * case["qscale"]).astype(np.float32)
    k = (rng.standard_normal((kvs, nhk * dk)) * case["kvscale"]).astype(np.float32)
    v = (rng.standard_normal((kvs, nhk * dv)) * case["kvscale"]).astype(np.float32)
    m = _mask(rng, case["mask"], nt, nkv)
    return q, k, v, None if m is None else m.view(np.uint16)


def make_rot_inputs(case: dict):
    rng = np.random.default_rng(case["seed"])
    return (rng.standard_normal((case["rows"], case["n"])) * case["xscale"]).astype(np.float32)
