# cython: language_level=3
"""Test and benchmark shim over the attention and KV kernels (src/kernels/attention.h, kv.h).

Used only by tests/ and tests/bench/: the engine calls the kernels from its own compiled code. Arrays use
llama.cpp's layouts: q float32 [n_tokens, n_head, dk]; K and V caches uint16 (F16 bits) [n_cells, n_head_kv*d];
mask uint16 (F16 bits) [n_tokens, n_kv] or None; the result float32 [n_tokens, n_head, dv].
"""

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.stdlib cimport free
from libc.string cimport memset

from bankml.kernels.attention cimport (bk_attn_f16_args, bk_attn_f16_check, bk_attn_f16_path,
                                       bk_attn_f16_scratch_floats, bk_attn_q8_0_args, bk_attn_q8_0_check,
                                       bk_attn_q8_0_scratch_floats, bk_attn_rot_k_size, bk_hadamard_rows)
from bankml.kernels.kv cimport (bk_kv_apply_ubatch, bk_kv_cells, bk_kv_cells_clear, bk_kv_cells_init, bk_kv_find_slot,
                                bk_kv_mask_f16, bk_kv_n_kv, bk_kv_seq_pos_max, bk_kv_seq_pos_min, bk_kv_seq_rm,
                                bk_kv_store_f16, bk_kv_store_q8_0, bk_kv_used_max_p1)

cnp.import_array()

cdef extern from *:
    """
    #include <omp.h>
    #include <stdlib.h>
    #include "attention.h"
    #include "kv.h"
    /* Both phases inside one OpenMP region of nth threads, a barrier between them: how the engine calls it. */
    static void shim_attn_run(const bk_attn_f16_args *a, int nth) {
        #pragma omp parallel num_threads(nth)
        {
            const int ith = omp_get_thread_num(), n = omp_get_num_threads();
            bk_attn_f16(a, ith, n);
            #pragma omp barrier
            bk_attn_f16_reduce(a, ith, n);
        }
    }
    static void shim_store_run(const float *x, int64_t x_row, uint32_t n_tokens, uint32_t n, const uint32_t *idxs,
                               uint16_t *cache, int64_t cache_row, int nth) {
        #pragma omp parallel num_threads(nth)
        bk_kv_store_f16(x, x_row, n_tokens, n, idxs, cache, cache_row, omp_get_thread_num(), omp_get_num_threads());
    }
    static void shim_attn_q8_run(const bk_attn_q8_0_args *a, int nth) {
        #pragma omp parallel num_threads(nth)
        bk_attn_q8_0(a, omp_get_thread_num(), omp_get_num_threads());
    }
    static void shim_store_q8_run(const float *x, int64_t x_row, uint32_t n_tokens, uint32_t n,
                                  const uint32_t *idxs, uint8_t *cache, int64_t cache_row, int nth) {
        #pragma omp parallel num_threads(nth)
        bk_kv_store_q8_0(x, x_row, n_tokens, n, idxs, cache, cache_row, omp_get_thread_num(), omp_get_num_threads());
    }
    static void shim_hadamard_run(float *x, int64_t n_rows, int n, int nth) {
        #pragma omp parallel num_threads(nth)
        bk_hadamard_rows(x, n_rows, n, n, omp_get_thread_num(), omp_get_num_threads());
    }
    static float *shim_alloc_floats(size_t n) {
        void *p = NULL;
        if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float))) return NULL;
        return (float *)p;
    }
    """
    void shim_attn_run(const bk_attn_f16_args *a, int nth) nogil
    void shim_store_run(const float *x, int64_t x_row, uint32_t n_tokens, uint32_t n, const uint32_t *idxs,
                        uint16_t *cache, int64_t cache_row, int nth) nogil
    float *shim_alloc_floats(size_t n) nogil
    void shim_attn_q8_run(const bk_attn_q8_0_args *a, int nth) nogil
    void shim_store_q8_run(const float *x, int64_t x_row, uint32_t n_tokens, uint32_t n, const uint32_t *idxs,
                           uint8_t *cache, int64_t cache_row, int nth) nogil
    void shim_hadamard_run(float *x, int64_t n_rows, int n, int nth) nogil

