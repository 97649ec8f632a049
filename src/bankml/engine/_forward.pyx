# cython: language_level=3
"""Compiled core of bankml.engine: the forward pass (src/kernels/forward.h) behind two small objects.

    _Forward(arch, config, weights, n_ubatch, kv_max, n_threads, oracle_threads, pack=True)
                                          arch: the GGUF architecture name ("llama"); weights: views into the mmap
    _KVCache(forward, n_cells, kv_type, n_swa=0, swa_type="none", swa_full=False, rope="normal")
                                          one sequence's cells and K/V (rope: the K shift's RoPE, normal or neox)
    forward.decode(cache, tokens, pos)    one call into C (GIL released) for every ubatch of the call
    forward.logits_view()                 float32[n_vocab] over the state's logits buffer (no copy)
    forward.decode_embd(cache, tokens, pos)   decode with embeddings on: (status, float32[n][n_embd] t_embd)
    forward.decode_embd_streams(caches, tokens, nst, positions)   one ubatch of several sequences, embeddings on
    pool_mean(rows), pool_mean_ubatch(rows, ns), pool_mean_rows(rows, cols, ns), embd_normalize(vec, mode)  src/kernels/pool.h

Used only by bankml.engine.model, which validates the arguments (positions, token ids, fit) before calling.
"""

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy

from bankml.kernels.forward cimport (BK_ARCH_COUNT, BK_FWD_BAD_ARGS, BK_FWD_CACHE_FULL, BK_FWD_NO_MEMORY, BK_FWD_OK,
                                     bk_arch_from_name, bk_arch_name, bk_fwd_decode, bk_fwd_decode_embd,
                                     bk_fwd_decode_embd_streams,
                                     bk_fwd_decode_seqs, bk_fwd_seq, bk_fwd_decode_unified,
                                     bk_fwd_decode_embd_unified,
                                     bk_kv_cache_make_unified,
                                     bk_fwd_pack, bk_fwd_state,
                                     bk_fwd_state_alloc, bk_fwd_state_free, bk_fwd_unpack, bk_kv_cache,
                                     bk_kv_cache_alloc, bk_kv_cache_alloc_swa, bk_kv_cache_free, bk_layer, bk_model_config,
                                     bk_model_weights)
from bankml.kernels.kv cimport (BK_SWA_CHUNKED, BK_SWA_NONE, BK_SWA_STANDARD, BK_SWA_SYMMETRIC, bk_kv_apply_ubatch,
                                bk_kv_cells_clear, bk_kv_find_slot, bk_kv_seq_pos_max, bk_kv_seq_pos_min,
                                bk_kv_seq_rm)
from bankml.kernels.matmul cimport BK_TYPE_F16, BK_TYPE_Q8_0, bk_matmul_supported, bk_matrix
from bankml.kernels.pool cimport bk_embd_normalize, bk_pool_mean, bk_pool_mean_rows, bk_pool_mean_ubatch
from bankml.kernels.kv cimport (bk_kv_seq_add, bk_kvu_apply_ubatch, bk_kvu_seq_pos_max, bk_kvu_seq_pos_min,
                                bk_kvu_seq_rm)
from bankml.kernels.rope cimport bk_rope_shift_f16, bk_rope_shift_q8_0, bk_rope_theta_scale
from bankml.kernels.attention cimport bk_attn_rot_k_size
from bankml.kernels.forward cimport bk_kv_cache_k

cnp.import_array()

KV_TYPES = {"f16": BK_TYPE_F16, "q8_0": BK_TYPE_Q8_0}
SWA_TYPES = {"none": BK_SWA_NONE, "standard": BK_SWA_STANDARD, "chunked": BK_SWA_CHUNKED,
             "symmetric": BK_SWA_SYMMETRIC}


def architectures():
    """The GGUF architecture names bankml has a forward graph for (src/kernels/forward_archs.h)."""
    return [bk_arch_name(a).decode() for a in range(BK_ARCH_COUNT)]


cdef const void *_ptr(arr) except NULL:
    cdef cnp.ndarray a = arr
    if a.nbytes == 0:
        raise ValueError("an empty tensor")
    return <const void *>cnp.PyArray_DATA(a)


cdef const float *_vector_or_null(arr) except? NULL:
    """An optional norm: NULL when the layer has none (None)."""
    return NULL if arr is None else <const float *>_ptr(arr)


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


cdef int _swa_type(name) except -1:
    if name not in SWA_TYPES:
        raise ValueError(f"sliding-window type {name!r}: one of {sorted(SWA_TYPES)}")
    return SWA_TYPES[name]


