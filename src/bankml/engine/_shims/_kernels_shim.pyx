# cython: language_level=3
"""Test and benchmark shim over the forward pass's kernels (src/kernels/matmul.h, floatdot.h, rows8.h, norm.h,
rope.h, quants.h, kquants_q5k.h). Used only by tests/ and tests/bench/: the engine calls the kernels from compiled code.

Arrays: weights as uint8 [m, row_bytes] (the GGUF layout) with their ggml type id; activations float32 [n, k];
results float32 [n, m] (column c of ggml's MUL_MAT is row c here).
"""

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t

from bankml.kernels.matmul cimport (bk_act_prepare, bk_act_row_bytes, bk_act_type, bk_matmul, bk_matmul_supported,
                                    bk_matrix)
from bankml.kernels.rows8 cimport bk_x8_bytes, bk_x8_pack, bk_x8_uses_vnni
from bankml.kernels.floatdot cimport bk_tinyblas_takes
from bankml.kernels.norm cimport bk_rms_norm_mul_f32
from bankml.kernels.rope cimport bk_rope_cache, bk_rope_normal, bk_rope_theta_scale
from bankml.kernels.quants cimport bk_dequant_row_q4_1, bk_dequant_row_q8_0
from bankml.kernels.kquants_q5k cimport bk_dequant_row_q4_K, bk_dequant_row_q5_K, bk_dequant_row_q6_K
from bankml.kernels.quants_tq cimport bk_dequant_row_tq1_0, bk_dequant_row_tq2_0
from bankml.kernels.fp16 cimport bk_bf16_to_fp32_row, bk_fp16_to_fp32_row

cdef extern from "repack.h" nogil:
    int bk_repack_q4_0_8x8(const void *src, void *dst, int64_t m, int32_t k, int ith, int nth)
cdef extern from "quants_iq4.h" nogil:
    int bk_repack_iq4_nl_8x8(const void *src, void *dst, int64_t m, int32_t k, int ith, int nth)
    void bk_dequant_row_iq4_nl(const void *x, float *y, int64_t k)
    void bk_dequant_row_iq4_xs(const void *x, float *y, int64_t k)

cnp.import_array()

TYPES = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_1": 7, "Q8_0": 8, "Q2_K": 10, "Q3_K": 11, "Q5_K": 13,
         "BF16": 30, "IQ4_NL": 20, "IQ4_XS": 23}
TYPES.update({"TQ1_0": 34, "TQ2_0": 35})  # the ternary types (quants_tq.h)


def uses_vnni():
    return bool(bk_x8_uses_vnni())


def tinyblas_takes(int m, int k, int n):
    return bool(bk_tinyblas_takes(m, k, n))


def act_prepare(str wtype, x):
    """The activation rows ggml's MUL_MAT makes for a weight type (Q8_1, Q8_0, F16, BF16 or F32 bytes), uint8
    [n, rb]."""
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] xa = np.ascontiguousarray(x, dtype=np.float32)
    cdef int32_t at = bk_act_type(TYPES[wtype])
    cdef int k = xa.shape[1]
    cdef size_t rb = bk_act_row_bytes(at, k)
    cdef cnp.ndarray[cnp.uint8_t, ndim=2, mode="c"] out = np.zeros((xa.shape[0], rb), dtype=np.uint8)
    cdef int i
    for i in range(xa.shape[0]):
        bk_act_prepare(at, &xa[i, 0], k, &out[i, 0])
    return out