PATH_NAMES = {0: "one_chunk", 1: "tiled", 2: "split_kv"}

_STATUS = {1: "bad shape (a count <= 0, or n_head not a multiple of n_head_kv)",
           2: "a stride smaller than the row it spans", 3: "a NULL pointer", 4: "oracle_nth <= 0"}


def path(int n_tokens, int n_kv, int dv):
    """The flash-attention path ggml takes: 'one_chunk', 'tiled' or 'split_kv'."""
    return PATH_NAMES[bk_attn_f16_path(n_tokens, n_kv, dv)]


def scratch_floats(int n_head, int dk, int dv, int oracle_nth, int nth):
    return bk_attn_f16_scratch_floats(n_head, dk, dv, oracle_nth, nth)


cdef class Attention:
    """Scratch for one shape family, allocated once (as the engine does), reused across calls."""
    cdef float *scratch
    cdef size_t n_scratch
    cdef readonly int n_head, dk, dv, oracle_nth, nth

    def __cinit__(self, int n_head, int dk, int dv, int oracle_nth=2, int nth=1):
        if n_head <= 0 or dk <= 0 or dv <= 0:
            raise ValueError(f"n_head, dk, dv must be positive, got {n_head}, {dk}, {dv}")
        if oracle_nth <= 0 or nth <= 0:
            raise ValueError(f"thread counts must be positive, got oracle_nth={oracle_nth}, nth={nth}")
        self.n_head, self.dk, self.dv, self.oracle_nth, self.nth = n_head, dk, dv, oracle_nth, nth
        self.n_scratch = bk_attn_f16_scratch_floats(n_head, dk, dv, oracle_nth, nth)
        self.scratch = shim_alloc_floats(self.n_scratch)
        if self.scratch == NULL:
            raise MemoryError("attention scratch")

    def __dealloc__(self):
        free(self.scratch)

    def __call__(self, q, kcache, vcache, mask, int n_kv, int n_head_kv, float scale, out=None):
        """Flash attention of q over cells 0..n_kv-1 of the caches; returns out (float32 [n_tokens, n_head, dv])."""
        cdef cnp.ndarray[cnp.float32_t, ndim=3, mode="c"] qa = np.ascontiguousarray(q, dtype=np.float32)
        cdef cnp.ndarray[cnp.uint16_t, ndim=2, mode="c"] ka = np.ascontiguousarray(kcache, dtype=np.uint16)
        cdef cnp.ndarray[cnp.uint16_t, ndim=2, mode="c"] va = np.ascontiguousarray(vcache, dtype=np.uint16)
        cdef cnp.ndarray[cnp.uint16_t, ndim=2, mode="c"] ma
        cdef cnp.ndarray[cnp.float32_t, ndim=3, mode="c"] oa
        cdef bk_attn_f16_args a
        n_tokens = qa.shape[0]
        if qa.shape[1] != self.n_head or qa.shape[2] != self.dk:
            raise ValueError(f"q must be [n_tokens, {self.n_head}, {self.dk}], got {list(np.shape(q))}")
        if n_head_kv <= 0 or self.n_head % n_head_kv:
            raise ValueError(f"n_head {self.n_head} is not a multiple of n_head_kv {n_head_kv}")
        if ka.shape[1] != n_head_kv * self.dk or va.shape[1] != n_head_kv * self.dv:
            raise ValueError(f"caches must be [cells, n_head_kv*d] = [.., {n_head_kv * self.dk}] and "
                             f"[.., {n_head_kv * self.dv}], got {list(np.shape(kcache))} and {list(np.shape(vcache))}")
        if n_kv <= 0 or n_kv > ka.shape[0] or n_kv > va.shape[0]:
            raise ValueError(f"n_kv {n_kv} must be in 1..{min(ka.shape[0], va.shape[0])} (the cache cells)")
        if out is None:
            out = np.empty((n_tokens, self.n_head, self.dv), dtype=np.float32)
        oa = out
        if oa.shape[0] != n_tokens or oa.shape[1] != self.n_head or oa.shape[2] != self.dv:
            raise ValueError(f"out must be [{n_tokens}, {self.n_head}, {self.dv}], got {list(np.shape(out))}")
        memset(&a, 0, sizeof(a))
        a.n_tokens, a.n_head, a.n_head_kv, a.dk, a.dv, a.n_kv = n_tokens, self.n_head, n_head_kv, self.dk, self.dv, n_kv
        a.scale = scale
        a.oracle_nth = self.oracle_nth
        a.q, a.q_row, a.q_head = &qa[0, 0, 0], self.n_head * self.dk, self.dk
        a.k, a.k_cell, a.k_head = &ka[0, 0], ka.shape[1], self.dk
        a.v, a.v_cell, a.v_head = &va[0, 0], va.shape[1], self.dv
        if mask is not None:
            ma = np.ascontiguousarray(mask, dtype=np.uint16)
            if ma.shape[0] != n_tokens or ma.shape[1] < n_kv:
                raise ValueError(f"mask must be [{n_tokens}, >= {n_kv}], got {list(np.shape(mask))}")
            a.mask, a.mask_row = &ma[0, 0], ma.shape[1]
        a.out, a.out_row, a.out_head = &oa[0, 0, 0], self.n_head * self.dv, self.dv
        a.scratch = self.scratch
        st = bk_attn_f16_check(&a)
        if st:
            raise ValueError(f"bk_attn_f16: {_STATUS.get(st, st)}")
        with nogil:
            shim_attn_run(&a, self.nth)
        return out


