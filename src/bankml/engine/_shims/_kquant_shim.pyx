# cython: language_level=3
"""Test and benchmark shim over the weight kernels Gemma 3 needs (src/kernels/kquants.h, quants_q5.h, repack.h,
gelu.h, with quants.h's Q8_0 and Q4_0).

Used only by tests/ and tests/bench/: the engine calls the kernels from its own compiled code. Weights are uint8
arrays [m, row_bytes] in the GGUF layout (m rows of k values, ggml type ids: Q4_0 2, Q5_0 6, Q8_0 8, Q4_K 12,
Q6_K 14, Q1_0 41, Q2_0 42);
activations float32 [n, k] (n columns, one token a row); results float32 [n, m], as ggml's MUL_MAT writes them.

`MatMul(wtype, w, k, repack=...)` runs a whole MUL_MAT node the way llama.cpp b11192's CPU backend does for
that weight (docs/kquants.md): activation quantization (Q8_0, Q8_K, or for a repacked Q4_K the 4x8-interleaved
Q8_K groups), a barrier, then the dot products, gemv or gemm over rows split between `nth` OpenMP threads.
"""

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t, uint16_t
from libc.stdlib cimport free

from bankml.kernels.kquants cimport bk_quant_row_q8_K
from bankml.kernels.quants cimport bk_quant_row_q8_0
from bankml.kernels.repack cimport bk_quant_mat_q8_K_4x8, bk_repack_q4_0_takes, bk_repack_q4_K_takes
from bankml.kernels.gelu cimport bk_gelu_table_f16

cnp.import_array()

