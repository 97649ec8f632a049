"""Seeded inputs of the forward-pass kernel cases (tests/oracle/forward/ops.json): the recorder
(testing/record_forward.py ops) and the tests regenerate the same bytes from the same case."""

from __future__ import annotations

import hashlib

import numpy as np

F16, Q4_1, Q8_0, F32 = 1, 3, 8, 0
TYPE_IDS = {"F32": F32, "F16": F16, "Q4_1": Q4_1, "Q8_0": Q8_0, "Q5_1": 7, "Q2_K": 10, "Q3_K": 11, "Q4_K": 12, "Q5_K": 13,
            "Q6_K": 14, "BF16": 30}
TYPE_IDS.update({"TQ1_0": 34, "TQ2_0": 35})
# block (values, bytes) and where its half scales are (byte offsets; the rest of a block is random bits)
_K_BLOCKS = {"Q5_1": (32, 24, (0, 2)), "Q4_K": (256, 144, (0, 2)), "Q5_K": (256, 176, (0, 2)), "Q6_K": (256, 210, (208,)),
             "Q2_K": (256, 84, (80, 82)), "Q3_K": (256, 110, (108,))}
# the ternary types: random bytes are any codes (TQ2_0's 3 and TQ1_0 bytes no encoder writes included), the
# half scale last
_K_BLOCKS.update({"TQ1_0": (256, 54, (52,)), "TQ2_0": (256, 66, (64,))})