def store_f16(cache, x, idxs, int nth=1):
    """SET_ROWS into an F16 cache in place: cache[idxs[t]] = f16(x[t]) (RNE)."""
    cdef cnp.ndarray[cnp.uint16_t, ndim=2, mode="c"] ca = cache
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] xa = np.ascontiguousarray(x, dtype=np.float32)
    cdef cnp.ndarray[cnp.uint32_t, ndim=1, mode="c"] ia = np.ascontiguousarray(idxs, dtype=np.uint32)
    if xa.shape[0] != ia.shape[0] or xa.shape[1] > ca.shape[1]:
        raise ValueError(f"x {list(np.shape(x))} does not fit idxs {ia.shape[0]} / cache rows {ca.shape[1]}")
    if ia.shape[0] and ia.max() >= ca.shape[0]:
        raise ValueError(f"a cell index {ia.max()} is outside the cache ({ca.shape[0]} cells)")
    if ia.shape[0] == 0:
        return
    with nogil:
        shim_store_run(&xa[0, 0], xa.shape[1], xa.shape[0], xa.shape[1], &ia[0], &ca[0, 0], ca.shape[1], nth)


Q8_0_BLOCK = 34  # bytes of a Q8_0 block of 32 values


def rot_k_size(int dk):
    """The Hadamard size llama.cpp rotates Q and K by with a quantized cache (0: no rotation)."""
    return bk_attn_rot_k_size(dk)


def hadamard(x, int n, int nth=1):
    """ggml's fwht on every n-value row of x (float32, size a multiple of n): returns a new array."""
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] y = np.array(x, dtype=np.float32).reshape(-1)
    if n <= 0 or n & (n - 1):
        raise ValueError(f"the Hadamard size must be a power of two, got {n}")
    if y.shape[0] % n:
        raise ValueError(f"{y.shape[0]} values are not rows of {n}")
    if y.shape[0]:
        with nogil:
            shim_hadamard_run(&y[0], y.shape[0] // n, n, nth)
    return y.reshape(np.shape(x))


def store_q8_0(cache, x, idxs, int nth=1):
    """SET_ROWS into a Q8_0 cache (uint8 [cells, n/32*34]) in place: cache[idxs[t]] = quantize_row_q8_0(x[t])."""
    cdef cnp.ndarray[cnp.uint8_t, ndim=2, mode="c"] ca = cache
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] xa = np.ascontiguousarray(x, dtype=np.float32)
    cdef cnp.ndarray[cnp.uint32_t, ndim=1, mode="c"] ia = np.ascontiguousarray(idxs, dtype=np.uint32)
    if xa.shape[1] % 32 or xa.shape[1] // 32 * Q8_0_BLOCK > ca.shape[1] or xa.shape[0] != ia.shape[0]:
        raise ValueError(f"x {list(np.shape(x))} must have rows of a multiple of 32 values that fit the cache rows "
                         f"({ca.shape[1]} bytes) and one row per index ({ia.shape[0]})")
    if ia.shape[0] and ia.max() >= ca.shape[0]:
        raise ValueError(f"a cell index {ia.max()} is outside the cache ({ca.shape[0]} cells)")
    if ia.shape[0] == 0:
        return
    with nogil:
        shim_store_q8_run(&xa[0, 0], xa.shape[1], xa.shape[0], xa.shape[1], &ia[0], &ca[0, 0], ca.shape[1], nth)


