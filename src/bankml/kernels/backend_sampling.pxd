# src/kernels/backend_sampling.h: the backend-sampling graphs' ops (ggml's soft_max, top-k, top-p, ...).
from libc.stdint cimport int32_t, int64_t

from bankml.kernels.sampling cimport bk_cands

cdef extern from "backend_sampling.h" nogil:
    void bk_ggml_soft_max_row(int n, float *y, const float *x)
    void bk_be_top_k(bk_cands *c, int32_t k)
    void bk_be_top_p(bk_cands *c, float p)
    void bk_be_min_p(bk_cands *c, float p)
    void bk_be_temp(bk_cands *c, float temp)
    void bk_be_logit_bias(bk_cands *c, const int32_t *tokens, const float *biases, size_t n)
    int64_t bk_be_dist(bk_cands *c, float u)
    void bk_be_penalties(bk_cands *c, const int32_t *counts, int32_t n_vocab, int32_t n_max, int has_candidates,
                         float repeat, float freq, float present)
    void bk_be_dynatemp(bk_cands *c, float temp, float delta, float exponent)
