# cython: language_level=3
"""The candidate array and the samplers' apply() steps over the C kernels (src/kernels/sampling.c).

`Candidates` owns one buffer of n_vocab llama_token_data {id, logit, p}; `fill(logits)` makes it
llama-server's fresh array (ids in order, p = 0, unsorted, nothing selected). Each function below is one
sampler's apply() of llama.cpp b11192; the sampler objects' state (generators, windows, mirostat's mu) is held
by the caller (bankml.sampling.chain) and passed in.
"""

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from libc.math cimport INFINITY, expf, logf

from bankml.kernels.sampling cimport (bk_adaptive_p, bk_cands, bk_dist, bk_dry_apply, bk_dry_scan, bk_logit_bias,
                                      bk_min_p, bk_mirostat, bk_mirostat_v2, bk_mt19937, bk_mt_next, bk_mt_seed,
                                      bk_partial_sort_logit_desc, bk_penalties, bk_softmax, bk_sort_p_desc, bk_temp_ext,
                                      bk_temp_impl, bk_token, bk_top_k, bk_top_n_sigma, bk_top_p, bk_typical,
                                      bk_uniform_double, bk_uniform_float, bk_xtc)
from bankml.kernels.backend_sampling cimport (bk_be_dist, bk_be_dynatemp, bk_be_logit_bias, bk_be_min_p,
                                              bk_be_penalties, bk_be_temp, bk_be_top_k, bk_be_top_p,
                                              bk_ggml_soft_max_row)

cnp.import_array()


def ggml_soft_max(const float[::1] x):
    """ggml-cpu's soft_max of one f32 row (scale 1, no mask), for tests"""
    out = np.empty(x.shape[0], dtype=np.float32)
    cdef float[::1] y = out
    if x.shape[0]:
        bk_ggml_soft_max_row(x.shape[0], &y[0], &x[0])
    return out


def logf_(float x):
    """glibc's logf (std::log(float)), for the server's logprob"""
    return logf(x)


TOKEN_DTYPE = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


cdef class MT19937:
    """std::mt19937 with libstdc++'s uniform_real_distribution<double|float>(0, 1)"""
    cdef bk_mt19937 g

    def __init__(self, uint32_t seed=5489):
        bk_mt_seed(&self.g, seed)

    def seed(self, uint32_t seed):
        bk_mt_seed(&self.g, seed)

    def next_u32(self):
        return bk_mt_next(&self.g)

    def uniform_double(self):
        return bk_uniform_double(&self.g)

    def uniform_float(self):
        return bk_uniform_float(&self.g)