cdef class AttentionQ8:
    """Flash attention over a Q8_0 cache (uint8 [cells, n_head_kv*d/32*34]); scratch allocated once."""
    cdef float *scratch
    cdef readonly int n_head, dk, dv, nth

    def __cinit__(self, int n_head, int dk, int dv, int nth=1):
        if n_head <= 0 or dk <= 0 or dv <= 0 or dk % 32 or dv % 32:
            raise ValueError(f"n_head > 0 and head sizes multiples of 32 needed, got {n_head}, {dk}, {dv}")
        if nth <= 0:
            raise ValueError(f"thread counts must be positive, got nth={nth}")
        self.n_head, self.dk, self.dv, self.nth = n_head, dk, dv, nth
        self.scratch = shim_alloc_floats(bk_attn_q8_0_scratch_floats(n_head, dk, dv, nth))
        if self.scratch == NULL:
            raise MemoryError("attention scratch")

    def __dealloc__(self):
        free(self.scratch)

    def __call__(self, q, kcache, vcache, mask, int n_kv, int n_head_kv, float scale):
        cdef cnp.ndarray[cnp.float32_t, ndim=3, mode="c"] qa = np.ascontiguousarray(q, dtype=np.float32)
        cdef cnp.ndarray[cnp.uint8_t, ndim=2, mode="c"] ka = np.ascontiguousarray(kcache, dtype=np.uint8)
        cdef cnp.ndarray[cnp.uint8_t, ndim=2, mode="c"] va = np.ascontiguousarray(vcache, dtype=np.uint8)
        cdef cnp.ndarray[cnp.uint16_t, ndim=2, mode="c"] ma
        cdef cnp.ndarray[cnp.float32_t, ndim=3, mode="c"] oa
        cdef bk_attn_q8_0_args a
        n_tokens = qa.shape[0]
        if qa.shape[1] != self.n_head or qa.shape[2] != self.dk:
            raise ValueError(f"q must be [n_tokens, {self.n_head}, {self.dk}], got {list(np.shape(q))}")
        if n_head_kv <= 0 or self.n_head % n_head_kv:
            raise ValueError(f"n_head {self.n_head} is not a multiple of n_head_kv {n_head_kv}")
        kb, vb = self.dk // 32 * Q8_0_BLOCK, self.dv // 32 * Q8_0_BLOCK
        if ka.shape[1] != n_head_kv * kb or va.shape[1] != n_head_kv * vb:
            raise ValueError(f"caches must be [cells, {n_head_kv * kb}] and [cells, {n_head_kv * vb}] bytes")
        if n_kv <= 0 or n_kv > ka.shape[0] or n_kv > va.shape[0]:
            raise ValueError(f"n_kv {n_kv} must be in 1..{min(ka.shape[0], va.shape[0])} (the cache cells)")
        out = np.empty((n_tokens, self.n_head, self.dv), dtype=np.float32)
        oa = out
        memset(&a, 0, sizeof(a))
        a.n_tokens, a.n_head, a.n_head_kv, a.dk, a.dv, a.n_kv = n_tokens, self.n_head, n_head_kv, self.dk, self.dv, n_kv
        a.scale = scale
        a.q, a.q_row, a.q_head = &qa[0, 0, 0], self.n_head * self.dk, self.dk
        a.k, a.k_cell, a.k_head = &ka[0, 0], ka.shape[1], kb
        a.v, a.v_cell, a.v_head = &va[0, 0], va.shape[1], vb
        if mask is not None:
            ma = np.ascontiguousarray(mask, dtype=np.uint16)
            if ma.shape[0] != n_tokens or ma.shape[1] < n_kv:
                raise ValueError(f"mask must be [{n_tokens}, >= {n_kv}], got {list(np.shape(mask))}")
            a.mask, a.mask_row = &ma[0, 0], ma.shape[1]
        a.out, a.out_row, a.out_head = &oa[0, 0, 0], self.n_head * self.dv, self.dv
        a.scratch = self.scratch
        st = bk_attn_q8_0_check(&a)
        if st:
            raise ValueError(f"bk_attn_q8_0: {_STATUS.get(st, st)}")
        with nogil:
            shim_attn_q8_run(&a, self.nth)
        return out


