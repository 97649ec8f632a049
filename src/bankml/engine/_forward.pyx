# cython: language_level=3
"""Compiled core of bankml.engine: the llama forward pass (src/kernels/forward.h) behind two small objects.

    _Llama(config, weights, n_ubatch, kv_max, n_threads, oracle_threads)   weights: views into the mmap
    _KVCache(llama, n_cells, kv_type)                                        one sequence's cells and K/V
    llama.decode(cache, tokens, pos)      one call into C (GIL released) for every ubatch of the call
    llama.logits_view()                   float32[n_vocab] over the state's logits buffer (no copy)

Used only by bankml.engine.model, which validates the arguments (positions, token ids, fit) before calling.
"""

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy

cnp.import_array()

cdef extern from "kv.h" nogil:
    ctypedef struct bk_kv_cells:
        int32_t *pos
        uint32_t size, head, used
    void bk_kv_cells_clear(bk_kv_cells *c)
    void bk_kv_seq_rm(bk_kv_cells *c, int32_t p0, int32_t p1)
    int32_t bk_kv_seq_pos_max(const bk_kv_cells *c)
    void bk_kv_apply_ubatch(bk_kv_cells *c, const uint32_t *idxs, const int32_t *pos, uint32_t n_tokens)

from bankml.engine._kernels cimport bk_matrix, bk_matmul_supported

cdef extern from "forward.h" nogil:
    ctypedef struct bk_llama_config:
        int32_t n_embd, n_layer, n_head, n_head_kv, head_dim, n_rot, n_ff, n_vocab
        float rms_eps, rope_freq_base, kq_scale
    ctypedef struct bk_llama_layer:
        const float *attn_norm
        const float *ffn_norm
        bk_matrix wq, wk, wv, wo, gate, up, down
    ctypedef struct bk_llama_weights:
        bk_matrix tok_embd
        const float *output_norm
        bk_matrix output
        const bk_llama_layer *layers
    ctypedef struct bk_kv_cache:
        bk_kv_cells cells
        int32_t type
        uint32_t size
        int32_t n_layer
        size_t k_row_bytes, v_row_bytes
        uint8_t *data
    ctypedef struct bk_llama_state:
        int32_t n_ubatch, nth, oracle_nth
        uint32_t kv_max
        float *logits
        int32_t multi_stream
    int BK_FWD_OK, BK_FWD_NO_MEMORY, BK_FWD_CACHE_FULL, BK_FWD_BAD_ARGS
    int bk_kv_cache_alloc(bk_kv_cache *kv, const bk_llama_config *cfg, uint32_t n_cells, int32_t kv_type)
    void bk_kv_cache_free(bk_kv_cache *kv)
    int bk_llama_state_alloc(bk_llama_state *st, const bk_llama_config *cfg, const bk_llama_weights *w,
                             int32_t n_ubatch, uint32_t kv_max, int32_t nth, int32_t oracle_nth)
    void bk_llama_state_free(bk_llama_state *st)
    int bk_llama_pack(bk_llama_weights *w, bk_llama_layer *layers, int n_layer, int nth)
    void bk_llama_unpack(bk_llama_weights *w, bk_llama_layer *layers, int n_layer)
    int bk_llama_decode(const bk_llama_config *cfg, const bk_llama_weights *w, bk_kv_cache *kv,
                        bk_llama_state *st, const int32_t *tokens, int32_t n, int32_t pos0)

KV_TYPES = {"f16": 1, "q8_0": 8}


cdef const void *_ptr(arr) except NULL:
    cdef cnp.ndarray a = arr
    if a.nbytes == 0:
        raise ValueError("an empty tensor")
    return <const void *>cnp.PyArray_DATA(a)


cdef bk_matrix _matrix(spec) except *:
    """spec: (uint8 array of the tensor's bytes, ggml type, k, m, row_bytes)"""
    cdef bk_matrix mat
    data, t, k, m, rb = spec
    if not bk_matmul_supported(t, k):
        raise ValueError(f"no matmul kernel for ggml type {t} with rows of {k}")
    mat.data = _ptr(data)
    mat.type = t
    mat.k = k
    mat.m = m
    mat.row_bytes = rb
    mat.x8 = NULL
    return mat