def sha256(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


def _halves(rng, n, lo, hi):
    return rng.uniform(lo, hi, size=n).astype(np.float16).view(np.uint16)


def weights(wtype: str, m: int, k: int, seed: int) -> np.ndarray:
    """uint8 [m, row_bytes] of random but valid blocks of the type."""
    rng = np.random.default_rng(seed)
    if wtype == "F32":
        return rng.normal(0, 0.1, size=(m, k)).astype(np.float32).view(np.uint8).reshape(m, k * 4)
    if wtype == "F16":
        return rng.normal(0, 0.1, size=(m, k)).astype(np.float16).view(np.uint8).reshape(m, k * 2)
    if wtype == "BF16":  # the top halves of float32 normals: any finite bfloat16
        x = rng.normal(0, 0.1, size=(m, k)).astype(np.float32)
        return (x.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8).reshape(m, k * 2)
    nb = k // 32
    if wtype == "Q8_0":
        b = np.zeros((m, nb, 34), dtype=np.uint8)
        b[:, :, 0:2] = _halves(rng, m * nb, 1e-4, 2e-2).reshape(m, nb, 1).view(np.uint8)
        b[:, :, 2:] = rng.integers(-127, 128, size=(m, nb, 32)).astype(np.int8).view(np.uint8)
        return b.reshape(m, nb * 34)
    if wtype == "Q4_1":
        b = np.zeros((m, nb, 20), dtype=np.uint8)
        b[:, :, 0:2] = _halves(rng, m * nb, 1e-4, 2e-2).reshape(m, nb, 1).view(np.uint8)
        b[:, :, 2:4] = _halves(rng, m * nb, -0.2, 0.0).reshape(m, nb, 1).view(np.uint8)
        b[:, :, 4:] = rng.integers(0, 256, size=(m, nb, 16)).astype(np.uint8)
        return b.reshape(m, nb * 20)
    if wtype in _K_BLOCKS:  # random quants and scale bytes, finite positive half scales (Q5_1's min: negative)
        qk, bb, halves = _K_BLOCKS[wtype]
        nb = k // qk
        b = rng.integers(0, 256, size=(m, nb, bb)).astype(np.uint8)
        for off in halves:
            lo, hi = (-0.2, 0.0) if (wtype, off) == ("Q5_1", 2) else (1e-4, 2e-3)
            b[:, :, off:off + 2] = _halves(rng, m * nb, lo, hi).reshape(m, nb, 1).view(np.uint8)
        return b.reshape(m, nb * bb)
    raise ValueError(wtype)


def activations(n: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed + 1_000_003)
    x = rng.normal(0, 1.0, size=(n, k)).astype(np.float32)
    if n > 1:
        x[n // 2, : min(k, 32)] = 0.0  # an all-zero block (quantization's amax == 0 rule)
    return x


# (type, m, k, n): crossing tinyBLAS's rules (m % 4, k % 8, n >= 2), the tiles (rows % 4, columns % 2), and
# SmolLM2's own shapes
MATMUL_CASES = [
    (t, m, k, n)
    for t in ("Q4_1", "Q8_0")
    for (m, k) in ((4, 32), (33, 64), (192, 576), (576, 1536), (70, 96))
    for n in (1, 2, 3, 5, 17, 64)
] + [
    (t, m, k, n)
    for t in ("F16", "F32")
    for (m, k) in ((4, 32), (6, 64), (33, 96), (192, 576), (64, 40), (8, 36), (576, 1536), (5, 8))
    for n in (1, 2, 3, 5, 17, 64)
]

NORM_CASES = [(k, rows, eps) for k in (8, 31, 576, 1536) for rows in (1, 7) for eps in (1e-5, 1e-6)]

ROPE_CASES = [(hd, n_head, n_rot, base, pos0, n_tokens)
              for (hd, n_head, n_rot) in ((64, 9, 64), (64, 3, 64), (128, 2, 128), (32, 4, 32))
              for base in (10000.0, 100000.0)
              for (pos0, n_tokens) in ((0, 5), (4090, 6), (123457, 2))]

GET_ROWS_CASES = [(t, k) for t in ("F32", "F16", "Q8_0", "Q4_1") for k in (32, 576)]

# ops_k.json (`testing/record_forward.py ops_k`): the Q5_1, Q5_K, Q2_K and Q3_K matrices the llama / qwen3 graphs
# run (one vec_dot per output in ggml: MUL_MAT of n = 1 .. 64 columns; new types go last, so the seeds by index of
# the earlier cases stay) and the K-quant token embeddings' GET_ROWS
K_MATMUL_CASES = [(t, m, k, n) for t in ("Q5_1", "Q5_K", "Q2_K", "Q3_K") for (m, k) in ((4, 256), (33, 512), (192, 1536), (70, 2816))
                  for n in (1, 2, 3, 5, 17, 64)]
K_GET_ROWS_CASES = [(t, k) for t in ("Q4_K", "Q5_K", "Q6_K") for k in (256, 1024, 2816)]
# ops_tq.json (`testing/record_forward.py ops_tq`): MUL_MAT of TQ1_0 / TQ2_0 weights (Q8_K activations, one vec_dot
# per output for every n), SmolLM2's ffn_down and the synthetic shapes' rows among them, and GET_ROWS of TQ1_0 /
# TQ2_0 tables (random bytes; half scales of both signs are not drawn: _halves gives positive ones)
TQ_MATMUL_CASES = [(t, m, k, n) for t in ("TQ1_0", "TQ2_0")
                   for (m, k) in ((4, 256), (33, 512), (576, 1536), (70, 2816), (1024, 1024))
                   for n in (1, 2, 3, 4, 5, 17, 64)]
TQ_GET_ROWS_CASES = [(t, k) for t in ("TQ1_0", "TQ2_0") for k in (256, 1024, 2816)]

# ops_bf16.json (`testing/record_forward.py ops_bf16`): MUL_MAT of BF16 weights (activations rounded to BF16, then
# tinyBLAS when n >= 2, m % 4 == 0 and k % 8 == 0, else ggml_vec_dot_bf16) over n = 1 .. 512 columns, on SmolLM2's
# shapes and odd ones (m not a multiple of 4; k not a multiple of 8, 16 or 32; k below 32: vec_dot's tail only),
# and GET_ROWS of BF16 tables
BF16_MATMUL_CASES = [("BF16", m, k, n)
                     for (m, k) in ((192, 576), (576, 576), (1536, 576), (576, 1536), (4, 32), (6, 64), (33, 96),
                                    (64, 40), (8, 36), (5, 8), (12, 100), (7, 13), (20, 1000))
                     for n in (1, 2, 3, 4, 7, 8, 16, 63, 64, 65, 100, 512)]
BF16_GET_ROWS_CASES = [("BF16", k) for k in (32, 576, 100, 13)]


def activations_bf16(n: int, k: int, seed: int) -> np.ndarray:
    """activations() with every fifth element's low half set to 0x8000 (a tie of the rounding to BF16: to even)."""
    x = activations(n, k, seed)
    u = x.reshape(-1).view(np.uint32)
    u[::5] = (u[::5] & np.uint32(0xFFFF0000)) | np.uint32(0x8000)
    return x