cdef extern from *:
    """
    #include <omp.h>
    #include <stdlib.h>
    #include <string.h>
    #include "kquants.h"
    #include "quants.h"
    #include "quants_q5.h"
    #include "quants_bonsai.h"
    #include "repack.h"
    #include "gelu.h"

    enum { KQ_Q4_0 = 2, KQ_Q5_0 = 6, KQ_Q8_0 = 8, KQ_Q4_K = 12, KQ_Q6_K = 14, KQ_Q1_0 = 41, KQ_Q2_0 = 42 };

    static size_t kq_act_bytes(int wtype, int k) {
        return (wtype == KQ_Q4_K || wtype == KQ_Q6_K) ? (size_t)(k / 256) * sizeof(bk_block_q8_K)
                                                      : (size_t)(k / 32) * sizeof(bk_block_q8_0);
    }

    static void kq_dot_rows(int wtype, int k, float *s, int nr, const uint8_t *w, size_t rb, const void *y) {
        switch (wtype) {
        case KQ_Q5_0: bk_dot_q5_0_q8_0_rows(k, s, nr, w, rb, y); break;
        case KQ_Q8_0: bk_dot_q8_0_q8_0_rows(k, s, nr, w, rb, y); break;
        case KQ_Q4_K: bk_dot_q4_K_q8_K_rows(k, s, nr, w, rb, y); break;
        case KQ_Q4_0: for (int r = 0; r < nr; r++) s[r] = bk_dot_q4_0_q8_0(k, w + r * rb, y); break;
        case KQ_Q1_0: bk_dot_q1_0_q8_0_rows(k, s, nr, w, rb, y); break;
        case KQ_Q2_0: bk_dot_q2_0_q8_0_rows(k, s, nr, w, rb, y); break;
        default: bk_dot_q6_K_q8_K_rows(k, s, nr, w, rb, y); break;
        }
    }

    /* One MUL_MAT node: x float [n][k] -> out float [n][m]; w [m] rows of rb bytes (repacked: the q4_K_8x8
     * buffer); wdata: n * kq_act_bytes(wtype, k) bytes. */
    static void kq_matmul(int wtype, int repacked, const uint8_t *w, size_t rb, int64_t m, int k, const float *x,
                          int n, float *out, uint8_t *wdata, int nth) {
        const size_t ab = kq_act_bytes(wtype, k);
        #pragma omp parallel num_threads(nth)
        {
            const int ith = omp_get_thread_num(), nt = omp_get_num_threads();
            if (repacked && wtype == KQ_Q4_K) {
                bk_act_prepare_q4_K_8x8(x, k, n, k, wdata, ith, nt);
            } else {
                for (int c = ith; c < n; c += nt) {
                    if (wtype == KQ_Q4_K || wtype == KQ_Q6_K) bk_quant_row_q8_K(x + (size_t)c * k, wdata + c * ab, k);
                    else bk_quant_row_q8_0(x + (size_t)c * k, wdata + c * ab, k);
                }
            }
            #pragma omp barrier
            if (repacked) {
                const int64_t ng = m / 8, g0 = ng * ith / nt, g1 = ng * (ith + 1) / nt;
                if (g1 > g0 && wtype == KQ_Q4_K) bk_matmul_q4_K_8x8(w, k, wdata, n, 8 * g0, 8 * g1, out, m);
                if (g1 > g0 && wtype == KQ_Q4_0) bk_matmul_q4_0_8x8(w, k, wdata, ab, n, 8 * g0, 8 * g1, out, m);
            } else {
                const int64_t r0 = m * ith / nt, r1 = m * (ith + 1) / nt;
                enum { CH = 16 };
                for (int64_t rc = r0; rc < r1; rc += CH) {
                    const int nr = (int)(r1 - rc < CH ? r1 - rc : CH);
                    if (wtype == KQ_Q5_0 && n > 1)
                        bk_gemm_q5_0_q8_0(k, out + rc, m, nr, n, w + rc * rb, rb, wdata, ab);
                    else if (wtype == KQ_Q6_K && n > 1)
                        bk_gemm_q6_K_q8_K(k, out + rc, m, nr, n, w + rc * rb, rb, wdata, ab);
                    else
                        for (int c = 0; c < n; c++)
                            kq_dot_rows(wtype, k, out + (size_t)c * m + rc, nr, w + rc * rb, rb, wdata + c * ab);
                }
            }
        }
    }

    static int kq_repack(int wtype, const uint8_t *src, uint8_t *dst, int64_t m, int k, int nth) {
        int rc = 0;
        #pragma omp parallel num_threads(nth)
        {
            const int ith = omp_get_thread_num(), nt = omp_get_num_threads();
            const int r = wtype == KQ_Q4_0 ? bk_repack_q4_0_8x8(src, dst, m, k, ith, nt)
                                           : bk_repack_q4_K_8x8(src, dst, m, k, ith, nt);
            if (r) {
                #pragma omp atomic write
                rc = r;
            }
        }
        return rc;
    }

    static void kq_geglu(int64_t rows, int64_t n, float *y, const float *x, const float *g, int gelu_only, int nth) {
        #pragma omp parallel num_threads(nth)
        {
            const int ith = omp_get_thread_num(), nt = omp_get_num_threads();
            for (int64_t r = rows * ith / nt; r < rows * (ith + 1) / nt; r++) {
                if (gelu_only) bk_gelu_f32(n, y + r * n, x + r * n);
                else bk_geglu_f32(n, y + r * n, x + r * n, g + r * n);
            }
        }
    }

    static uint8_t *kq_alloc(size_t n) {
        void *p = NULL;
        if (posix_memalign(&p, 64, n ? n : 1)) return NULL;
        return (uint8_t *)p;
    }
    """
    size_t kq_act_bytes(int wtype, int k) nogil
    void kq_matmul(int wtype, int repacked, const uint8_t *w, size_t rb, int64_t m, int k, const float *x, int n,
                   float *out, uint8_t *wdata, int nth) nogil
    int kq_repack(int wtype, const uint8_t *src, uint8_t *dst, int64_t m, int k, int nth) nogil
    void kq_geglu(int64_t rows, int64_t n, float *y, const float *x, const float *g, int gelu_only, int nth) nogil
    uint8_t *kq_alloc(size_t n) nogil

Q4_0, Q5_0, Q8_0, Q4_K, Q6_K, Q1_0, Q2_0 = 2, 6, 8, 12, 14, 41, 42
BLOCK = {Q4_0: (32, 18), Q5_0: (32, 22), Q8_0: (32, 34), Q4_K: (256, 144), Q6_K: (256, 210),
         Q1_0: (128, 18), Q2_0: (64, 18)}  # (values, bytes) a block
NAMES = {Q4_0: "Q4_0", Q5_0: "Q5_0", Q8_0: "Q8_0", Q4_K: "Q4_K", Q6_K: "Q6_K", Q1_0: "Q1_0", Q2_0: "Q2_0"}