cdef class _Llama:
    """Config + weights (views) + run state of one model; K/V caches are separate _KVCache objects."""
    cdef bk_llama_config cfg
    cdef bk_llama_weights w
    cdef bk_llama_layer *layers
    cdef bk_llama_state st
    cdef bint have_state
    cdef bint is_packed
    cdef object keep      # the numpy views the weight pointers point into (and through them the mmap)
    cdef object _logits

    def __cinit__(self):
        self.layers = NULL
        self.have_state = False
        self.is_packed = False

    def __init__(self, dict config, dict weights, int n_ubatch, unsigned int kv_max, int n_threads,
                 int oracle_threads, bint pack=True):
        c = config
        self.cfg.n_embd = c["n_embd"]; self.cfg.n_layer = c["n_layer"]; self.cfg.n_head = c["n_head"]
        self.cfg.n_head_kv = c["n_head_kv"]; self.cfg.head_dim = c["head_dim"]; self.cfg.n_rot = c["n_rot"]
        self.cfg.n_ff = c["n_ff"]; self.cfg.n_vocab = c["n_vocab"]; self.cfg.rms_eps = c["rms_eps"]
        self.cfg.rope_freq_base = c["rope_freq_base"]; self.cfg.kq_scale = c["kq_scale"]
        layers = weights["layers"]
        if len(layers) != self.cfg.n_layer:
            raise ValueError(f"{len(layers)} layers given for a model of {self.cfg.n_layer}")
        self.layers = <bk_llama_layer *>calloc(self.cfg.n_layer, sizeof(bk_llama_layer))
        if self.layers == NULL:
            raise MemoryError("layer table")
        keep = []
        cdef int i
        cdef int prc
        for i, L in enumerate(layers):
            self.layers[i].attn_norm = <const float *>_ptr(L["attn_norm"])
            self.layers[i].ffn_norm = <const float *>_ptr(L["ffn_norm"])
            self.layers[i].wq = _matrix(L["wq"]); self.layers[i].wk = _matrix(L["wk"])
            self.layers[i].wv = _matrix(L["wv"]); self.layers[i].wo = _matrix(L["wo"])
            self.layers[i].gate = _matrix(L["gate"]); self.layers[i].up = _matrix(L["up"])
            self.layers[i].down = _matrix(L["down"])
            keep.append(L)
        self.w.tok_embd = _matrix(weights["tok_embd"])
        self.w.output_norm = <const float *>_ptr(weights["output_norm"])
        self.w.output = _matrix(weights["output"])
        self.w.layers = self.layers
        keep.append(weights)
        self.keep = keep
        prc = BK_FWD_OK
        if pack:
            self.is_packed = True
            with nogil:
                prc = bk_llama_pack(&self.w, self.layers, self.cfg.n_layer, n_threads)
            if prc != BK_FWD_OK:
                raise MemoryError("the regrouped weights")
        rc = bk_llama_state_alloc(&self.st, &self.cfg, &self.w, n_ubatch, kv_max, n_threads, oracle_threads)
        if rc == BK_FWD_NO_MEMORY:
            raise MemoryError("the forward pass's buffers")
        if rc != BK_FWD_OK:
            raise ValueError(f"bad state arguments (n_ubatch {n_ubatch}, kv_max {kv_max}, threads {n_threads}, "
                             f"oracle threads {oracle_threads})")
        self.have_state = True
        cdef cnp.npy_intp dims[1]
        dims[0] = self.cfg.n_vocab
        arr = cnp.PyArray_SimpleNewFromData(1, dims, cnp.NPY_FLOAT32, <void *>self.st.logits)
        cnp.set_array_base(arr, self)
        self._logits = arr

    def __dealloc__(self):
        if self.have_state:
            bk_llama_state_free(&self.st)
        if self.is_packed and self.layers != NULL:
            bk_llama_unpack(&self.w, self.layers, self.cfg.n_layer)
        free(self.layers)

    @property
    def packed(self):
        return self.is_packed

    @property
    def n_ubatch(self):
        return self.st.n_ubatch

    @property
    def kv_max(self):
        return self.st.kv_max

    @property
    def n_threads(self):
        return self.st.nth

    @property
    def oracle_threads(self):
        return self.st.oracle_nth

    def logits_view(self):
        return self._logits

    def decode(self, _KVCache cache, tokens, int pos, bint multi_stream=False):
        """One llama_decode; returns the status (0 ok, 2 cache full). tokens: int32 array, validated by the caller.
        multi_stream: the sequence is one stream of a ubatch with several (no split-KV attention)."""
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] t = np.ascontiguousarray(tokens, dtype=np.int32)
        cdef int n = t.shape[0]
        cdef int rc
        if n == 0:
            raise ValueError("no tokens")
        if cache.kv.size > self.st.kv_max:
            raise ValueError(f"a cache of {cache.kv.size} cells is larger than this state's {self.st.kv_max}")
        self.st.multi_stream = 1 if multi_stream else 0
        with nogil:
            rc = bk_llama_decode(&self.cfg, &self.w, &cache.kv, &self.st, &t[0], n, pos)
        self.st.multi_stream = 0
        return rc


