"""Flash attention and the F16 KV store (src/kernels/attention.c, kv.c) against llama.cpp b11192's own ops.

The records in tests/oracle/attention/ (testing/record_attention.py) hold each case's parameters and the sha256 of
ggml's output; the inputs are regenerated here from the seed (tests/attention_inputs.py). Bit equality, no
tolerance; the kernels run with bankml thread counts other than the oracle's, which must not change a bit.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from attention_inputs import make_inputs, make_q8_inputs, make_rot_inputs, make_store_inputs, sha256
from bankml.engine._shims import _attention_shim as S


def _records(name):
    return json.loads((Path(__file__).parent / "oracle" / "attention" / name).read_text())["cases"]


OPS = _records("ops.json")
STORE = _records("set_rows.json")
Q8 = _records("q8_0.json")
MORE_THREADS = _records("ops_threads.json")  # oracle thread counts 6 .. 512
Q8_FA = [c for c in Q8 if c["kind"] == "fa"]
Q8_ROT = [c for c in Q8 if c["kind"] == "rotation"]
Q8_STORE = [c for c in Q8 if c["kind"] == "store"]


def _cost(c):
    return c["n_tokens"] * c["n_kv"] * c["n_head"] * (c["dk"] + c["dv"])


def _id(c):
    return (f"{c['shape']}-t{c['n_tokens']}-kv{c['n_kv']}-{c['mask']}-onth{c['nth']}-s{c['seed']}")


def _run(c, nth):
    q, k, v, m = make_inputs(c)
    A = S.Attention(c["n_head"], c["dk"], c["dv"], oracle_nth=c["nth"], nth=nth)
    return A(q, k, v, m, c["n_kv"], c["n_head_kv"], np.float32(c["scale"]))


SMALL = [c for c in OPS if _cost(c) <= 2e8]
BIG = [c for c in OPS if _cost(c) > 2e8]


@pytest.mark.oracle
@pytest.mark.parametrize("case", SMALL, ids=_id)
def test_flash_attn_matches_oracle(case):
    assert S.path(case["n_tokens"], case["n_kv"], case["dv"]) == case["path"]
    out = _run(case, nth=2)
    assert sha256(out) == case["sha256"]
    assert int(np.isnan(out).any(axis=2).sum()) == case["nan_rows"]


@pytest.mark.oracle
@pytest.mark.slow
@pytest.mark.parametrize("case", BIG, ids=_id)
def test_flash_attn_matches_oracle_big(case):
    assert sha256(_run(case, nth=2)) == case["sha256"]


# bankml's own thread count must not matter: 1 and 3 threads over the cases whose result depends on the
# oracle's (split-KV, tiled)
THREADS = [c for c in SMALL if c["path"] != "one_chunk"][::3]


@pytest.mark.oracle
@pytest.mark.parametrize("nth", [1, 3])
@pytest.mark.parametrize("case", THREADS, ids=_id)
def test_flash_attn_bankml_threads_do_not_matter(case, nth):
    assert sha256(_run(case, nth=nth)) == case["sha256"]


def _run_q8(c, nth):
    q, k, v, m = make_q8_inputs(c)
    nhk, dk, dv = c["n_head_kv"], c["dk"], c["dv"]
    kc = np.zeros((c["kv_size"], nhk * dk // 32 * 34), np.uint8)
    vc = np.zeros((c["kv_size"], nhk * dv // 32 * 34), np.uint8)
    S.store_q8_0(kc, k, np.arange(c["kv_size"]), nth=2)
    S.store_q8_0(vc, v, np.arange(c["kv_size"]), nth=2)
    return S.AttentionQ8(c["n_head"], dk, dv, nth=nth)(q, kc, vc, m, c["n_kv"], nhk, np.float32(c["scale"]))


@pytest.mark.oracle
@pytest.mark.parametrize("case", MORE_THREADS, ids=lambda c: f"{c['kind']}-{_id(c)}")
def test_flash_attn_more_oracle_threads(case):
    # llama-server -t 6 .. 512: the split-KV chunks and the tiled row chunks follow it (bankml runs 2 threads)
    if case["kind"] == "q8_0":
        out = _run_q8(case, nth=2)
    else:
        assert S.path(case["n_tokens"], case["n_kv"], case["dv"]) == case["path"]
        out = _run(case, nth=2)
    assert sha256(out) == case["sha256"]
    assert int(np.isnan(out).any(axis=2).sum()) == case["nan_rows"]


def test_more_oracle_threads_cover_the_paths():
    by_nth = {}
    for c in MORE_THREADS:
        by_nth.setdefault(c["nth"], set()).add((c["kind"], c["path"]))
    assert set(by_nth) == {6, 8, 12, 16, 24, 32, 64, 100, 300, 512}
    for nth, paths in by_nth.items():
        assert {("f16", "tiled"), ("f16", "split_kv"), ("q8_0", "one_chunk")} <= paths
        assert nth > 64 or ("f16", "one_chunk") in paths
    assert any(c["nan_rows"] for c in MORE_THREADS if c["path"] == "tiled" and c["nth"] == 16)


def test_records_cover_the_paths_and_boundaries():
    paths = {c["path"] for c in OPS}
    assert paths == {"one_chunk", "tiled", "split_kv"}
    assert {1, 2, 3, 4} <= {c["nth"] for c in OPS if c["path"] == "split_kv"}
    assert {63, 64, 65} <= {c["n_tokens"] for c in OPS}
    assert {511, 512, 513} <= {c["n_kv"] for c in OPS}
    assert {"smollm2", "gemma3"} <= {c["shape"] for c in OPS}
    assert any(c["nan_rows"] for c in OPS if c["path"] == "tiled")  # poison cases show the tile partition


def test_split_kv_depends_on_the_oracle_thread_count():
    # the same decode row reduced over 2 or 3 chunks: different bits, so oracle_nth is not a detail
    c = next(c for c in OPS if c["path"] == "split_kv" and c["nth"] == 2 and c["n_kv"] >= 1024)
    q, k, v, m = make_inputs(c)
    outs = []
    for onth in (2, 3):
        A = S.Attention(c["n_head"], c["dk"], c["dv"], oracle_nth=onth, nth=2)
        outs.append(A(q, k, v, m, c["n_kv"], c["n_head_kv"], np.float32(c["scale"])))
    assert sha256(outs[0]) == c["sha256"]
    assert sha256(outs[1]) != c["sha256"]


def test_flash_attn_close_to_float64_softmax():
    # a sanity check with a plain numpy reference (no parity claimed here): F16 accumulation error only
    rng = np.random.default_rng(3)
    nt, nh, nhk, d, nkv = 70, 9, 3, 64, 600
    q = rng.standard_normal((nt, nh, d)).astype(np.float32)
    k = rng.standard_normal((nkv, nhk * d)).astype(np.float16)
    v = rng.standard_normal((nkv, nhk * d)).astype(np.float16)
    m = np.zeros((nt, nkv), np.float16)
    m[:, 500:] = -np.inf
    for onth, nt_ in ((2, nt), (2, 1), (1, 5)):
        A = S.Attention(nh, d, d, oracle_nth=onth, nth=2)
        out = A(q[:nt_], k.view(np.uint16), v.view(np.uint16), m[:nt_].view(np.uint16), nkv, nhk, np.float32(0.125))
        K = k.astype(np.float64).reshape(nkv, nhk, d)[:, np.arange(nh) // 3]
        V = v.astype(np.float64).reshape(nkv, nhk, d)[:, np.arange(nh) // 3]
        s = np.einsum("thd,chd->thc", q[:nt_].astype(np.float64), K) * 0.125 + m[:nt_].astype(np.float64)[:, None]
        p = np.exp(s - s.max(-1, keepdims=True))
        ref = np.einsum("thc,chd->thd", p / p.sum(-1, keepdims=True), V)
        np.testing.assert_allclose(out, ref, atol=4e-3, rtol=0)


@pytest.mark.oracle
@pytest.mark.parametrize("case", STORE, ids=lambda c: f"n{c['n']}-t{c['n_tokens']}-nth{c['nth']}-s{c['seed']}")
def test_store_f16_matches_set_rows(case):
    cache, x, idx = make_store_inputs(case)
    S.store_f16(cache, x, idx, nth=case["nth"])
    assert sha256(cache) == case["sha256"]


def test_attention_refuses_bad_shapes():
    A = S.Attention(9, 64, 64, oracle_nth=2, nth=1)
    q = np.zeros((3, 9, 64), np.float32)
    kc = np.zeros((256, 192), np.uint16)
    with pytest.raises(ValueError, match="q must be"):
        A(np.zeros((3, 8, 64), np.float32), kc, kc, None, 256, 3, 0.125)
    with pytest.raises(ValueError, match="not a multiple of n_head_kv"):
        A(q, kc, kc, None, 256, 2, 0.125)
    with pytest.raises(ValueError, match="n_kv 300 must be in"):
        A(q, kc, kc, None, 300, 3, 0.125)
    with pytest.raises(ValueError, match="caches must be"):
        A(q, np.zeros((256, 100), np.uint16), kc, None, 256, 3, 0.125)
    with pytest.raises(ValueError, match="mask must be"):
        A(q, kc, kc, np.zeros((2, 256), np.uint16), 256, 3, 0.125)
    with pytest.raises(ValueError, match="thread counts must be positive"):
        S.Attention(9, 64, 64, oracle_nth=0)
    with pytest.raises(ValueError, match="a cell index 600 is outside"):
        S.store_f16(kc, np.zeros((1, 192), np.float32), [600])


def test_paths():
    assert S.path(1, 511, 64) == "one_chunk"
    assert S.path(1, 512, 64) == "split_kv"
    assert S.path(2, 4096, 64) == "one_chunk"
    assert S.path(63, 256, 64) == "one_chunk"
    assert S.path(64, 256, 64) == "tiled"
    assert S.path(64, 256, 36) == "one_chunk"  # tiled needs dv % 8 == 0


# ---- Q8_0 cache (llama-server --cache-type-k q8_0 --cache-type-v q8_0) ----


@pytest.mark.oracle
@pytest.mark.parametrize("case", Q8_FA, ids=lambda c: f"{c['shape']}-t{c['n_tokens']}-kv{c['n_kv']}-{c['mask']}-s{c['seed']}")
def test_q8_0_flash_attn_matches_oracle(case):
    q, k, v, m = make_q8_inputs(case)
    nkv, nhk, dk, dv = case["n_kv"], case["n_head_kv"], case["dk"], case["dv"]
    kc = np.zeros((nkv, nhk * dk // 32 * 34), np.uint8)
    vc = np.zeros((nkv, nhk * dv // 32 * 34), np.uint8)
    S.store_q8_0(kc, k, np.arange(nkv), nth=2)
    S.store_q8_0(vc, v, np.arange(nkv), nth=2)
    assert sha256(kc) + sha256(vc) == case["cache_sha256"]  # the store is the oracle's too
    A = S.AttentionQ8(case["n_head"], dk, dv, nth=2)
    out = A(q, kc, vc, m, nkv, nhk, np.float32(case["scale"]))
    assert sha256(out) == case["sha256"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", Q8_ROT, ids=lambda c: f"n{c['n']}-rows{c['rows']}-x{c['xscale']}-s{c['seed']}")
def test_hadamard_matches_oracle(case):
    assert sha256(S.hadamard(make_rot_inputs(case), case["n"], nth=2)) == case["sha256"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", Q8_STORE, ids=lambda c: f"n{c['n']}-t{c['n_tokens']}-s{c['seed']}")
def test_store_q8_0_matches_set_rows(case):
    _, x, idx = make_store_inputs(case)
    cache = np.zeros((case["kv_size"], case["n"] // 32 * 34), np.uint8)
    S.store_q8_0(cache, x, idx, nth=case["nth"])
    assert sha256(cache) == case["sha256"]


def test_hadamard_is_its_own_inverse_and_rot_sizes():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((10, 64)).astype(np.float32)
    np.testing.assert_allclose(S.hadamard(S.hadamard(x, 64), 64), x, atol=1e-5)
    assert [S.rot_k_size(d) for d in (64, 128, 192, 256, 80, 32)] == [64, 128, 64, 256, 0, 0]
    with pytest.raises(ValueError, match="power of two"):
        S.hadamard(x, 48)
    with pytest.raises(ValueError, match="not rows of 64"):
        S.hadamard(np.zeros(100, np.float32), 64)


def test_q8_0_attention_refuses_bad_shapes():
    with pytest.raises(ValueError, match="multiples of 32"):
        S.AttentionQ8(9, 40, 64)
    A = S.AttentionQ8(9, 64, 64)
    q = np.zeros((1, 9, 64), np.float32)
    kc = np.zeros((256, 3 * 68), np.uint8)
    with pytest.raises(ValueError, match="caches must be"):
        A(q, np.zeros((256, 100), np.uint8), kc, None, 256, 3, 0.125)
    with pytest.raises(ValueError, match="n_kv 300 must be in"):
        A(q, kc, kc, None, 300, 3, 0.125)
    with pytest.raises(ValueError, match="multiple of 32 values"):
        S.store_q8_0(kc, np.zeros((1, 40), np.float32), [0])