def row_bytes(int wtype, int k):
    if wtype not in BLOCK:
        raise ValueError(f"weight type {wtype} is not one of {sorted(NAMES.values())}")
    qk, bb = BLOCK[wtype]
    if k <= 0 or k % qk:
        raise ValueError(f"{NAMES[wtype]} rows need a multiple of {qk} values, got {k}")
    return k // qk * bb


def repack_takes(int64_t m, int k, int wtype=Q4_K):
    """Whether llama-server b11192 repacks a matrix of m rows of k values of wtype (AVX2 build: Q4_K and Q4_0)."""
    if wtype == Q4_K:
        return bool(bk_repack_q4_K_takes(m, k))
    if wtype == Q4_0:
        return bool(bk_repack_q4_0_takes(m, k))
    return False


def _floats(x, int k):
    cdef cnp.ndarray a = np.ascontiguousarray(x, dtype=np.float32)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim != 2 or a.shape[1] != k:
        raise ValueError(f"activations must be float32 [n, {k}], got shape {list(np.shape(x))}")
    return a


cdef _quant_row(x, int qk, int bb, bint k_quant):
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] a = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    if a.shape[0] == 0 or a.shape[0] % qk:
        raise ValueError(f"a {'Q8_K' if k_quant else 'Q8_0'} row needs a multiple of {qk} values, got {a.shape[0]}")
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] y = np.empty(a.shape[0] // qk * bb, np.uint8)
    if k_quant:
        bk_quant_row_q8_K(&a[0], &y[0], a.shape[0])
    else:
        bk_quant_row_q8_0(&a[0], &y[0], a.shape[0])
    return y


def quant_row_q8_K(x):
    """quantize_row_q8_K of one row (k % 256 == 0): the Q8_K blocks as uint8 (292 bytes each)."""
    return _quant_row(x, 256, 292, True)


def quant_row_q8_0(x):
    """quantize_row_q8_0 (x86) of one row (k % 32 == 0): the Q8_0 blocks as uint8 (34 bytes each)."""
    return _quant_row(x, 32, 34, False)


def quant_mat_q8_K_4x8(x):
    """ggml_quantize_mat_q8_K_4x8 of four rows (float32 [4, k]): the block_q8_Kx4 blocks as uint8 (1168 each)."""
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] a = np.ascontiguousarray(x, dtype=np.float32)
    if a.shape[0] != 4 or a.shape[1] == 0 or a.shape[1] % 256:
        raise ValueError(f"four rows of a multiple of 256 values needed, got shape {list(np.shape(x))}")
    cdef cnp.ndarray[cnp.uint8_t, ndim=1, mode="c"] y = np.empty(a.shape[1] // 256 * 1168, np.uint8)
    bk_quant_mat_q8_K_4x8(&a[0, 0], a.shape[1], &y[0], a.shape[1])
    return y


def repack(int wtype, w, int k, int nth=1):
    """The 8x8 repack llama-server makes at load of a Q4_K (q4_K_8x8) or Q4_0 (q4_0_8x8) matrix (uint8
    [m, row_bytes], m % 8 == 0): a new uint8 array, same shape."""
    cdef cnp.ndarray[cnp.uint8_t, ndim=2, mode="c"] src = np.ascontiguousarray(w, dtype=np.uint8)
    if wtype not in (Q4_K, Q4_0):
        raise ValueError(f"only Q4_K and Q4_0 are repacked on this CPU, not {NAMES.get(wtype, wtype)}")
    if src.ndim != 2 or src.shape[1] != row_bytes(wtype, k):
        raise ValueError(f"{NAMES[wtype]} rows of {k} values are {row_bytes(wtype, k)} bytes, got {src.shape[1]}")
    if not repack_takes(src.shape[0], k, wtype):
        raise ValueError(f"a repacked {NAMES[wtype]} matrix needs a multiple of 8 rows, got {src.shape[0]}")
    cdef cnp.ndarray[cnp.uint8_t, ndim=2, mode="c"] dst = np.empty_like(src)
    with nogil:
        kq_repack(wtype, &src[0, 0], &dst[0, 0], src.shape[0], k, nth)
    return dst


def repack_q4_K(w, int k, int nth=1):
    return repack(Q4_K, w, k, nth)


_repack = repack


cdef class MatMul:
    """One weight matrix, ready to multiply: the GGUF rows (kept as given, a read-only view is fine) or, with
    repack=True (Q4_K or Q4_0), the 8x8 copy made once here, as llama-server makes it at load. The activation
    scratch is kept between calls (grown when a call has more columns)."""
    cdef readonly int wtype, k
    cdef readonly int64_t m
    cdef readonly bint repacked
    cdef object w
    cdef size_t rb
    cdef uint8_t *wdata
    cdef size_t wcap

    def __cinit__(self, int wtype, w, int k, bint repack=False, int nth=1):
        rb = row_bytes(wtype, k)
        a = np.asarray(w, dtype=np.uint8)
        if a.ndim != 2 or a.shape[1] != rb:
            raise ValueError(f"{NAMES[wtype]} weights of rows of {k} values must be uint8 [m, {rb}], got "
                             f"shape {list(a.shape)}")
        if repack and wtype not in (Q4_K, Q4_0):
            raise ValueError(f"only Q4_K and Q4_0 are repacked on this CPU, not {NAMES[wtype]}")
        self.wtype, self.k, self.m, self.rb, self.repacked = wtype, k, a.shape[0], rb, repack
        self.w = _repack(wtype, a, k, nth) if repack else np.ascontiguousarray(a)
        self.wdata, self.wcap = NULL, 0

    def __dealloc__(self):
        free(self.wdata)

    def __call__(self, x, int nth=1, out=None):
        """The node's result float32 [n, m] for activations x float32 [n, k] (into out when given)."""
        cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] xa = _floats(x, self.k)
        cdef int n = xa.shape[0]
        if n == 0:
            raise ValueError("a MUL_MAT needs at least one activation column")
        if nth <= 0:
            raise ValueError(f"thread counts must be positive, got nth={nth}")
        if out is None:
            out = np.empty((n, self.m), np.float32)
        cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] oa = out
        if oa.shape[0] != n or oa.shape[1] != self.m:
            raise ValueError(f"out must be float32 [{n}, {self.m}], got shape {list(np.shape(out))}")
        cdef cnp.ndarray[cnp.uint8_t, ndim=2, mode="c"] wa = self.w
        cdef size_t wsize = <size_t>n * kq_act_bytes(self.wtype, self.k)
        if wsize > self.wcap:
            free(self.wdata)
            self.wdata = kq_alloc(wsize)
            self.wcap = wsize if self.wdata != NULL else 0
            if self.wdata == NULL:
                raise MemoryError("activation scratch")
        with nogil:
            kq_matmul(self.wtype, self.repacked, &wa[0, 0], self.rb, self.m, self.k, &xa[0, 0], n, &oa[0, 0],
                      self.wdata, nth)
        return out

    @property
    def weights(self):
        """The bytes the kernels read (the repacked copy when repacked)."""
        return self.w