def matmul(str wtype, w, int k, x, int n_node=0, res=None, int r0=0, int r1=-1, int chunk=0, bint regroup=False):
    """ggml_mul_mat(W, X) as bankml computes it: float32 [n, m]. w: uint8 [m, row_bytes]; x: float32 [n, k].
    n_node: the node's column count (default n); res: float32 [n, m] added after the dot (the residual ADD);
    r0, r1: compute only those output rows (others stay 0); chunk > 0: rows in pieces of that size (as threads
    would split them); regroup: Q4_1 / Q8_0 rows regrouped by 8 first (rows8.h), as the engine runs them; Q4_0
    rows (m % 8 == 0) repacked as q4_0_8x8 (repack.h), IQ4_NL rows as iq4_nl_8x8 (quants_iq4.h), as the engine
    and llama-server run them."""
    cdef int32_t t = TYPES[wtype]
    cdef cnp.ndarray[cnp.uint8_t, ndim=2, mode="c"] wa = np.ascontiguousarray(w, dtype=np.uint8)
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] xa = np.ascontiguousarray(x, dtype=np.float32)
    if not bk_matmul_supported(t, k) or xa.shape[1] != k:
        raise ValueError(f"{wtype} with rows of {k} (x has {xa.shape[1]})")
    cdef int n = xa.shape[0]
    cdef int64_t m = wa.shape[0]
    cdef bk_matrix W
    W.data = &wa[0, 0]
    W.type = t
    W.k = k
    W.m = m
    W.row_bytes = wa.shape[1]
    W.x8 = NULL
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] packed
    if regroup and wtype in ("Q4_1", "Q8_0") and m >= 8:
        packed = np.zeros(bk_x8_bytes(t, m, k) + 64, dtype=np.uint8)
        bk_x8_pack(t, &wa[0, 0], wa.shape[1], k, 0, m // 8, &packed[0])
        W.x8 = &packed[0]
    elif regroup and wtype in ("Q4_0", "IQ4_NL"):
        packed = np.zeros(wa.size + 64, dtype=np.uint8)
        if (bk_repack_q4_0_8x8(&wa[0, 0], &packed[0], m, k, 0, 1) if wtype == "Q4_0" else
                bk_repack_iq4_nl_8x8(&wa[0, 0], &packed[0], m, k, 0, 1)) != 0:
            raise ValueError(f"a {wtype} matrix of {m} rows is not repacked")
        W.x8 = &packed[0]
    cdef cnp.ndarray[cnp.uint8_t, ndim=2, mode="c"] act = act_prepare(wtype, xa)
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] out = np.zeros((n, m), dtype=np.float32)
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] ra
    cdef const float *rp = NULL
    if res is not None:
        ra = np.ascontiguousarray(res, dtype=np.float32)
        if ra.shape[0] != n or ra.shape[1] != m:
            raise ValueError("res must be [n, m]")
        rp = &ra[0, 0]
    if r1 < 0:
        r1 = m
    if n_node <= 0:
        n_node = n
    cdef int64_t a = r0, b
    cdef int64_t step = chunk if chunk > 0 else r1 - r0
    while a < r1:
        b = min(a + step, r1)
        bk_matmul(&W, &act[0, 0], act.shape[1], n, n_node, a, b, &out[0, 0], m, rp, m)
        a = b
    return out


def rms_norm(x, w, float eps):
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] xa = np.ascontiguousarray(x, dtype=np.float32)
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] wa = np.ascontiguousarray(w, dtype=np.float32)
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] out = np.empty_like(xa)
    cdef int i
    for i in range(xa.shape[0]):
        bk_rms_norm_mul_f32(xa.shape[1], &xa[i, 0], &wa[0], eps, &out[i, 0])
    return out


def rope(x, positions, int n_rot, float freq_base):
    """RoPE NORMAL of x float32 [n_tokens, n_head, head_dim] at the positions: a new array."""
    cdef cnp.ndarray[cnp.float32_t, ndim=3, mode="c"] xa = np.array(x, dtype=np.float32, order="C")
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] cache = np.empty(max(n_rot, 2), dtype=np.float32)
    cdef float ts = bk_rope_theta_scale(freq_base, n_rot)
    cdef int t
    for t in range(xa.shape[0]):
        bk_rope_cache(positions[t], n_rot, ts, &cache[0])
        bk_rope_normal(&xa[t, 0, 0], xa.shape[1], xa.shape[2], n_rot, &cache[0])
    return xa


def rope_cache(int pos, int n_rot, float freq_base):
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] cache = np.empty(n_rot, dtype=np.float32)
    bk_rope_cache(pos, n_rot, bk_rope_theta_scale(freq_base, n_rot), &cache[0])
    return cache


def get_row(str wtype, row, int k):
    """One embedding row (GET_ROWS) as float32 [k]."""
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] r = np.ascontiguousarray(row, dtype=np.uint8)
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] out = np.empty(k, dtype=np.float32)
    if wtype == "Q8_0":
        bk_dequant_row_q8_0(&r[0], &out[0], k)
    elif wtype == "Q4_1":
        bk_dequant_row_q4_1(&r[0], &out[0], k)
    elif wtype == "Q4_K":
        bk_dequant_row_q4_K(&r[0], &out[0], k)
    elif wtype == "Q5_K":
        bk_dequant_row_q5_K(&r[0], &out[0], k)
    elif wtype == "Q6_K":
        bk_dequant_row_q6_K(&r[0], &out[0], k)
    elif wtype == "IQ4_NL":
        bk_dequant_row_iq4_nl(&r[0], &out[0], k)
    elif wtype == "IQ4_XS":
        bk_dequant_row_iq4_xs(&r[0], &out[0], k)
    elif wtype == "F16":
        bk_fp16_to_fp32_row(<const uint16_t *>&r[0], &out[0], k)
    elif wtype == "BF16":
        bk_bf16_to_fp32_row(<const uint16_t *>&r[0], &out[0], k)
    elif wtype == "TQ1_0":
        bk_dequant_row_tq1_0(&r[0], &out[0], k)
    elif wtype == "TQ2_0":
        bk_dequant_row_tq2_0(&r[0], &out[0], k)
    else:
        out[:] = r.view(np.float32)[:k]
    return out
