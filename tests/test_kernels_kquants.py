"""The weight kernels Gemma 3 needs (src/kernels/kquants.c, quants_q5.c, repack.c, gelu.c) against llama.cpp
b11192's own ops.

The records in tests/oracle/kquants/ (testing/record_kquants.py) hold each case's parameters, the sha256 of its
inputs and of ggml's result; the inputs are rebuilt here (tests/kquant_inputs.py: Gemma 3's own weight rows or
seeded blocks, seeded activations). Bit equality, no tolerance; bankml runs each case with 1 and 2 threads,
which must not change a bit (nor did the oracle's thread count: the recorder checked it).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bankml.models import gguf
from bankml.engine._shims import _kquant_shim as S
from kquant_inputs import (Q1_0, Q2_0, Q4_0, Q4_K, Q5_0, Q6_K, Q8_0, activations, all_halves, glu_inputs, make_inputs,
                           random_weights, row_bytes, sha256, smollm2_q4_0)

ORACLE = Path(__file__).parent / "oracle" / "kquants"


def _load(name):
    return json.loads((ORACLE / name).read_text())


MM = _load("mul_mat.json")
QUANT = _load("quant.json")["cases"]
GELU = _load("gelu.json")["cases"]
REAL_ROWS = [c for c in MM["cases"] if "tensor" in c["weights"]]
SMOLLM2_Q4_0 = [c for c in MM["cases"] if "smollm2" in c["weights"]]
RANDOM = [c for c in MM["cases"] if "seed" in c["weights"]]
HEAD = [c for c in REAL_ROWS if c["m"] == 262144]
REAL_ROWS = [c for c in REAL_ROWS if c["m"] != 262144]


def _id(c):
    w = c["weights"]
    src = w.get("tensor") or (f"smollm2-{w['smollm2']}" if "smollm2" in w else f"rand{w.get('seed')}")
    path = "repack" if c["repack"] else "vecdot"
    return f"{c['type']}-{src}-{c['m']}x{c['k']}-n{c['n']}-{path}-{c['act']['kind']}"


@pytest.fixture(scope="module")
def gemma_file(gemma3_path):
    f = gguf.GGUFFile(gemma3_path)
    yield f
    f.close()


_MATS: dict = {}


def _matmul(c, w):
    # one MatMul (and one repack) per weight matrix, as the engine keeps them
    key = (c["wtype"], str(c["weights"]), c["m"], c["k"], c["repack"])
    if key not in _MATS:
        if len(_MATS) > 8:
            _MATS.clear()
        _MATS[key] =  S.MatMul(c["wtype"], w, c["k"], repack=c["repack"])
    return _MATS[key]


def _check(c, gguf_file=None):
    w, x = make_inputs(c, gguf_file)
    assert sha256(w, x) == c["input_sha256"], "the inputs drifted from the recorded ones"
    mm = _matmul(c, w)
    for nth in (1, 2):
        assert sha256(mm(x, nth=nth)) == c["sha256"], f"bankml with {nth} threads"


@pytest.mark.oracle
@pytest.mark.parametrize("case", RANDOM, ids=_id)
def test_mul_mat_random_blocks_match_oracle(case):
    _check(case)


@pytest.mark.oracle
@pytest.mark.parametrize("case", REAL_ROWS, ids=_id)
def test_mul_mat_gemma3_rows_match_oracle(case, gemma_file):
    _check(case, gemma_file)


@pytest.fixture(scope="module")
def smollm2_file(smollm2_path):
    f = gguf.GGUFFile(smollm2_path)
    yield f
    f.close()


@pytest.mark.oracle
@pytest.mark.parametrize("case", SMOLLM2_Q4_0, ids=_id)
def test_mul_mat_q4_0_smollm2_rows_match_oracle(case, smollm2_file):
    # the derived Q4_0 SmolLM2 file's weights (bankml's converter), repacked q4_0_8x8 as llama-server does
    _check(case, smollm2_file)


@pytest.mark.oracle
@pytest.mark.slow
@pytest.mark.parametrize("case", HEAD, ids=_id)
def test_mul_mat_gemma3_output_head_matches_oracle(case, gemma_file):
    _check(case, gemma_file)


# --- the Bonsai types (src/kernels/quants_bonsai.c, docs/bonsai.md): bonsai.json, `record_kquants.py bonsai` ----

BONSAI = _load("bonsai.json")


@pytest.mark.oracle
@pytest.mark.parametrize("case", BONSAI["cases"], ids=_id)
def test_mul_mat_bonsai_matches_oracle(case, smollm2_file):
    # SmolLM2's matrices encoded as Q1_0 / Q2_0 by bankml's converter, or seeded blocks; one vec_dot per output
    _check(case, smollm2_file if "smollm2" in case["weights"] else None)


def test_bonsai_record_covers_both_types_and_the_thread_counts():
    counts = {t: sum(c["type"] == t for c in BONSAI["cases"]) for t in ("Q1_0", "Q2_0")}
    assert BONSAI["counts"] == counts and min(counts.values()) >= 40
    assert BONSAI["thread_checks"][0] == BONSAI["thread_checks"][1] > 20
    assert {1, 2, 65, 512} <= {c["n"] for c in BONSAI["cases"]}
    assert not any(c["repack"] for c in BONSAI["cases"])  # x86 repacks neither type


def test_records_cover_the_dispatch():
    cases = MM["cases"]
    assert MM["thread_checks"][0] == MM["thread_checks"][1] > 100
    for t in ("Q5_0", "Q8_0", "Q4_K", "Q6_K", "Q4_0"):
        assert {1, 2, 3, 4, 5, 7, 8, 9, 16, 63, 64, 65, 100, 512} <= {c["n"] for c in cases if c["type"] == t}
    assert {c["nth"] for c in cases} == {1, 2, 3, 4}
    rep = [c for c in cases if c["repack"]]
    assert {c["n"] % 4 for c in rep if c["n"] > 4} == {0, 1, 2, 3}  # gemm + gemv leftovers
    assert any(not c["repack"] and c["type"] == "Q4_K" and c["m"] % 8 for c in cases)  # not repackable shapes
    assert any(c["m"] == 262144 for c in cases)
    # the loader's rule: Q4_K and Q4_0 are repacked exactly when their rows are a multiple of 8 (unless
    # --no-repack); no other type is
    for c in cases:
        if "--no-repack" not in c.get("note", ""):
            assert c["repack"] == S.repack_takes(c["m"], c["k"], c["wtype"]), _id(c)
    assert any(not c["repack"] and c["type"] == "Q4_0" and c["n"] > 1 for c in cases)  # tinyBLAS_Q0_AVX


def test_q4_0_repack_and_vec_dot_give_different_bits():
    w = random_weights(Q4_0, 64, 576, 5)
    x = activations(dict(seed=9, kind="normal"), 5, 576)
    vec = S.MatMul(Q4_0, w, 576)(x)
    rep = S.MatMul(Q4_0, w, 576, repack=True)
    assert (vec.view(np.uint32) != rep(x).view(np.uint32)).mean() > 0.3
    # q4_0_8x8: gemm (groups of four columns) and gemv give the same bits
    np.testing.assert_array_equal(rep(x)[4:].view(np.uint32), rep(x[4:]).view(np.uint32))


def test_repack_and_vec_dot_give_different_bits():
    # the dispatch matters: the same Q4_K weights and activations through vec_dot, gemv (n < 4) and gemm
    w = random_weights(Q4_K, 64, 1024, 5)
    x = activations(dict(seed=9, kind="normal"), 8, 1024)
    vec = S.MatMul(Q4_K, w, 1024)(x)
    rep = S.MatMul(Q4_K, w, 1024, repack=True)
    gemm = rep(x)
    gemv = rep(x[:3])
    assert (vec.view(np.uint32) != gemm.view(np.uint32)).mean() > 0.3
    assert (gemm[:3].view(np.uint32) != gemv.view(np.uint32)).mean() > 0.3
    np.testing.assert_allclose(gemm, vec, rtol=1e-4, atol=1e-4 * np.abs(vec).max())


# ---- activation quantization, repack bytes ----

def _quant_id(c):
    return f"{c['kind']}-k{c['k']}-" + (c.get("tensor") or c.get("smollm2") or
                                        f"{c.get('act', {}).get('kind', '')}{c.get('seed', '')}")


@pytest.mark.oracle
@pytest.mark.parametrize("case", [c for c in QUANT if c["kind"] != "repack" or "seed" in c], ids=_quant_id)
def test_quantizers_and_repack_match_oracle(case):
    if case["kind"] == "repack":
        w = random_weights(case["wtype"], case["m"], case["k"], case["seed"])
        got = S.repack(case["wtype"], w, case["k"], nth=2)
    else:
        x = activations(case["act"], 4, case["k"])
        got = np.stack([S.quant_row_q8_K(r) for r in x]) if case["kind"] == "q8_K" else S.quant_mat_q8_K_4x8(x)
    assert sha256(got) == case["sha256"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", [c for c in QUANT if "tensor" in c], ids=_quant_id)
def test_repack_of_gemma3_matrices_matches_oracle(case, gemma_file):
    w = np.asarray(gemma_file.tensor(case["tensor"]))
    assert sha256(S.repack(Q4_K, w, case["k"], nth=2)) == case["sha256"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", [c for c in QUANT if "smollm2" in c], ids=_quant_id)
def test_repack_of_smollm2_q4_0_matches_oracle(case, smollm2_file):
    w = smollm2_q4_0(smollm2_file, case["smollm2"], [0, case["m"]])
    assert sha256(S.repack(Q4_0, w, case["k"], nth=2)) == case["sha256"]


# ---- GELU ----

@pytest.mark.oracle
def test_gelu_table_and_every_half_match_oracle():
    rec = {c["kind"]: c for c in GELU if c["kind"] != "geglu"}
    assert sha256(S.gelu_table()) == rec["table"]["sha256"]
    xs = all_halves()
    for nth in (1, 2):
        assert sha256(S.gelu(xs, nth=nth)) == rec["gelu_all_halves"]["sha256"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", [c for c in GELU if c["kind"] == "geglu"],
                         ids=lambda c: f"{c['rows']}x{c['n']}-s{c['scale']}-onth{c['nth']}")
def test_geglu_matches_oracle(case):
    x, g = glu_inputs(case)
    for nth in (1, 2):
        assert sha256(S.geglu(x, g, nth=nth)) == case["sha256"]
        assert sha256(S.gelu(x, nth=nth)) == case["gelu_sha256"]


def test_geglu_close_to_tanh_gelu():
    # plain numpy reference (no parity claimed): the table's F16 rounding of x and of the result
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(4096) * 3).astype(np.float32)
    g = rng.standard_normal(4096).astype(np.float32)
    xd = x.astype(np.float64)
    ref = 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * xd * (1 + 0.044715 * xd * xd))) * g
    np.testing.assert_allclose(S.geglu(x, g), ref, rtol=2e-3, atol=2e-3 * np.abs(g).max())


# ---- a plain numpy reference of the weight formats (no parity claimed: activation rounding only) ----

def _dequant(wtype, w, k):
    """float64 [m, k] from the GGUF bytes of Q4_0 / Q5_0 / Q8_0 / Q4_K / Q6_K (ggml-common.h layouts)."""
    m = w.shape[0]
    if wtype in (Q1_0, Q2_0):  # the converter's decoders (exact, checked against ggml's in test_quantize.py)
        from bankml.models.quantize import dequantize
        return dequantize(wtype, w.reshape(-1), m, k).astype(np.float64)
    if wtype in (Q4_0, Q5_0, Q8_0):
        bb = {Q4_0: 18, Q5_0: 22, Q8_0: 34}[wtype]
        b = w.reshape(-1, bb)
        d = b[:, :2].copy().view(np.float16).astype(np.float64)
        if wtype == Q4_0:
            q = np.concatenate([b[:, 2:] & 15, b[:, 2:] >> 4], axis=1).astype(np.float64) - 8
        elif wtype == Q8_0:
            q = b[:, 2:].view(np.int8).astype(np.float64)
        else:
            qh = b[:, 2:6].copy().view(np.uint32)[:, 0]
            qs = b[:, 6:]
            hi = (qh[:, None] >> np.arange(32, dtype=np.uint32)) & 1
            q = np.concatenate([qs & 15, qs >> 4], axis=1).astype(np.int64) | (hi.astype(np.int64) << 4)
            q = (q - 16).astype(np.float64)
        return (q * d).reshape(m, k)
    if wtype == Q4_K:
        b = w.reshape(-1, 144)
        d = b[:, 0:2].copy().view(np.float16).astype(np.float64)
        dmin = b[:, 2:4].copy().view(np.float16).astype(np.float64)
        sc = b[:, 4:16].astype(np.int64)
        s = np.concatenate([sc[:, 0:4] & 63, (sc[:, 8:12] & 15) | ((sc[:, 0:4] >> 6) << 4)], axis=1)
        mn = np.concatenate([sc[:, 4:8] & 63, (sc[:, 8:12] >> 4) | ((sc[:, 4:8] >> 6) << 4)], axis=1)
        qs = b[:, 16:].reshape(-1, 4, 32)
        q = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 8, 32).astype(np.float64)
        x = d[:, :, None] * s[:, :, None] * q - dmin[:, :, None] * mn[:, :, None]
        return x.reshape(m, k)
    b = w.reshape(-1, 210)
    ql, qh = b[:, :128].reshape(-1, 2, 64), b[:, 128:192].reshape(-1, 2, 32)
    sc = b[:, 192:208].view(np.int8).astype(np.float64)
    d = b[:, 208:210].copy().view(np.float16).astype(np.float64)
    q = np.concatenate([(ql[:, :, :32] & 15) | ((qh & 3) << 4), (ql[:, :, 32:] & 15) | (((qh >> 2) & 3) << 4),
                        (ql[:, :, :32] >> 4) | (((qh >> 4) & 3) << 4), (ql[:, :, 32:] >> 4) | (((qh >> 6) & 3) << 4)],
                       axis=2).reshape(-1, 256).astype(np.float64) - 32
    return (q * np.repeat(sc, 16, axis=1) * d).reshape(m, k)


@pytest.mark.parametrize("wtype,k,m,repack", [(Q4_0, 64, 16, True), (Q5_0, 96, 13, False), (Q8_0, 640, 40, False), (Q6_K, 512, 13, False),
                                              (Q4_K, 512, 20, False), (Q4_K, 1024, 64, True), (Q1_0, 512, 13, False),
                                              (Q2_0, 576, 13, False)],
                         ids=["Q4_0-repack", "Q5_0", "Q8_0", "Q6_K", "Q4_K-vecdot", "Q4_K-repack", "Q1_0", "Q2_0"])
@pytest.mark.parametrize("n", [1, 3, 4, 9])
def test_mul_mat_close_to_float64(wtype, k, m, repack, n):
    w = random_weights(wtype, m, k, 11)
    x = activations(dict(seed=12, kind="normal"), n, k)
    W = _dequant(wtype, w, k)
    ref = x.astype(np.float64) @ W.T
    bound = np.abs(x).astype(np.float64) @ np.abs(W).T
    got = S.MatMul(wtype, w, k, repack=repack)(x, nth=2)
    assert np.all(np.abs(got - ref) <= 0.02 * bound + 1e-30)


def test_shim_refuses_bad_shapes():
    w = random_weights(Q4_K, 13, 256, 1)
    with pytest.raises(ValueError, match="multiple of 8 rows"):
        S.MatMul(Q4_K, w, 256, repack=True)
    with pytest.raises(ValueError, match="only Q4_K and Q4_0 are repacked"):
        S.MatMul(Q6_K, random_weights(Q6_K, 8, 256, 1), 256, repack=True)
    with pytest.raises(ValueError, match="multiple of 256 values"):
        S.MatMul(Q6_K, np.zeros((8, 210), np.uint8), 100)
    with pytest.raises(ValueError, match="must be uint8"):
        S.MatMul(Q5_0, np.zeros((8, 23), np.uint8), 32)
    mm = S.MatMul(Q5_0, random_weights(Q5_0, 8, 64, 1), 64)
    with pytest.raises(ValueError, match=r"activations must be float32 \[n, 64\]"):
        mm(np.zeros((2, 32), np.float32))
    with pytest.raises(ValueError, match="at least one activation column"):
        mm(np.zeros((0, 64), np.float32))
    with pytest.raises(ValueError, match="not one of"):
        S.row_bytes(3, 32)
    with pytest.raises(ValueError, match="same shape"):
        S.geglu(np.zeros((2, 8), np.float32), np.zeros((2, 9), np.float32))
    assert S.row_bytes(Q4_K, 512) == row_bytes(Q4_K, 512) == 288


def test_matmul_reads_read_only_memmaps(tmp_path):
    # the engine's weights are read-only views of the mmap
    w = random_weights(Q6_K, 16, 512, 3)
    p = tmp_path / "w.bin"
    w.tofile(p)
    ro = np.memmap(p, dtype=np.uint8, mode="r", shape=w.shape)
    x = activations(dict(seed=1, kind="normal"), 5, 512)
    np.testing.assert_array_equal(S.MatMul(Q6_K, ro, 512)(x).view(np.uint32), S.MatMul(Q6_K, w, 512)(x).view(np.uint32))