cdef class _Forward:
    """Config + weights (views) + run state of one model; K/V caches are separate _KVCache objects.

    config: n_embd, n_layer, n_head, n_head_kv, head_dim, n_rot, n_ff, n_vocab, rms_eps, rope_freq_base, kq_scale;
    optional (other architectures): n_swa (0), swa_type ("none"), rope_freq_base_swa (0: rope_freq_base).
    weights: tok_embd, output_norm, output, layers (each attn_norm, ffn_norm, wq, wk, wv, wo, gate, up, down;
    optional: q_norm, k_norm, attn_post_norm, ffn_post_norm (None or absent: none), swa (False))."""
    cdef bk_model_config cfg
    cdef bk_model_weights w
    cdef bk_layer *layers
    cdef bk_fwd_state st
    cdef bint have_state
    cdef bint is_packed
    cdef object keep      # the numpy views the weight pointers point into (and through them the mmap)
    cdef readonly str arch

    def __cinit__(self):
        self.layers = NULL
        self.have_state = False
        self.is_packed = False

    def __init__(self, str arch, dict config, dict weights, int n_ubatch, unsigned int kv_max, int n_threads,
                 int oracle_threads, bint pack=True):
        cdef int a = bk_arch_from_name(arch.encode())
        if a < 0:
            raise ValueError(f"architecture {arch!r}: bankml computes {', '.join(architectures())}")
        self.arch = arch
        c = config
        self.cfg.arch = a
        self.cfg.n_embd = c["n_embd"]; self.cfg.n_layer = c["n_layer"]; self.cfg.n_head = c["n_head"]
        self.cfg.n_head_kv = c["n_head_kv"]; self.cfg.head_dim = c["head_dim"]; self.cfg.n_rot = c["n_rot"]
        self.cfg.n_ff = c["n_ff"]; self.cfg.n_vocab = c["n_vocab"]; self.cfg.rms_eps = c["rms_eps"]
        self.cfg.rope_freq_base = c["rope_freq_base"]; self.cfg.kq_scale = c["kq_scale"]
        self.cfg.n_swa = c.get("n_swa", 0); self.cfg.swa_type = _swa_type(c.get("swa_type", "none"))
        self.cfg.rope_freq_base_swa = c.get("rope_freq_base_swa", 0.0)
        layers = weights["layers"]
        if len(layers) != self.cfg.n_layer:
            raise ValueError(f"{len(layers)} layers given for a model of {self.cfg.n_layer}")
        self.layers = <bk_layer *>calloc(self.cfg.n_layer, sizeof(bk_layer))
        if self.layers == NULL:
            raise MemoryError("layer table")
        keep = []
        cdef int i
        cdef int prc
        cdef bk_layer *Lc
        for i, L in enumerate(layers):
            Lc = &self.layers[i]
            Lc.attn_norm = <const float *>_ptr(L["attn_norm"])
            Lc.ffn_norm = <const float *>_ptr(L["ffn_norm"])
            Lc.q_norm = _vector_or_null(L.get("q_norm")); Lc.k_norm = _vector_or_null(L.get("k_norm"))
            Lc.attn_post_norm = _vector_or_null(L.get("attn_post_norm"))
            Lc.ffn_post_norm = _vector_or_null(L.get("ffn_post_norm"))
            Lc.swa = 1 if L.get("swa", False) else 0
            Lc.wq = _matrix(L["wq"]); Lc.wk = _matrix(L["wk"]); Lc.wv = _matrix(L["wv"]); Lc.wo = _matrix(L["wo"])
            Lc.gate = _matrix(L["gate"]); Lc.up = _matrix(L["up"]); Lc.down = _matrix(L["down"])
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
                prc = bk_fwd_pack(&self.w, self.layers, self.cfg.n_layer, n_threads)
            if prc != BK_FWD_OK:
                raise MemoryError("the regrouped weights")
        rc = bk_fwd_state_alloc(&self.st, &self.cfg, &self.w, n_ubatch, kv_max, n_threads, oracle_threads)
        if rc == BK_FWD_NO_MEMORY:
            raise MemoryError("the forward pass's buffers")
        if rc != BK_FWD_OK:
            raise ValueError(f"bad state arguments (n_ubatch {n_ubatch}, kv_max {kv_max}, threads {n_threads}, "
                             f"oracle threads {oracle_threads})")
        self.have_state = True

    def __dealloc__(self):
        if self.have_state:
            bk_fwd_state_free(&self.st)
        if self.is_packed and self.layers != NULL:
            bk_fwd_unpack(&self.w, self.layers, self.cfg.n_layer)
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
        """float32[n_vocab] over the state's logits buffer, keeping this object alive. Made on each call: an array
        kept here would be a reference cycle through an ndarray (which the garbage collector cannot see), and the
        model, its weights and its mapping would never be freed."""
        cdef cnp.npy_intp dims[1]
        dims[0] = self.cfg.n_vocab
        arr = cnp.PyArray_SimpleNewFromData(1, dims, cnp.NPY_FLOAT32, <void *>self.st.logits)
        cnp.set_array_base(arr, self)
        return arr

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
            rc = bk_fwd_decode(&self.cfg, &self.w, &cache.kv, &self.st, &t[0], n, pos)
        self.st.multi_stream = 0
        return rc

    def decode_seqs(self, list caches, list seq_ids, list tokens, list positions, list outputs):
        """One llama_decode of several sequences, each in its own cache (bk_fwd_decode_seqs), in batch order.
        Validated by the caller. Returns (status, float32[n_out][n_vocab] logits rows, int32[n_out] the index of
        each row's sequence)."""
        cdef int n = len(caches), i, rc
        cdef int32_t n_out = 0
        cdef bk_fwd_seq *seqs = <bk_fwd_seq *>calloc(n if n > 0 else 1, sizeof(bk_fwd_seq))
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] t
        cdef _KVCache c
        cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] out = np.zeros((max(n, 1), self.cfg.n_vocab),
                                                                         dtype=np.float32)
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] who = np.zeros(max(n, 1), dtype=np.int32)
        if seqs == NULL:
            raise MemoryError()
        arrays = [np.ascontiguousarray(x, dtype=np.int32) for x in tokens]
        try:
            for i in range(n):
                c = caches[i]
                t = arrays[i]
                if t.shape[0] == 0:
                    raise ValueError("no tokens")
                seqs[i].kv = &c.kv
                seqs[i].seq_id = seq_ids[i]
                seqs[i].tokens = &t[0]
                seqs[i].n = t.shape[0]
                seqs[i].pos0 = positions[i]
                seqs[i].output = 1 if outputs[i] else 0
            self.st.multi_stream = 0
            with nogil:
                rc = bk_fwd_decode_seqs(&self.cfg, &self.w, &self.st, seqs, n, &out[0, 0], &who[0], &n_out)
        finally:
            free(seqs)
        return rc, out[:n_out], who[:n_out]

    def decode_unified(self, _KVCache cache, tokens, positions, seqs, outputs):
        """One llama_decode over a unified cache (bk_fwd_decode_unified): token i of sequence seqs[i] at
        positions[i], an output where outputs[i]. Validated by the caller. Returns (status, float32[n_out][n_vocab]
        the output rows in batch order)."""
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] t = np.ascontiguousarray(tokens, dtype=np.int32)
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] p = np.ascontiguousarray(positions, dtype=np.int32)
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] q = np.ascontiguousarray(seqs, dtype=np.int32)
        cdef cnp.ndarray[cnp.int8_t, ndim=1, mode="c"] o = np.ascontiguousarray(outputs, dtype=np.int8)
        cdef int n = t.shape[0], rc
        cdef int32_t n_out = 0
        if n == 0 or p.shape[0] != n or q.shape[0] != n or o.shape[0] != n:
            raise ValueError("one position, sequence and output flag per token")
        if not cache.kv.cells.seq:
            raise ValueError("not a unified cache")
        if cache.kv.size > self.st.kv_max:
            raise ValueError(f"a cache of {cache.kv.size} cells is larger than this state's {self.st.kv_max}")
        cdef int n_rows = int(np.count_nonzero(o))
        cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] out = np.zeros((max(n_rows, 1), self.cfg.n_vocab),
                                                                         dtype=np.float32)
        self.st.multi_stream = 0
        with nogil:
            rc = bk_fwd_decode_unified(&self.cfg, &self.w, &cache.kv, &self.st, &t[0], &p[0], &q[0],
                                       &o[0], n, &out[0, 0], &n_out)
        return rc, out[:n_out]

    def decode_embd_unified(self, _KVCache cache, tokens, positions, seqs):
        """One llama_decode with embeddings on over a unified cache (bk_fwd_decode_embd_unified): token i of sequence
        seqs[i] at positions[i], every token an output. Validated by the caller. Returns (status, float32[n][n_embd]
        t_embd rows in batch order)."""
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] t = np.ascontiguousarray(tokens, dtype=np.int32)
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] p = np.ascontiguousarray(positions, dtype=np.int32)
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] q = np.ascontiguousarray(seqs, dtype=np.int32)
        cdef int n = t.shape[0], rc
        if n == 0 or p.shape[0] != n or q.shape[0] != n:
            raise ValueError("one position and sequence per token")
        if not cache.kv.cells.seq:
            raise ValueError("not a unified cache")
        if cache.kv.size > self.st.kv_max:
            raise ValueError(f"a cache of {cache.kv.size} cells is larger than this state's {self.st.kv_max}")
        cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] out = np.zeros((n, self.cfg.n_embd), dtype=np.float32)
        self.st.multi_stream = 0
        with nogil:
            rc = bk_fwd_decode_embd_unified(&self.cfg, &self.w, &cache.kv, &self.st, &t[0], &p[0], &q[0], n,
                                            &out[0, 0])
        return rc, out

    def _call_tokens(self, _KVCache cache, tokens):
        """decode_embd's checks: a non-empty int32 array and a cache this state can run."""
        t = np.ascontiguousarray(tokens, dtype=np.int32)
        if t.shape[0] == 0:
            raise ValueError("no tokens")
        if cache.kv.size > self.st.kv_max:
            raise ValueError(f"a cache of {cache.kv.size} cells is larger than this state's {self.st.kv_max}")
        return t

    def decode_embd(self, _KVCache cache, tokens, int pos):
        """One llama_decode with embeddings on (every token an output): returns (status, float32[n][n_embd], the
        final norm's output of each token). tokens: int32 array, validated by the caller."""
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] t = self._call_tokens(cache, tokens)
        cdef int n = t.shape[0]
        cdef int rc
        cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] out = np.zeros((n, self.cfg.n_embd), dtype=np.float32)
        with nogil:
            rc = bk_fwd_decode_embd(&self.cfg, &self.w, &cache.kv, &self.st, &t[0], n, pos, &out[0, 0])
        return rc, out


    def decode_embd_streams(self, list caches, tokens, int nst, list positions):
        """One ubatch of len(caches) sequences with embeddings on (bk_fwd_decode_embd_streams): sequence s has the
        nst tokens tokens[s*nst:(s+1)*nst] at positions[s] on. Validated by the caller. Returns (status,
        float32[len*nst][n_embd] t_embd rows, grouped by sequence)."""
        cdef int ns = len(caches), s, rc
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] t = np.ascontiguousarray(tokens, dtype=np.int32)
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] p = np.ascontiguousarray(positions, dtype=np.int32)
        cdef _KVCache c
        if ns == 0 or nst <= 0 or t.shape[0] != ns * nst or p.shape[0] != ns:
            raise ValueError("one position per cache and nst tokens per cache")
        cdef bk_kv_cache **streams = <bk_kv_cache **>calloc(ns, sizeof(bk_kv_cache *))
        cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] out = np.zeros((ns * nst, self.cfg.n_embd),
                                                                         dtype=np.float32)
        if streams == NULL:
            raise MemoryError()
        try:
            for s in range(ns):
                c = caches[s]
                streams[s] = &c.kv
            self.st.multi_stream = 0
            with nogil:
                rc = bk_fwd_decode_embd_streams(&self.cfg, &self.w, &self.st, streams, ns, &t[0], nst, &p[0],
                                                &out[0, 0])
        finally:
            free(streams)
        return rc, out

