"""The forward pass's kernels (src/kernels/matmul.h, floatdot.h, gemm_q.h, norm.h, rope.h, quants.h) against single
ggml b11192 ops recorded from the oracle's libggml-cpu (tests/oracle/forward/ops.json, testing/record_forward.py
ops) on seeded inputs (tests/forward_inputs.py): every result bit-identical. Plus the invariances the engine
relies on: any split of the output rows (threads), the VNNI and AVX2 integer lanes, a residual added after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import forward_inputs as FI
from bankml.engine._shims import _kernels_shim as K

OPS = json.loads((Path(__file__).parent / "oracle" / "forward" / "ops.json").read_text())


def _mm_id(c):
    return f"{c['type']}-m{c['m']}-k{c['k']}-n{c['n']}"


@pytest.mark.oracle
@pytest.mark.parametrize("case", OPS["mul_mat"], ids=_mm_id)
def test_mul_mat_oracle(case):
    t, m, k, n = case["type"], case["m"], case["k"], case["n"]
    w = FI.weights(t, m, k, case["seed"])
    x = FI.activations(n, k, case["seed"])
    y = K.matmul(t, w, k, x)
    assert FI.sha256(y) == case["sha256"]
    # rows cut as threads cut them give the same bits, and so do rows regrouped by 8 (what the engine runs)
    assert FI.sha256(K.matmul(t, w, k, x, chunk=7)) == case["sha256"]
    if t in ("Q4_1", "Q8_0"):
        assert FI.sha256(K.matmul(t, w, k, x, regroup=True)) == case["sha256"]
        assert FI.sha256(K.matmul(t, w, k, x, regroup=True, chunk=16)) == case["sha256"]
        assert FI.sha256(K.matmul(t, w, k, x, regroup=True, res=np.zeros((n, m), np.float32))) == case["sha256"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", OPS["rms_norm"], ids=lambda c: f"k{c['k']}-rows{c['rows']}-eps{c['eps']}")
def test_rms_norm_oracle(case):
    x = FI.activations(case["rows"], case["k"], case["seed"]) * np.float32(3.0)
    w = FI.activations(1, case["k"], case["seed"] + 100)[0]
    assert FI.sha256(K.rms_norm(x, w, case["eps"])) == case["sha256"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", OPS["rope"],
                         ids=lambda c: f"hd{c['head_dim']}-h{c['n_head']}-base{c['freq_base']:g}-pos{c['pos0']}")
def test_rope_oracle(case):
    nt, nh, hd = case["n_tokens"], case["n_head"], case["head_dim"]
    x = FI.activations(nt, nh * hd, case["seed"]).reshape(nt, nh, hd)
    pos = np.arange(case["pos0"], case["pos0"] + nt, dtype=np.int32)
    assert FI.sha256(K.rope(x, pos, case["n_rot"], case["freq_base"])) == case["sha256"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", OPS["get_rows"], ids=lambda c: f"{c['type']}-k{c['k']}")
def test_get_rows_oracle(case):
    t, k = case["type"], case["k"]
    table = FI.weights(t, case["rows"], k, case["seed"])
    rows = np.stack([K.get_row(t, table[i], k) for i in case["ids"]])
    assert FI.sha256(rows) == case["sha256"]


def test_ops_counts():
    assert len(OPS["mul_mat"]) == len(FI.MATMUL_CASES)
    assert len(OPS["rms_norm"]) == len(FI.NORM_CASES)
    assert len(OPS["rope"]) == len(FI.ROPE_CASES)
    assert len(OPS["get_rows"]) == len(FI.GET_ROWS_CASES)


@pytest.mark.parametrize("wtype", ["Q4_1", "Q8_0", "F16", "F32"])
def test_residual_is_one_add_after_the_dot(wtype):
    m, k, n = 70, 96, 37
    w = FI.weights(wtype, m, k, 3)
    x = FI.activations(n, k, 3)
    res = FI.activations(n, m, 4)
    plain = K.matmul(wtype, w, k, x)
    with_res = K.matmul(wtype, w, k, x, res=res)
    np.testing.assert_array_equal((plain + res).view(np.uint32), with_res.view(np.uint32))


@pytest.mark.parametrize("wtype", ["F16", "F32"])
def test_float_weights_kernel_follows_the_node(wtype):
    # one column of a node of n >= 2 columns takes tinyBLAS's order, not vec_dot's (the last layer's wo)
    m, k = 192, 576
    w = FI.weights(wtype, m, k, 9)
    x = FI.activations(5, k, 9)
    full = K.matmul(wtype, w, k, x)
    one = K.matmul(wtype, w, k, x[4:5], n_node=5)
    np.testing.assert_array_equal(full[4:5].view(np.uint32), one.view(np.uint32))
    assert K.tinyblas_takes(m, k, 5) and not K.tinyblas_takes(m, k, 1)
    assert not K.tinyblas_takes(6, k, 5) and not K.tinyblas_takes(m, 36, 5)


@pytest.mark.skipif(not K.uses_vnni(), reason="this CPU has no AVX512-VNNI: only the AVX2 lanes run")
def test_vnni_and_avx2_lanes_agree():
    # the same cases in a process with BANKML_NO_VNNI=1: the integer kernel is picked once per process
    code = ("import forward_inputs as FI, numpy as np; from bankml.engine._shims import _kernels_shim as K;"
            "assert not K.uses_vnni();"
            "print(' '.join(FI.sha256(K.matmul(t, FI.weights(t, 70, 96, 1), 96, FI.activations(9, 96, 1)))"
            " for t in ('Q4_1', 'Q8_0')))")
    env = dict(os.environ, BANKML_NO_VNNI="1", PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    here = " ".join(FI.sha256(K.matmul(t, FI.weights(t, 70, 96, 1), 96, FI.activations(9, 96, 1)))
                    for t in ("Q4_1", "Q8_0"))
    assert out.stdout.split() == here.split()


def test_get_rows_q4_1_matches_the_converter_decoder():
    # bankml.models.quantize's decoder is checked against ggml's to_float (tests/oracle/quantize)
    from bankml.models import quantize
    table = FI.weights("Q4_1", 8, 576, 77)
    want = quantize.dequantize(3, table, 8, 576)
    got = np.stack([K.get_row("Q4_1", table[i], 576) for i in range(8)])
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("k", [96, 576, 8224])  # 8224 = 257 blocks: past the kernel's stack of VNNI starts
@pytest.mark.parametrize("n", [1, 2, 5])
def test_q8_0_regrouped_rows_match_vec_dot_on_any_bytes(k, n):
    # every int8 weight byte, -128 included (the VNNI kernel stores x + 128; ggml's sign trick keeps |x|)
    rng = np.random.default_rng(k * 10 + n)
    m, nb = 24, k // 32
    blocks = np.zeros((m, nb, 34), dtype=np.uint8)
    blocks[:, :, :2] = rng.uniform(1e-3, 2e-2, (m, nb)).astype(np.float16)[..., None].view(np.uint8)
    blocks[:, :, 2:] = rng.integers(0, 256, (m, nb, 32), dtype=np.uint8)
    w = blocks.reshape(m, nb * 34)
    x = FI.activations(n, k, 5)
    plain = K.matmul("Q8_0", w, k, x)
    grouped = K.matmul("Q8_0", w, k, x, regroup=True)
    np.testing.assert_array_equal(plain.view(np.uint32), grouped.view(np.uint32))


# --- the Q5_1 / Q5_K / Q2_K / Q3_K products and the K-quant GET_ROWS of the llama and qwen3 graphs (ops_k.json) ------------

OPS_K = json.loads((Path(__file__).parent / "oracle" / "forward" / "ops_k.json").read_text())


@pytest.mark.oracle
@pytest.mark.parametrize("case", OPS_K["mul_mat"], ids=_mm_id)
def test_mul_mat_q5_oracle(case):
    # ggml: one vec_dot per output (no sgemm case, no x86 repack); bankml: tiles of up to 4 columns
    t, m, k, n = case["type"], case["m"], case["k"], case["n"]
    w = FI.weights(t, m, k, case["seed"])
    x = FI.activations(n, k, case["seed"])
    assert FI.sha256(K.matmul(t, w, k, x)) == case["sha256"]
    assert FI.sha256(K.matmul(t, w, k, x, chunk=7)) == case["sha256"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", OPS_K["get_rows"], ids=lambda c: f"{c['type']}-k{c['k']}")
def test_get_rows_k_oracle(case):
    t, k = case["type"], case["k"]
    table = FI.weights(t, case["rows"], k, case["seed"])
    rows = np.stack([K.get_row(t, table[i], k) for i in case["ids"]])
    assert FI.sha256(rows) == case["sha256"]


def test_ops_k_counts():
    assert [(c["type"], c["m"], c["k"], c["n"]) for c in OPS_K["mul_mat"]] == [tuple(c) for c in FI.K_MATMUL_CASES]
    assert [(c["type"], c["k"]) for c in OPS_K["get_rows"]] == [tuple(c) for c in FI.K_GET_ROWS_CASES]

# --- BF16 products and GET_ROWS (ops_bf16.json) -------------------------------------------------------------------

OPS_BF16 = json.loads((Path(__file__).parent / "oracle" / "forward" / "ops_bf16.json").read_text())


@pytest.mark.oracle
@pytest.mark.parametrize("case", OPS_BF16["mul_mat"], ids=_mm_id)
def test_mul_mat_bf16_oracle(case):
    # ggml: activations rounded to BF16, then tinyBLAS (n >= 2, m % 4 == 0, k % 8 == 0) or ggml_vec_dot_bf16
    t, m, k, n = case["type"], case["m"], case["k"], case["n"]
    w = FI.weights(t, m, k, case["seed"])
    x = FI.activations_bf16(n, k, case["seed"])
    assert FI.sha256(K.matmul(t, w, k, x)) == case["sha256"]
    assert FI.sha256(K.matmul(t, w, k, x, chunk=7)) == case["sha256"]
    # the node's column count decides the kernel, whatever columns a call computes
    if n > 1:
        y = np.concatenate([K.matmul(t, w, k, x[c:c + 1], n_node=n) for c in range(n)])
        assert FI.sha256(y) == case["sha256"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", OPS_BF16["get_rows"], ids=lambda c: f"{c['type']}-k{c['k']}")
def test_get_rows_bf16_oracle(case):
    t, k = case["type"], case["k"]
    table = FI.weights(t, case["rows"], k, case["seed"])
    rows = np.stack([K.get_row(t, table[i], k) for i in case["ids"]])
    assert FI.sha256(rows) == case["sha256"]


def test_ops_bf16_counts():
    assert [(c["type"], c["m"], c["k"], c["n"]) for c in OPS_BF16["mul_mat"]] == [tuple(c) for c in FI.BF16_MATMUL_CASES]
    assert [(c["type"], c["k"]) for c in OPS_BF16["get_rows"]] == [tuple(c) for c in FI.BF16_GET_ROWS_CASES]


def test_bf16_activation_rounding():
    # ggml_cpu_fp32_to_bf16: nearest even on the bits, ties to even, NaN made quiet, no flush of subnormals
    x = np.array([[1.0, np.float32(1 + 2 ** -8), np.float32(1 + 3 * 2 ** -8), 1e-40, -0.0, np.inf, np.nan]],
                 np.float32)
    u = x.view(np.uint32)
    u[0, 6] = 0x7F800001                      # a signalling NaN
    got = K.act_prepare("BF16", x).view(np.uint16)[0].tolist()
    assert got == [0x3F80, 0x3F80, 0x3F82, 0x0001, 0x8000, 0x7F80, 0x7FC0]