cdef class _KVCache:
    """One sequence's KV cache (cells and per-layer K/V rows), allocated zeroed at creation."""
    cdef bk_kv_cache kv
    cdef bint have

    def __cinit__(self):
        self.have = False

    def __init__(self, _Llama llama, unsigned int n_cells, str kv_type="f16"):
        if kv_type not in KV_TYPES:
            raise ValueError(f"cache type {kv_type!r}: one of {sorted(KV_TYPES)}")
        rc = bk_kv_cache_alloc(&self.kv, &llama.cfg, n_cells, KV_TYPES[kv_type])
        if rc == BK_FWD_NO_MEMORY:
            raise MemoryError(f"a KV cache of {n_cells} cells")
        if rc != BK_FWD_OK:
            raise ValueError(f"a {kv_type} KV cache of {n_cells} cells cannot be made for this model")
        self.have = True

    def __dealloc__(self):
        if self.have:
            bk_kv_cache_free(&self.kv)

    @property
    def size(self):
        return self.kv.size

    @property
    def kv_type(self):
        return "f16" if self.kv.type == 1 else "q8_0"

    @property
    def n_past(self):
        """Positions held: the largest + 1 (0 when empty)."""
        return bk_kv_seq_pos_max(&self.kv.cells) + 1

    @property
    def cell_bytes(self):
        """Bytes of one cell's K and V rows over every layer (what state_bytes holds per position)."""
        return self.kv.n_layer * (self.kv.k_row_bytes + self.kv.v_row_bytes)

    @property
    def used(self):
        return self.kv.cells.used

    def seq_rm(self, int p0, int p1=-1):
        bk_kv_seq_rm(&self.kv.cells, p0, p1)

    def clear(self):
        bk_kv_cells_clear(&self.kv.cells)

    def state_bytes(self, int n):
        """Positions 0..n-1: the K and V rows of cells 0..n-1 of every layer (cell == position here)."""
        cdef size_t rk = self.kv.k_row_bytes, rv = self.kv.v_row_bytes
        cdef size_t per = <size_t>n * (rk + rv)
        out = bytearray(per * self.kv.n_layer)
        cdef unsigned char[::1] o = out
        cdef int l
        cdef uint8_t *base
        for l in range(self.kv.n_layer):
            base = self.kv.data + <size_t>l * self.kv.size * (rk + rv)
            if n:
                memcpy(&o[l * per], base, n * rk)
                memcpy(&o[l * per + n * rk], base + self.kv.size * rk, n * rv)
        return bytes(out)

    def load_state(self, const unsigned char[::1] data, int n):
        """The inverse of state_bytes: cells 0..n-1 hold positions 0..n-1 with these K and V rows."""
        cdef size_t rk = self.kv.k_row_bytes, rv = self.kv.v_row_bytes
        cdef size_t per = <size_t>n * (rk + rv)
        cdef int l
        cdef uint8_t *base
        if n < 0 or <size_t>n > self.kv.size or <size_t>data.shape[0] != per * self.kv.n_layer:
            raise ValueError(f"{data.shape[0]} bytes are not the state of {n} cells of this cache")
        bk_kv_cells_clear(&self.kv.cells)
        for l in range(self.kv.n_layer):
            base = self.kv.data + <size_t>l * self.kv.size * (rk + rv)
            if n:
                memcpy(base, &data[l * per], n * rk)
                memcpy(base + self.kv.size * rk, &data[l * per + n * rk], n * rv)
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] pos = np.arange(max(n, 1), dtype=np.int32)
        cdef cnp.ndarray[cnp.uint32_t, ndim=1, mode="c"] idx = np.arange(max(n, 1), dtype=np.uint32)
        if n:
            bk_kv_apply_ubatch(&self.kv.cells, &idx[0], &pos[0], n)