def pool_mean(rows):
    """Mean pooling of float32[n][n_embd] rows as ggml's MUL_MAT of the transposed rows by 1/n (pool.h)."""
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] r = np.ascontiguousarray(rows, dtype=np.float32)
    cdef int n = r.shape[0], e = r.shape[1]
    if n == 0 or e == 0:
        raise ValueError("no rows to pool")
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] out = np.zeros(e, dtype=np.float32)
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] scratch = np.zeros(2 * n, dtype=np.float32)
    with nogil:
        bk_pool_mean(n, e, &r[0, 0], &out[0], &scratch[0])
    return out


def pool_mean_ubatch(rows, int ns):
    """Mean pooling of one ubatch of ns sequences (rows grouped by sequence, equal counts), as ggml's MUL_MAT of the
    transposed rows by the per-sequence mean columns (pool.h bk_pool_mean_ubatch): float32[ns][n_embd]."""
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] r = np.ascontiguousarray(rows, dtype=np.float32)
    cdef int n = r.shape[0], e = r.shape[1]
    if ns <= 0 or n == 0 or e == 0 or n % ns:
        raise ValueError("pool_mean_ubatch: ns sequences of the same row count")
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] out = np.zeros((ns, e), dtype=np.float32)
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] scratch = np.zeros(n * e + ns * n, dtype=np.float32)
    with nogil:
        bk_pool_mean_ubatch(ns, n // ns, e, &r[0, 0], &out[0, 0], &scratch[0])
    return out

def pool_mean_rows(rows, cols, int ns):
    """Mean pooling of one ubatch whose row t belongs to column cols[t] (0 .. ns-1), as ggml's MUL_MAT of the
    transposed rows by the per-sequence mean columns (pool.h bk_pool_mean_rows): float32[ns][n_embd]."""
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] r = np.ascontiguousarray(rows, dtype=np.float32)
    cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] c = np.ascontiguousarray(cols, dtype=np.int32)
    cdef int n = r.shape[0], e = r.shape[1]
    if ns <= 0 or n == 0 or e == 0 or c.shape[0] != n or c.min() < 0 or c.max() >= ns:
        raise ValueError("pool_mean_rows: one column in 0 .. ns-1 per row")
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] out = np.zeros((ns, e), dtype=np.float32)
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] scratch = np.zeros(n * e + ns * n, dtype=np.float32)
    with nogil:
        bk_pool_mean_rows(n, ns, e, &r[0, 0], <const int *>&c[0], &out[0, 0], &scratch[0])
    return out

