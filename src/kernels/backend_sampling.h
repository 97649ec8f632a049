/* Backend sampling of llama.cpp b11192 on the CPU backend (`--backend-sampling`, `backend_sampling: true`):
 * the samplers' backend_apply() graphs (src/llama-sampler.cpp) evaluated as ggml-cpu (ops.cpp, vec.h/vec.cpp,
 * AVX2 + FMA build) evaluates them, on a candidate array (bk_cands: the graph's `candidates` ids, `logits`
 * and, after dist, `probs`).
 *
 *   top-k:  std::partial_sort of the indices by logit (descending), first k kept, entries 0 and 1 swapped
 *   top-p:  std::sort (argsort, descending), ggml softmax, cumsum, keep cdf < p plus the first entry past it
 *           (min_keep is not used), the others' logits + log(0) = -inf; the size does not change
 *   min-p:  argmax (the last maximum), threshold = max + logf(p), keep logit - threshold > 0, others -inf
 *   temp:   logit * (1/temp) (not a division); temp <= 0: the argmax alone
 *   dist:   ggml softmax (ggml_v_expf in groups of 8, a double sum of 8-lane float sums, libm expf for the
 *           tail, times (float)(1/sum)), float cumsum, count of cumsum - u > 0 clamped to [1, n],
 *           selected = n - count; u = (float) uniform_real_distribution<double>
 *   logit bias: logit + bias (+ 0.0f for every other entry)
 *   penalties: per entry with count c (active = c > 0): x * (active ? (x > 0 ? 1/r : r) : 1), then
 *           - c * freq, then - active * present (each only when its parameter is set); without candidates
 *           (before top-k) only the active tokens and the filler (the smallest id not counted, when fewer
 *           than min(last_n, n_vocab) are counted) go through it
 *   dynatemp: entropy of the clamped ggml softmax (double sum), normalized by logf(n), powed through
 *           expf(exponent * logf(.)), fma(pow, max_t - min_t, min_t), logits / that
 * scale_bias(x, s, b) is fma(x, s, b) (ggml-cpu is built with -mfma and GCC contracts x*s + b).
 */
#ifndef BK_BACKEND_SAMPLING_H
#define BK_BACKEND_SAMPLING_H

#include "sampling.h"

/* ggml_soft_max_f32 of one row (scale 1, no mask): y may alias x */
void bk_ggml_soft_max_row(int n, float *y, const float *x);

void    bk_be_top_k(bk_cands *c, int32_t k);               /* k <= size (ggml_top_k asserts it) */
void    bk_be_top_p(bk_cands *c, float p);
void    bk_be_min_p(bk_cands *c, float p);
void    bk_be_temp(bk_cands *c, float temp);
void    bk_be_logit_bias(bk_cands *c, const int32_t *tokens, const float *biases, size_t n);  /* no duplicates */
void    bk_be_penalties(bk_cands *c, const int32_t *counts, int32_t n_vocab, int32_t n_max, int has_candidates,
                        float repeat, float freq, float present);
void    bk_be_dynatemp(bk_cands *c, float temp, float delta, float exponent);
int64_t bk_be_dist(bk_cands *c, float u);                  /* returns (and sets) selected; p = probabilities */

#endif