cdef class KVCells:
    """One sequence's KV cells under llama.cpp's rules (kv.h)."""
    cdef bk_kv_cells c
    cdef cnp.ndarray pos_buf

    def __cinit__(self, unsigned int size, unsigned int n_swa=0, int swa_type=0):
        if size == 0:
            raise ValueError("a KV cache needs at least one cell")
        if swa_type not in (0, 1, 2, 3):
            raise ValueError(f"swa_type must be 0..3 (llama_swa_type), got {swa_type}")
        if swa_type != 0 and n_swa == 0:
            raise ValueError("a sliding-window cache needs n_swa > 0")
        self.pos_buf = np.empty(size, dtype=np.int32)
        bk_kv_cells_init(&self.c, <int32_t *>cnp.PyArray_DATA(self.pos_buf), size, n_swa, swa_type)

    @property
    def pos(self):
        return self.pos_buf.copy()

    @property
    def head(self):
        return self.c.head

    @property
    def used(self):
        return self.c.used

    @property
    def size(self):
        return self.c.size

    def clear(self):
        bk_kv_cells_clear(&self.c)

    def find_slot(self, positions):
        """Cells for a ubatch at these positions (uint32 array), or None when they do not fit."""
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] p = np.ascontiguousarray(positions, dtype=np.int32)
        cdef cnp.ndarray[cnp.uint32_t, ndim=1, mode="c"] idx = np.empty(max(p.shape[0], 1), dtype=np.uint32)
        if p.shape[0] == 0:
            raise ValueError("an empty ubatch has no slot")
        if bk_kv_find_slot(&self.c, &p[0], p.shape[0], &idx[0]) != 0:
            return None
        return idx

    def apply_ubatch(self, idxs, positions):
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] p = np.ascontiguousarray(positions, dtype=np.int32)
        cdef cnp.ndarray[cnp.uint32_t, ndim=1, mode="c"] idx = np.ascontiguousarray(idxs, dtype=np.uint32)
        if p.shape[0] != idx.shape[0] or p.shape[0] == 0:
            raise ValueError("idxs and positions must have the same, non-zero length")
        if idx.max() >= self.c.size:
            raise ValueError(f"cell {idx.max()} is outside the cache ({self.c.size} cells)")
        bk_kv_apply_ubatch(&self.c, &idx[0], &p[0], p.shape[0])

    def seq_rm(self, int p0, int p1=-1):
        bk_kv_seq_rm(&self.c, p0, p1)

    def used_max_p1(self):
        return bk_kv_used_max_p1(&self.c)

    def pos_min(self):
        return bk_kv_seq_pos_min(&self.c)

    def pos_max(self):
        return bk_kv_seq_pos_max(&self.c)

    def n_kv(self):
        return bk_kv_n_kv(&self.c)

    def mask(self, positions, n_kv=None):
        """The F16 KQ mask (uint16 bits) [n_tokens, n_kv] for a ubatch at these positions."""
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] p = np.ascontiguousarray(positions, dtype=np.int32)
        cdef unsigned int nkv = bk_kv_n_kv(&self.c) if n_kv is None else n_kv
        if nkv > self.c.size:
            raise ValueError(f"n_kv {nkv} exceeds the cache ({self.c.size} cells)")
        cdef cnp.ndarray[cnp.uint16_t, ndim=2, mode="c"] m = np.empty((p.shape[0], nkv), dtype=np.uint16)
        if p.shape[0] and nkv:
            bk_kv_mask_f16(&self.c, &p[0], p.shape[0], nkv, &m[0, 0], nkv, 0, 1)
        return m