def embd_normalize(vec, int mode):
    """common_embd_normalize of a float32 vector (pool.h): -1 none, 0 max-abs (int16 range), 2 euclidean, p."""
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] v = np.ascontiguousarray(vec, dtype=np.float32)
    cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] out = np.zeros(v.shape[0], dtype=np.float32)
    if v.shape[0]:
        bk_embd_normalize(&v[0], &out[0], v.shape[0], mode)
    return out


def _swa_visible(pos, int pmax, int w, int swa_type):
    """Which of the positions `pos` the window still shows to position pmax (llama_hparams::is_masked_swa with
    p1 = pmax, negated): every one without a window."""
    if w <= 0:
        return np.ones(len(pos), dtype=bool)
    if swa_type == BK_SWA_STANDARD:
        return (pmax - pos) < w
    if swa_type == BK_SWA_CHUNKED:
        return pos >= (pmax // w) * w
    if swa_type == BK_SWA_SYMMETRIC:
        return np.abs(pmax - pos) <= w // 2
    return np.ones(len(pos), dtype=bool)


cdef void _copy_cells(bk_kv_cache *dst, const bk_kv_cache *src):
    """dst's cells, head, used count and K/V bytes made src's, cell for cell (the same size and type)."""
    memcpy(dst.data, src.data, <size_t>dst.n_layer * dst.size * (dst.k_row_bytes + dst.v_row_bytes))
    memcpy(dst.cells.pos, src.cells.pos, <size_t>dst.size * sizeof(int32_t))
    dst.cells.head = src.cells.head
    dst.cells.used = src.cells.used


cdef void _state_rows(bk_kv_cache *s, const uint32_t[::1] cells, const unsigned char[::1] buf, bint to_state):
    """Per layer, the K rows then the V rows of `cells` (in that order) copied into a state buffer (to_state) or
    out of one into the cells: llama-kv-cache.cpp's state_write_data / state_read_data layout."""
    cdef size_t n = cells.shape[0]
    cdef size_t rk = s.k_row_bytes, rv = s.v_row_bytes
    cdef size_t per = n * (rk + rv)
    cdef uint8_t *base
    cdef uint8_t *b = <uint8_t *>&buf[0] if buf.shape[0] else NULL
    cdef size_t j, c
    cdef int l
    for l in range(s.n_layer):
        base = s.data + <size_t>l * s.size * (rk + rv)
        for j in range(n):
            c = cells[j]
            if to_state:
                memcpy(b + l * per + j * rk, base + c * rk, rk)
                memcpy(b + l * per + n * rk + j * rv, base + s.size * rk + c * rv, rv)
            else:
                memcpy(base + c * rk, b + l * per + j * rk, rk)
                memcpy(base + s.size * rk + c * rv, b + l * per + n * rk + j * rv, rv)


cdef class _KVCache:
    """One sequence's KV cache (cells and per-layer K/V rows), allocated zeroed at creation. n_swa, swa_type: the
    cells' sliding window (kv.h); none for llama."""
    cdef bk_kv_cache kv
    cdef bint have
    cdef int n_head_kv, head_dim, n_rot, rot_k     # what the K shift rotates (the model's config)
    cdef bint neox                                 # the shift's RoPE: NEOX (the halves) or NORMAL (adjacent pairs)
    cdef float theta_scale

    def __cinit__(self):
        self.have = False

    def __init__(self, _Forward forward, unsigned int n_cells, str kv_type="f16", unsigned int n_swa=0,
                 str swa_type="none", bint swa_full=False, str rope="normal", int n_seq=1):
        if rope not in ("normal", "neox"):
            raise ValueError(f"rope type {rope!r}: normal or neox")
        if kv_type not in KV_TYPES:
            raise ValueError(f"cache type {kv_type!r}: one of {sorted(KV_TYPES)}")
        rc = bk_kv_cache_alloc(&self.kv, &forward.cfg, n_cells, KV_TYPES[kv_type], n_swa, _swa_type(swa_type))
        if rc == BK_FWD_NO_MEMORY:
            raise MemoryError(f"a KV cache of {n_cells} cells")
        if rc != BK_FWD_OK:
            raise ValueError(f"a {kv_type} KV cache of {n_cells} cells (sliding window {swa_type} {n_swa}) cannot "
                             "be made for this model")
        self.have = True
        self.n_head_kv = forward.cfg.n_head_kv
        self.head_dim = forward.cfg.head_dim
        self.n_rot = forward.cfg.n_rot
        self.neox = rope == "neox"
        self.theta_scale = bk_rope_theta_scale(forward.cfg.rope_freq_base, forward.cfg.n_rot)
        self.rot_k = bk_attn_rot_k_size(forward.cfg.head_dim) if self.kv.type == BK_TYPE_Q8_0 else 0
        if forward.cfg.n_swa > 0:  # the sliding-window layers' cache (llama_kv_cache_iswa)
            if kv_type != "f16":
                raise ValueError(f"a {kv_type} KV cache for a model with sliding-window layers: only f16 is "
                                 "reproduced by bankml yet")
            # --swa-full: the SWA cache gets every cell of the base one (min(size, n_swa + size) padded = size);
            # n_seq: the sequences the stream holds (a unified cache's n_seq_max)
            rc = bk_kv_cache_alloc_swa(&self.kv, &forward.cfg,
                                       <int32_t>n_cells if swa_full else forward.st.n_ubatch, n_seq)
            if rc == BK_FWD_NO_MEMORY:
                raise MemoryError(f"a sliding-window KV cache for {n_cells} cells")
            if rc != BK_FWD_OK:
                raise ValueError("the sliding-window KV cache cannot be made for this model")

    def __dealloc__(self):
        if self.have:
            bk_kv_cache_free(&self.kv)

    @property
    def size(self):
        return self.kv.size

    @property
    def kv_type(self):
        return "f16" if self.kv.type == BK_TYPE_F16 else "q8_0"

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

    @property
    def has_swa(self):
        """The model has sliding-window layers: a second cache of n_swa + n_ubatch cells holds them, and a
        truncation can leave it without the positions a continuation needs (see seq_rm)."""
        return self.kv.swa != NULL

    @property
    def swa_pos_min(self):
        """The smallest position the sliding-window cache still holds (-1: empty or no such cache)."""
        if self.kv.swa == NULL:
            return -1
        return bk_kv_seq_pos_min(&(<bk_kv_cache *>self.kv.swa).cells)

    @property
    def swa_pos_max(self):
        """The largest position the sliding-window cache holds (-1: empty or no such cache)."""
        if self.kv.swa == NULL:
            return -1
        return bk_kv_seq_pos_max(&(<bk_kv_cache *>self.kv.swa).cells)

    @property
    def swa_size(self):
        """Cells of the sliding-window cache (0: none)."""
        return 0 if self.kv.swa == NULL else (<bk_kv_cache *>self.kv.swa).size

    def swa_positions(self):
        """int32[swa_size]: the position each cell of the sliding-window cache holds, -1 when empty."""
        if self.kv.swa == NULL:
            raise ValueError("this cache has no sliding-window part")
        cdef bk_kv_cache *s = <bk_kv_cache *>self.kv.swa
        return np.array(<int32_t[:s.size]>s.cells.pos, dtype=np.int32)

    def swa_state(self):
        """(positions, bytes) of the sliding-window cache's used cells in cell order: llama_state_seq_get_data
        with LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY on an iswa cache writes that cache alone (state_write_data: the
        cells in index order, then per layer the K rows and the V rows). As llama_kv_cache::state_write, a cell
        the window masks for the sequence's largest position is left out (it is still in the cache, not in the
        state)."""
        if self.kv.swa == NULL:
            raise ValueError("this cache has no sliding-window part")
        cdef bk_kv_cache *s = <bk_kv_cache *>self.kv.swa
        pos = np.array(<int32_t[:s.size]>s.cells.pos, dtype=np.int32)
        pmax = int(pos.max()) if pos.size else -1
        keep = pos >= 0
        if pmax >= 0:
            keep &= _swa_visible(pos, pmax, <int>s.cells.n_swa, s.cells.swa_type)
        cells = np.flatnonzero(keep)
        cdef size_t n = len(cells)
        cdef size_t rk = s.k_row_bytes, rv = s.v_row_bytes
        cdef size_t per = n * (rk + rv)
        out = bytearray(per * s.n_layer)
        _state_rows(s, np.ascontiguousarray(cells, dtype=np.uint32), out, True)
        return pos[cells].copy(), bytes(out)

    def swa_load(self, positions, const unsigned char[::1] data):
        """The inverse of swa_state, as llama_kv_cache::state_read_meta does it for one sequence: the sequence
        leaves the sliding-window cache (seq_rm(-1, -1): head moves back to the first cell it held), find_slot
        (cont false) gives the cells for the saved positions in their saved order, apply_ubatch records them, and
        each saved row goes to its cell. The base cache is not touched."""
        if self.kv.swa == NULL:
            raise ValueError("this cache has no sliding-window part")
        cdef bk_kv_cache *s = <bk_kv_cache *>self.kv.swa
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] pos = np.ascontiguousarray(positions, dtype=np.int32)
        cdef size_t n = pos.shape[0]
        cdef size_t rk = s.k_row_bytes, rv = s.v_row_bytes
        cdef size_t per = n * (rk + rv)
        if n > s.size or <size_t>data.shape[0] != per * s.n_layer:
            raise ValueError(f"{data.shape[0]} bytes are not the sliding-window state of {n} cells")
        bk_kv_seq_rm(&s.cells, -1, -1)
        if n == 0:
            return
        cdef cnp.ndarray[cnp.uint32_t, ndim=1, mode="c"] idx = np.zeros(n, dtype=np.uint32)
        if bk_kv_find_slot(&s.cells, &pos[0], <uint32_t>n, &idx[0]) != 0:
            raise ValueError(f"no {n} free cells in the sliding-window cache")
        bk_kv_apply_ubatch(&s.cells, &idx[0], &pos[0], <uint32_t>n)
        _state_rows(s, idx, data, False)

    def make_unified(self):
        """Turn this empty cache (and its sliding-window one) into a unified one: each cell holds one of several
        sequences (kv.h bk_kvu_*)."""
        rc = bk_kv_cache_make_unified(&self.kv)
        if rc == BK_FWD_NO_MEMORY:
            raise MemoryError("the cells' sequence ids")
        if rc != BK_FWD_OK:
            raise ValueError("only an empty cache can be made unified")

    @property
    def unified(self):
        return self.kv.cells.seq != NULL

    @property
    def head(self):
        """Where the next search for free cells starts (llama_kv_cache's v_heads[0])."""
        return self.kv.cells.head

    def cell_seqs(self):
        """int32[size]: a unified cache's sequence of each cell, -1 when empty."""
        if self.kv.cells.seq == NULL:
            raise ValueError("not a unified cache")
        return np.array(<int32_t[:self.kv.size]>self.kv.cells.seq, dtype=np.int32)

    def useq_rm(self, int seq, int p0=-1, int p1=-1):
        """llama_memory_seq_rm(seq, p0, p1) on a unified cache (seq -1: every sequence), in its sliding-window
        cache too when it has one (llama_kv_cache_iswa::seq_rm)."""
        if self.kv.cells.seq == NULL:
            raise ValueError("not a unified cache")
        bk_kvu_seq_rm(&self.kv.cells, seq, p0, p1)
        if self.kv.swa != NULL:
            bk_kvu_seq_rm(&(<bk_kv_cache *>self.kv.swa).cells, seq, p0, p1)

    def useq_pos_max(self, int seq):
        if self.kv.cells.seq == NULL:
            raise ValueError("not a unified cache")
        return bk_kvu_seq_pos_max(&self.kv.cells, seq)

    def useq_pos_min(self, int seq):
        if self.kv.cells.seq == NULL:
            raise ValueError("not a unified cache")
        return bk_kvu_seq_pos_min(&self.kv.cells, seq)

    def useq_swa_pos_min(self, int seq):
        """The sequence's smallest position in the unified sliding-window cache (-1: none)."""
        if self.kv.swa == NULL or self.kv.cells.seq == NULL:
            raise ValueError("not a unified cache with a sliding-window part")
        return bk_kvu_seq_pos_min(&(<bk_kv_cache *>self.kv.swa).cells, seq)

    cdef bk_kv_cache *_useq_target(self, bint swa) except NULL:
        if self.kv.cells.seq == NULL:
            raise ValueError("not a unified cache")
        if not swa:
            return &self.kv
        if self.kv.swa == NULL:
            raise ValueError("this cache has no sliding-window part")
        return <bk_kv_cache *>self.kv.swa

    def useq_swa_pos_max(self, int seq):
        """The sequence's largest position in the unified sliding-window cache (-1: none)."""
        return bk_kvu_seq_pos_max(&self._useq_target(True).cells, seq)

    def useq_state(self, int seq, bint swa=False):
        """(positions, bytes) of sequence seq's cells in cell order, as llama_state_seq_get_data writes one sequence
        of a unified cache (state_write: the cells holding seq in index order, each cell's position; then per layer
        the K rows and the V rows). swa: the sliding-window cache's part instead (llama_kv_cache_iswa writes it
        after the base one, alone with LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY), where a cell the window masks for the
        sequence's largest position there is left out, as in swa_state."""
        cdef bk_kv_cache *s = self._useq_target(swa)
        seqs = np.array(<int32_t[:s.size]>s.cells.seq, dtype=np.int32)
        allpos = np.array(<int32_t[:s.size]>s.cells.pos, dtype=np.int32)
        keep = (seqs == seq) & (allpos >= 0)
        if swa and keep.any():
            keep &= _swa_visible(allpos, int(allpos[keep].max()), <int>s.cells.n_swa, s.cells.swa_type)
        cells = np.flatnonzero(keep)
        out = bytearray(len(cells) * (s.k_row_bytes + s.v_row_bytes) * s.n_layer)
        _state_rows(s, np.ascontiguousarray(cells, dtype=np.uint32), out, True)
        return allpos[cells].copy(), bytes(out)

    def useq_load(self, int seq, positions, const unsigned char[::1] data, bint swa=False):
        """The inverse of useq_state, as llama_state_seq_set_data reads one sequence into a unified cache
        (state_read_meta): the sequence leaves the cache (seq_rm(seq, -1, -1): head moves back to its first freed
        cell), find_slot gives the saved cells, in their saved order, the empty cells it meets from head (in the
        sliding-window cache also cells the window masks for their own sequence), apply_ubatch records them (head
        moves past the last), and each saved row goes to its cell. swa: into the sliding-window cache alone.
        Returns False (the sequence then holds nothing there, as in libllama) when no cells are free for them."""
        cdef bk_kv_cache *s = self._useq_target(swa)
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] pos = np.ascontiguousarray(positions, dtype=np.int32)
        cdef size_t n = pos.shape[0]
        cdef size_t per = n * (s.k_row_bytes + s.v_row_bytes)
        if <size_t>data.shape[0] != per * s.n_layer:
            raise ValueError(f"{data.shape[0]} bytes are not the state of {n} cells of this cache")
        bk_kvu_seq_rm(&s.cells, seq, -1, -1)
        if n == 0:
            return True
        if n > s.size:
            return False
        cdef cnp.ndarray[cnp.uint32_t, ndim=1, mode="c"] idx = np.zeros(n, dtype=np.uint32)
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] sq = np.full(n, seq, dtype=np.int32)
        if bk_kv_find_slot(&s.cells, &pos[0], <uint32_t>n, &idx[0]) != 0:
            return False
        bk_kvu_apply_ubatch(&s.cells, &idx[0], &pos[0], &sq[0], <uint32_t>n)
        _state_rows(s, idx, data, False)
        return True

    def seq_rm(self, int p0, int p1=-1):
        bk_kv_seq_rm(&self.kv.cells, p0, p1)
        if self.kv.swa != NULL:
            bk_kv_seq_rm(&(<bk_kv_cache *>self.kv.swa).cells, p0, p1)

    def clear(self):
        bk_kv_cells_clear(&self.kv.cells)
        if self.kv.swa != NULL:
            bk_kv_cells_clear(&(<bk_kv_cache *>self.kv.swa).cells)

    def seq_add(self, int p0, int p1, int delta):
        """llama_memory_seq_add(seq, p0, p1, delta) and the K re-rotation it leaves for the next decode, done at
        once (src/llama-kv-cache.cpp seq_add, then update -> build_graph_shift, b11192): every layer's K, every
        cell, roped by the cell's accumulated shift (0 for the others, which go through the same arithmetic) in
        the model's rope type (the cache's `rope`: NORMAL for llama, NEOX for qwen3)."""
        if self.kv.swa != NULL:
            raise ValueError("a context shift of a cache with sliding-window layers is not reproduced by bankml yet")
        if self.kv.type == BK_TYPE_Q8_0 and self.n_rot != self.head_dim:
            raise ValueError("a Q8_0 K cache is shifted only when RoPE covers the whole head")
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] shift = np.zeros(self.kv.size, dtype=np.int32)
        bk_kv_seq_add(&self.kv.cells, p0, p1, delta, &shift[0])
        if not shift.any():
            return
        cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] cache = np.zeros(max(self.n_rot, 2), dtype=np.float32)
        cdef cnp.ndarray[cnp.float32_t, ndim=1, mode="c"] row = np.zeros(self.n_head_kv * self.head_dim,
                                                                       dtype=np.float32)
        cdef int l
        with nogil:
            for l in range(self.kv.n_layer):
                if self.kv.type == BK_TYPE_F16:
                    bk_rope_shift_f16(<uint16_t *>bk_kv_cache_k(&self.kv, l), self.kv.size,
                                      <int64_t>(self.kv.k_row_bytes // 2), self.n_head_kv, self.head_dim,
                                      self.n_rot, self.neox, self.theta_scale, &shift[0], &cache[0])
                else:
                    bk_rope_shift_q8_0(bk_kv_cache_k(&self.kv, l), self.kv.size, <int64_t>self.kv.k_row_bytes,
                                       self.n_head_kv, self.head_dim, self.n_rot, self.neox, self.rot_k,
                                       self.theta_scale,
                                       &shift[0], &row[0], &cache[0])

    def copy_from(self, _KVCache other):
        """llama_memory_seq_cp between two streams (llama_kv_cache::seq_cp across streams, then update's buffer
        copy; llama_kv_cache_iswa does it for both caches): every cell of `other` at the same index, its position,
        the search head and the K/V bytes, in the base cache and the sliding-window one. Caches of one shape."""
        if (self.kv.size != other.kv.size or self.kv.type != other.kv.type or self.kv.n_layer != other.kv.n_layer
                or (self.kv.swa == NULL) != (other.kv.swa == NULL) or self.kv.cells.seq != NULL
                or other.kv.cells.seq != NULL):
            raise ValueError("a stream copy needs two one-sequence caches of the same shape")
        cdef bk_kv_cache *sd = <bk_kv_cache *>self.kv.swa
        cdef bk_kv_cache *ss = <bk_kv_cache *>other.kv.swa
        if sd != NULL and sd.size != ss.size:
            raise ValueError("a stream copy needs sliding-window caches of the same size")
        _copy_cells(&self.kv, &other.kv)
        if sd != NULL:
            _copy_cells(sd, ss)

    def positions(self):
        """int32[size]: the position each cell holds, -1 when empty (cell order)."""
        return np.array(<int32_t[:self.kv.size]>self.kv.cells.pos, dtype=np.int32)

    def state_bytes(self, int n):
        """The n used cells in cell order (llama-kv-cache.cpp state_write_data: the sequence's cell ranges in
        index order): the K rows then the V rows of every layer. While cell == position (no shift has happened),
        these are positions 0..n-1; positions() says which position each holds. With sliding-window layers this
        is the base cache alone (swa_state() is the other part)."""
        cdef size_t rk = self.kv.k_row_bytes, rv = self.kv.v_row_bytes
        cdef size_t per = <size_t>n * (rk + rv)
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] pos = self.positions()
        cells = np.flatnonzero(pos >= 0)
        if len(cells) != n:
            raise ValueError(f"the cache holds {len(cells)} cells, not {n}")
        out = bytearray(per * self.kv.n_layer)
        cdef unsigned char[::1] o = out
        cdef int l
        cdef uint8_t *base
        cdef size_t i, j, start, run
        # contiguous runs of used cells, copied run by run
        runs = []
        if n:
            edges = np.flatnonzero(np.diff(cells) != 1)
            starts = np.concatenate(([0], edges + 1))
            ends = np.concatenate((edges + 1, [len(cells)]))
            runs = [(int(cells[a]), int(b - a)) for a, b in zip(starts, ends)]
        for l in range(self.kv.n_layer):
            base = self.kv.data + <size_t>l * self.kv.size * (rk + rv)
            j = 0
            for start, run in runs:
                memcpy(&o[l * per + j * rk], base + start * rk, run * rk)
                memcpy(&o[l * per + n * rk + j * rv], base + self.kv.size * rk + start * rv, run * rv)
                j += run
        return bytes(out)

    def load_state(self, const unsigned char[::1] data, int n, positions=None):
        """The inverse of state_bytes: cells 0..n-1 hold positions[0..n) (default 0..n-1) with these K and V rows
        (state_read_meta: the saved cells go, in their saved order, into the cells find_slot gives an emptied
        cache: 0..n-1). With sliding-window layers this is the base cache alone (swa_load() is the other part)."""
        cdef size_t rk = self.kv.k_row_bytes, rv = self.kv.v_row_bytes
        cdef size_t per = <size_t>n * (rk + rv)
        cdef int l
        cdef uint8_t *base
        if n < 0 or <size_t>n > self.kv.size or <size_t>data.shape[0] != per * self.kv.n_layer:
            raise ValueError(f"{data.shape[0]} bytes are not the state of {n} cells of this cache")
        if positions is not None and len(positions) != n:
            raise ValueError(f"{len(positions)} positions for {n} cells")
        bk_kv_cells_clear(&self.kv.cells)
        for l in range(self.kv.n_layer):
            base = self.kv.data + <size_t>l * self.kv.size * (rk + rv)
            if n:
                memcpy(base, &data[l * per], n * rk)
                memcpy(base + self.kv.size * rk, &data[l * per + n * rk], n * rv)
        cdef cnp.ndarray[cnp.int32_t, ndim=1, mode="c"] pos = (
            np.arange(max(n, 1), dtype=np.int32) if positions is None or n == 0
            else np.ascontiguousarray(positions, dtype=np.int32))
        cdef cnp.ndarray[cnp.uint32_t, ndim=1, mode="c"] idx = np.arange(max(n, 1), dtype=np.uint32)
        if n:
            bk_kv_apply_ubatch(&self.kv.cells, &idx[0], &pos[0], n)