def _glu(x, g, int gelu_only, int nth):
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] xa = np.ascontiguousarray(np.atleast_2d(x), dtype=np.float32)
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] ga
    if gelu_only:
        ga = xa
    else:
        ga = np.ascontiguousarray(np.atleast_2d(g), dtype=np.float32)
        if ga.shape[0] != xa.shape[0] or ga.shape[1] != xa.shape[1]:
            raise ValueError(f"x {list(np.shape(x))} and g {list(np.shape(g))} must have the same shape")
    if nth <= 0:
        raise ValueError(f"thread counts must be positive, got nth={nth}")
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] y = np.empty_like(xa)
    if xa.size:
        with nogil:
            kq_geglu(xa.shape[0], xa.shape[1], &y[0, 0], &xa[0, 0], &ga[0, 0], gelu_only, nth)
    return y.reshape(np.shape(x))


def geglu(x, g, int nth=1):
    """GGML_GLU_OP_GEGLU (ggml_geglu_split(x, g)): gelu(x) * g, rows split between nth threads."""
    return _glu(x, g, 0, nth)


def gelu(x, int nth=1):
    """GGML_OP_GELU on float32 rows."""
    return _glu(x, None, 1, nth)


def gelu_table():
    """The F16 table (uint16 [65536]) bk_geglu_f32 looks up."""
    cdef cnp.ndarray[cnp.uint16_t, ndim=1, mode="c"] t = np.empty(1 << 16, np.uint16)
    bk_gelu_table_f16(&t[0])
    return t