cdef class Candidates:
    """llama_token_data_array over a buffer of n_vocab entries"""
    cdef bk_token *base
    cdef bk_cands c
    cdef readonly int n_vocab

    def __cinit__(self, int n_vocab):
        self.base = <bk_token *> malloc(max(n_vocab, 1) * sizeof(bk_token))
        if self.base == NULL:
            raise MemoryError()
        self.n_vocab = n_vocab
        self.c.data = self.base
        self.c.size = 0
        self.c.selected = -1
        self.c.sorted = 0

    def __dealloc__(self):
        free(self.base)

    def fill(self, const float[::1] logits):
        """ids 0..n-1 with the row's logits, p = 0 (common_sampler's set_logits)"""
        cdef int i, n = logits.shape[0]
        if n > self.n_vocab:
            raise ValueError(f"{n} logits for a vocabulary of {self.n_vocab}")
        with nogil:
            for i in range(n):
                self.base[i].id = i
                self.base[i].logit = logits[i]
                self.base[i].p = 0.0
        self.c.data = self.base
        self.c.size = n
        self.c.selected = -1
        self.c.sorted = 0

    def set(self, ids, logits, probs=None, bint sorted=False, long selected=-1):
        """any candidate array (tests: the same input as the oracle's)"""
        cdef Py_ssize_t i, n = len(ids)
        if n > self.n_vocab:
            raise ValueError("too many candidates")
        for i in range(n):
            self.base[i].id = ids[i]
            self.base[i].logit = logits[i]
            self.base[i].p = probs[i] if probs is not None else 0.0
        self.c.data = self.base
        self.c.size = n
        self.c.selected = selected
        self.c.sorted = sorted

    @property
    def size(self):
        return self.c.size

    @property
    def selected(self):
        return self.c.selected

    @property
    def sorted(self):
        return bool(self.c.sorted)

    @property
    def offset(self):
        """how far XTC moved the array's start"""
        return self.c.data - self.base

    def selected_id(self):
        if self.c.selected < 0 or <size_t> self.c.selected >= self.c.size:
            raise IndexError("no token selected")
        return self.c.data[self.c.selected].id

    def array(self):
        """a copy of the current candidates as a structured array (id, logit, p)"""
        out = np.empty(self.c.size, dtype=TOKEN_DTYPE)
        cdef cnp.uint8_t[::1] raw = out.view(np.uint8)
        cdef size_t nbytes = self.c.size * sizeof(bk_token)
        if nbytes:
            memcpy(&raw[0], self.c.data, nbytes)
        return out


    def sort_by_p(self):
        """common_sampler_get_candidates(do_sort=true): std::sort by p descending when not sorted; the
        selected index follows its token"""
        cdef int32_t sel_id
        cdef size_t i
        if self.c.sorted:
            return
        sel_id = self.c.data[self.c.selected].id if self.c.selected >= 0 else -1
        bk_sort_p_desc(self.c.data, self.c.size)
        for i in range(self.c.size):
            if self.c.data[i].id == sel_id:
                self.c.selected = i
                break
        self.c.sorted = 1

    def top_by_logit(self, size_t n):
        """get_token_probabilities: std::partial_sort of the first n by logit descending, then the softmax of
        the whole array (float, from the maximum); the array is left in that order"""
        cdef size_t i
        cdef float max_l, cum, p
        if n > self.c.size:
            n = self.c.size
        with nogil:
            if n > 0:
                bk_partial_sort_logit_desc(self.c.data, n, self.c.size)
                max_l = self.c.data[0].logit
            else:
                max_l = -INFINITY
                for i in range(self.c.size):
                    if max_l < self.c.data[i].logit:
                        max_l = self.c.data[i].logit
            cum = 0.0
            for i in range(self.c.size):
                p = expf(self.c.data[i].logit - max_l)
                self.c.data[i].p = p
                cum += p
            for i in range(self.c.size):
                self.c.data[i].p /= cum
        return n

    # the samplers ------------------------------------------------------------------------------------------

    def logit_bias(self, const int32_t[::1] tokens, const float[::1] biases):
        if tokens.shape[0]:
            bk_logit_bias(&self.c, &tokens[0], &biases[0], tokens.shape[0])

    def penalties(self, const int32_t[::1] counts, float repeat, float freq, float present):
        bk_penalties(&self.c, &counts[0], counts.shape[0], repeat, freq, present)

    def dry(self, const int32_t[::1] last, int penalty_last_n, int allowed_length, float multiplier, float base,
            const int32_t[::1] tok_off, const int32_t[::1] seq_off, const int32_t[::1] brk,
            uint8_t[::1] has, float[::1] penalty, int32_t[::1] touched):
        """the DRY sampler's apply; returns the touched token ids (has[] must be cleared for them after)"""
        cdef int n = bk_dry_scan(&last[0] if last.shape[0] else NULL, last.shape[0], penalty_last_n,
                                 allowed_length, multiplier, base, &tok_off[0], &seq_off[0],
                                 &brk[0] if brk.shape[0] else NULL, has.shape[0], &has[0], &penalty[0],
                                 &touched[0])
        if n < 0:
            return None
        bk_dry_apply(&self.c, &has[0], &penalty[0], has.shape[0])
        return n

    def top_n_sigma(self, float n):
        bk_top_n_sigma(&self.c, n)

    def top_k(self, int32_t k):
        with nogil:
            bk_top_k(&self.c, k)

    def typical(self, float p, size_t min_keep):
        with nogil:
            bk_typical(&self.c, p, min_keep)

    def top_p(self, float p, size_t min_keep):
        with nogil:
            bk_top_p(&self.c, p, min_keep)

    def min_p(self, float p, size_t min_keep):
        with nogil:
            bk_min_p(&self.c, p, min_keep)

    def xtc(self, float probability, float threshold, size_t min_keep, MT19937 g):
        bk_xtc(&self.c, probability, threshold, min_keep, &g.g)

    def temp_ext(self, float temp, float delta, float exponent):
        with nogil:
            bk_temp_ext(&self.c, temp, delta, exponent)

    def temp(self, float temp):
        bk_temp_impl(&self.c, temp)

    def softmax(self, bint do_sort):
        bk_softmax(&self.c, do_sort)

    def dist(self, MT19937 g):
        with nogil:
            bk_dist(&self.c, &g.g)

    def mirostat(self, int32_t n_vocab, float tau, float eta, int32_t m, float mu, MT19937 g):
        bk_mirostat(&self.c, n_vocab, tau, eta, m, &mu, &g.g)
        return mu

    def mirostat_v2(self, float tau, float eta, float mu, MT19937 g):
        bk_mirostat_v2(&self.c, tau, eta, &mu, &g.g)
        return mu

    def adaptive_p(self, float target, float weighted_sum, float total_weight, float[::1] orig, MT19937 g):
        cdef float state[2]
        state[0] = weighted_sum
        state[1] = total_weight
        bk_adaptive_p(&self.c, target, state, &orig[0], &g.g)


    # backend sampling (the sampling graph on ggml-cpu, src/kernels/backend_sampling.c) ---------------------

    def be_top_k(self, int32_t k):
        if k > <int32_t> self.c.size:
            raise ValueError(f"top_k {k} above the {self.c.size} candidates (ggml_top_k asserts)")
        with nogil:
            bk_be_top_k(&self.c, k)

    def be_top_p(self, float p):
        with nogil:
            bk_be_top_p(&self.c, p)

    def be_min_p(self, float p):
        with nogil:
            bk_be_min_p(&self.c, p)

    def be_temp(self, float temp):
        with nogil:
            bk_be_temp(&self.c, temp)

    def be_logit_bias(self, const int32_t[::1] tokens, const float[::1] biases):
        if tokens.shape[0]:
            bk_be_logit_bias(&self.c, &tokens[0], &biases[0], tokens.shape[0])

    def be_penalties(self, const int32_t[::1] counts, int32_t n_max, bint has_candidates, float repeat,
                     float freq, float present):
        with nogil:
            bk_be_penalties(&self.c, &counts[0], counts.shape[0], n_max, has_candidates, repeat, freq, present)

    def be_dynatemp(self, float temp, float delta, float exponent):
        with nogil:
            bk_be_dynatemp(&self.c, temp, delta, exponent)

    def be_dist(self, float u):
        """the dist graph with the uniform draw u; returns the selected index"""
        cdef int64_t r
        with nogil:
            r = bk_be_dist(&self.c, u)
        return r
