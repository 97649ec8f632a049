# src/kernels/sampling.h: the candidate array, std::mt19937 and llama.cpp's samplers' apply() steps.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

cdef extern from "sampling.h" nogil:
    ctypedef struct bk_token:
        int32_t id
        float logit
        float p
    ctypedef struct bk_cands:
        bk_token *data
        size_t size
        int64_t selected
        int sorted
    ctypedef struct bk_mt19937:
        uint32_t mt[624]
        uint32_t idx
    void bk_mt_seed(bk_mt19937 *g, uint32_t seed)
    uint32_t bk_mt_next(bk_mt19937 *g)
    double bk_uniform_double(bk_mt19937 *g)
    float bk_uniform_float(bk_mt19937 *g)
    int bk_discrete(const bk_cands *c, bk_mt19937 *g)
    void bk_sort_p_desc(bk_token *a, size_t n)
    void bk_partial_sort_logit_desc(bk_token *a, size_t mid, size_t n)
    void bk_softmax(bk_cands *c, int do_sort)
    void bk_logit_bias(bk_cands *c, const int32_t *tokens, const float *biases, size_t n)
    void bk_penalties(bk_cands *c, const int32_t *counts, int32_t n_vocab, float repeat, float freq, float present)
    void bk_dry_apply(bk_cands *c, const uint8_t *has, const float *penalty, int32_t n_vocab)
    int bk_dry_scan(const int32_t *last, int n_last, int penalty_last_n, int allowed_length, float multiplier,
                    float base, const int32_t *brk_tok_off, const int32_t *brk_seq_off, const int32_t *brk_tokens,
                    int32_t n_vocab, uint8_t *has, float *penalty, int32_t *touched)
    void bk_top_n_sigma(bk_cands *c, float n)
    void bk_top_k(bk_cands *c, int32_t k)
    void bk_typical(bk_cands *c, float p, size_t min_keep)
    void bk_top_p(bk_cands *c, float p, size_t min_keep)
    void bk_min_p(bk_cands *c, float p, size_t min_keep)
    void bk_xtc(bk_cands *c, float probability, float threshold, size_t min_keep, bk_mt19937 *g)
    void bk_temp_ext(bk_cands *c, float temp, float delta, float exponent)
    void bk_temp_impl(bk_cands *c, float temp)
    void bk_dist(bk_cands *c, bk_mt19937 *g)
    void bk_mirostat(bk_cands *c, int32_t n_vocab, float tau, float eta, int32_t m, float *mu, bk_mt19937 *g)
    void bk_mirostat_v2(bk_cands *c, float tau, float eta, float *mu, bk_mt19937 *g)
    void bk_adaptive_p(bk_cands *c, float target, const float *state, float *orig, bk_mt19937 *g)
