/* The sampler chain of llama.cpp b11192 (src/llama-sampler.cpp), in its float order, with the orders of the
 * libstdc++ (GCC 12) algorithms whose tie handling decides results: std::sort (introsort), std::partial_sort
 * (heap select + sort_heap), std::mt19937, std::generate_canonical (uniform_real_distribution<float|double>)
 * and std::discrete_distribution<int>.
 *
 * A candidate array is bk_cands: `data` points into a caller's buffer of bk_token (the layout of
 * llama_token_data) and may move forward (XTC drops a prefix by advancing it); `selected` is -1 until a
 * sampler picks one. Samplers that need scratch space allocate it (as llama.cpp's std::vector does).
 * libllama is compiled without -mfma: nothing here is contracted (the project builds with -ffp-contract=off).
 */
#ifndef BK_SAMPLING_H
#define BK_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

typedef struct { int32_t id; float logit; float p; } bk_token;

typedef struct {
    bk_token *data;
    size_t size;
    int64_t selected;
    int sorted;
} bk_cands;

typedef struct { uint32_t mt[624]; uint32_t idx; } bk_mt19937;

void     bk_mt_seed(bk_mt19937 *g, uint32_t seed);
uint32_t bk_mt_next(bk_mt19937 *g);
double   bk_uniform_double(bk_mt19937 *g);      /* uniform_real_distribution<double>(0, 1) */
float    bk_uniform_float(bk_mt19937 *g);       /* uniform_real_distribution<float>(0, 1) */
/* std::discrete_distribution<int> over the candidates' p (no draw when size < 2) */
int      bk_discrete(const bk_cands *c, bk_mt19937 *g);

/* libstdc++'s std::sort / std::partial_sort with the comparators llama.cpp uses */
void bk_sort_logit_desc(bk_token *a, size_t n);
void bk_partial_sort_logit_desc(bk_token *a, size_t mid, size_t n);
void bk_sort_p_desc(bk_token *a, size_t n);
void bk_sort_index_by_score(size_t *idx, size_t n, const float *score);   /* score[a] < score[b] */

/* llama_token_data_array_partial_sort (bucket sort above 128, into out; returns how many it wrote) and
 * llama_token_data_array_partial_sort_inplace */
size_t bk_partial_sort_buckets(const bk_cands *c, int npartial, bk_token *out);
void   bk_partial_sort_inplace(bk_cands *c, int npartial);

void bk_softmax(bk_cands *c, int do_sort);
void bk_temp_impl(bk_cands *c, float temp);

/* the samplers' apply() */
void bk_logit_bias(bk_cands *c, const int32_t *tokens, const float *biases, size_t n);
void bk_penalties(bk_cands *c, const int32_t *counts, int32_t n_vocab, float repeat, float freq, float present);
void bk_dry_apply(bk_cands *c, const uint8_t *has, const float *penalty, int32_t n_vocab);
void bk_top_n_sigma(bk_cands *c, float n);
void bk_top_k(bk_cands *c, int32_t k);
void bk_typical(bk_cands *c, float p, size_t min_keep);
void bk_top_p(bk_cands *c, float p, size_t min_keep);
void bk_min_p(bk_cands *c, float p, size_t min_keep);
void bk_xtc(bk_cands *c, float probability, float threshold, size_t min_keep, bk_mt19937 *g);
void bk_temp_ext(bk_cands *c, float temp, float delta, float exponent);
void bk_dist(bk_cands *c, bk_mt19937 *g);
void bk_mirostat(bk_cands *c, int32_t n_vocab, float tau, float eta, int32_t m, float *mu, bk_mt19937 *g);
void bk_mirostat_v2(bk_cands *c, float tau, float eta, float *mu, bk_mt19937 *g);
/* adaptive-p: state = {weighted_sum, total_weight}; orig receives the pre-transform probabilities */
void bk_adaptive_p(bk_cands *c, float target, const float *state, float *orig, bk_mt19937 *g);

/* DRY's repeat scan (llama_sampler_dry_apply up to the penalties): `last` holds the n most recent tokens,
 * oldest first; brk_* is the processed sequence breakers as CSR (for token t: sequences
 * brk_seq_off[brk_tok_off[t]] .. brk_seq_off[brk_tok_off[t+1]]), -1 tokens have none. Writes, for each
 * token that gets a penalty, has[t] = 1 and penalty[t]; returns the number of tokens written into `touched`. */
int bk_dry_scan(const int32_t *last, int n_last, int penalty_last_n, int allowed_length, float multiplier,
                float base, const int32_t *brk_tok_off, const int32_t *brk_seq_off, const int32_t *brk_tokens,
                int32_t n_vocab, uint8_t *has, float *penalty, int32_t *touched);

#endif
