/* The sampler chain of llama.cpp b11192; see sampling.h. Written from the behaviour of llama-sampler.cpp and
 * libstdc++ (GCC 12): the same comparisons in the same order, the same float and double roundings. */
#include "sampling.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------------------------
 * std::mt19937 */

void bk_mt_seed(bk_mt19937 *g, uint32_t seed) {
    g->mt[0] = seed;
    for (uint32_t i = 1; i < 624; i++) {
        uint32_t x = g->mt[i - 1];
        g->mt[i] = 1812433253u * (x ^ (x >> 30)) + i;
    }
    g->idx = 624;
}

uint32_t bk_mt_next(bk_mt19937 *g) {
    if (g->idx >= 624) {
        for (int k = 0; k < 624; k++) {
            uint32_t y = (g->mt[k] & 0x80000000u) | (g->mt[(k + 1) % 624] & 0x7fffffffu);
            g->mt[k] = g->mt[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        g->idx = 0;
    }
    uint32_t z = g->mt[g->idx++];
    z ^= z >> 11;
    z ^= (z << 7) & 0x9d2c5680u;
    z ^= (z << 15) & 0xefc60000u;
    z ^= z >> 18;
    return z;
}

/* generate_canonical<double, 53>: two 32-bit draws, sum = g1 + g2 * 2^32 (rounded to double), / 2^64 */
double bk_uniform_double(bk_mt19937 *g) {
    double sum = 0.0;
    double tmp = 1.0;
    for (int k = 0; k < 2; k++) {
        sum += (double) bk_mt_next(g) * tmp;
        tmp *= 4294967296.0;
    }
    double r = sum / tmp;
    if (r >= 1.0) r = nextafter(1.0, 0.0);
    return r * (1.0 - 0.0) + 0.0;
}

/* generate_canonical<float, 24>: one draw rounded to float, / 2^32 */
float bk_uniform_float(bk_mt19937 *g) {
    float sum = 0.0f;
    sum += (float) bk_mt_next(g) * 1.0f;
    float r = sum / 4294967296.0f;
    if (r >= 1.0f) r = nextafterf(1.0f, 0.0f);
    return r * (1.0f - 0.0f) + 0.0f;
}

int bk_discrete(const bk_cands *c, bk_mt19937 *g) {
    size_t n = c->size;
    if (n < 2) return 0;
    double *cp = malloc(n * sizeof(double));
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum = sum + (double) c->data[i].p;
    double run = 0.0;
    for (size_t i = 0; i < n; i++) {
        double q = (double) c->data[i].p / sum;
        run = (i == 0) ? q : run + q;
        cp[i] = run;
    }
    cp[n - 1] = 1.0;
    double u = bk_uniform_double(g);
    /* lower_bound: first cp[i] >= u (libstdc++'s halving search) */
    size_t first = 0, len = n;
    while (len > 0) {
        size_t half = len >> 1;
        size_t mid = first + half;
        if (cp[mid] < u) {
            first = mid + 1;
            len = len - half - 1;
        } else {
            len = half;
        }
    }
    free(cp);
    return (int) first;
}

/* ------------------------------------------------------------------------------------------------------------
 * libstdc++ introsort / heap algorithms, instantiated per element type and comparator */

#define BK_SORT_IMPL(NAME, T, LESS)                                                                           \
static void NAME##_adjust_heap(T *first, ptrdiff_t hole, ptrdiff_t len, T value, const void *ctx) {          \
    (void) ctx;                                                                                              \
    const ptrdiff_t top = hole;                                                                              \
    ptrdiff_t child = hole;                                                                                  \
    while (child < (len - 1) / 2) {                                                                          \
        child = 2 * (child + 1);                                                                             \
        if (LESS(first[child], first[child - 1])) child--;                                                   \
        first[hole] = first[child];                                                                          \
        hole = child;                                                                                        \
    }                                                                                                        \
    if ((len & 1) == 0 && child == (len - 2) / 2) {                                                          \
        child = 2 * (child + 1);                                                                             \
        first[hole] = first[child - 1];                                                                      \
        hole = child - 1;                                                                                    \
    }                                                                                                        \
    ptrdiff_t parent = (hole - 1) / 2;                                                                       \
    while (hole > top && LESS(first[parent], value)) {                                                       \
        first[hole] = first[parent];                                                                         \
        hole = parent;                                                                                       \
        parent = (hole - 1) / 2;                                                                             \
    }                                                                                                        \
    first[hole] = value;                                                                                     \
}                                                                                                            \
static void NAME##_make_heap(T *first, ptrdiff_t len, const void *ctx) {                                     \
    if (len < 2) return;                                                                                     \
    ptrdiff_t parent = (len - 2) / 2;                                                                        \
    for (;;) {                                                                                               \
        T v = first[parent];                                                                                 \
        NAME##_adjust_heap(first, parent, len, v, ctx);                                                      \
        if (parent == 0) return;                                                                             \
        parent--;                                                                                            \
    }                                                                                                        \
}                                                                                                            \
static void NAME##_heap_select_sort(T *first, ptrdiff_t mid, ptrdiff_t last, const void *ctx) {              \
    NAME##_make_heap(first, mid, ctx);                                                                       \
    for (ptrdiff_t i = mid; i < last; i++) {                                                                 \
        if (LESS(first[i], first[0])) {                                                                      \
            T v = first[i];                                                                                  \
            first[i] = first[0];                                                                             \
            NAME##_adjust_heap(first, 0, mid, v, ctx);                                                       \
        }                                                                                                    \
    }                                                                                                        \
    for (ptrdiff_t e = mid; e > 1;) {                                                                        \
        e--;                                                                                                 \
        T v = first[e];                                                                                      \
        first[e] = first[0];                                                                                 \
        NAME##_adjust_heap(first, 0, e, v, ctx);                                                             \
    }                                                                                                        \
}                                                                                                            \
static inline void NAME##_swap(T *a, T *b) { T t = *a; *a = *b; *b = t; }                                    \
static void NAME##_introsort(T *first, T *last, int depth, const void *ctx) {                                \
    while (last - first > 16) {                                                                              \
        if (depth == 0) {                                                                                    \
            NAME##_heap_select_sort(first, last - first, last - first, ctx);                                 \
            return;                                                                                          \
        }                                                                                                    \
        depth--;                                                                                             \
        T *a = first + 1, *b = first + (last - first) / 2, *c = last - 1;                                    \
        if (LESS(*a, *b)) {                                                                                  \
            if (LESS(*b, *c)) NAME##_swap(first, b);                                                         \
            else if (LESS(*a, *c)) NAME##_swap(first, c);                                                    \
            else NAME##_swap(first, a);                                                                      \
        } else if (LESS(*a, *c)) NAME##_swap(first, a);                                                      \
        else if (LESS(*b, *c)) NAME##_swap(first, c);                                                        \
        else NAME##_swap(first, b);                                                                          \
        T *lo = first + 1, *hi = last;                                                                       \
        for (;;) {                                                                                           \
            while (LESS(*lo, *first)) lo++;                                                                  \
            hi--;                                                                                            \
            while (LESS(*first, *hi)) hi--;                                                                  \
            if (!(lo < hi)) break;                                                                           \
            NAME##_swap(lo, hi);                                                                             \
            lo++;                                                                                            \
        }                                                                                                    \
        NAME##_introsort(lo, last, depth, ctx);                                                              \
        last = lo;                                                                                           \
    }                                                                                                        \
}                                                                                                            \
static void NAME##_linear_insert(T *last, const void *ctx) {                                                 \
    (void) ctx;                                                                                              \
    T v = *last;                                                                                             \
    T *next = last - 1;                                                                                      \
    while (LESS(v, *next)) {                                                                                 \
        *last = *next;                                                                                       \
        last = next;                                                                                         \
        next--;                                                                                              \
    }                                                                                                        \
    *last = v;                                                                                               \
}                                                                                                            \
static void NAME##_insertion_sort(T *first, T *last, const void *ctx) {                                      \
    if (first == last) return;                                                                               \
    for (T *i = first + 1; i != last; i++) {                                                                 \
        if (LESS(*i, *first)) {                                                                              \
            T v = *i;                                                                                        \
            memmove(first + 1, first, (size_t) (i - first) * sizeof(T));                                     \
            *first = v;                                                                                      \
        } else {                                                                                             \
            NAME##_linear_insert(i, ctx);                                                                    \
        }                                                                                                    \
    }                                                                                                        \
}                                                                                                            \
static void NAME##_sort(T *first, size_t n, const void *ctx) {                                               \
    if (n == 0) return;                                                                                      \
    T *last = first + n;                                                                                     \
    int lg = 63 - __builtin_clzll((unsigned long long) n);                                                   \
    NAME##_introsort(first, last, 2 * lg, ctx);                                                              \
    if (n > 16) {                                                                                            \
        NAME##_insertion_sort(first, first + 16, ctx);                                                       \
        for (T *i = first + 16; i != last; i++) NAME##_linear_insert(i, ctx);                                \
    } else {                                                                                                 \
        NAME##_insertion_sort(first, last, ctx);                                                             \
    }                                                                                                        \
}

#define LESS_LOGIT_DESC(a, b) ((a).logit > (b).logit)
#define LESS_P_DESC(a, b) ((a).p > (b).p)
BK_SORT_IMPL(logit_desc, bk_token, LESS_LOGIT_DESC)
BK_SORT_IMPL(p_desc, bk_token, LESS_P_DESC)

static const float *g_score;   /* the typical sampler's scores (one thread per sampler call) */
#define LESS_SCORE(a, b) (g_score[(a)] < g_score[(b)])
BK_SORT_IMPL(score_asc, size_t, LESS_SCORE)

void bk_sort_logit_desc(bk_token *a, size_t n) { logit_desc_sort(a, n, NULL); }
void bk_partial_sort_logit_desc(bk_token *a, size_t mid, size_t n) {
    logit_desc_heap_select_sort(a, (ptrdiff_t) mid, (ptrdiff_t) n, NULL);
}
void bk_sort_p_desc(bk_token *a, size_t n) { p_desc_sort(a, n, NULL); }
void bk_sort_index_by_score(size_t *idx, size_t n, const float *score) {
    g_score = score;
    score_asc_sort(idx, n, NULL);
}

/* ------------------------------------------------------------------------------------------------------------
 * llama-sampler.cpp's helpers */

size_t bk_partial_sort_buckets(const bk_cands *c, int npartial, bk_token *out) {
    enum { NB = 128 };
    const float scale = NB / (10.0f - -10.0f);
    const float inter = - -10.0f * scale;
    int histo[NB] = {0};
    int *bidx = malloc((c->size ? c->size : 1) * sizeof(int));
    for (size_t i = 0; i < c->size; i++) {
        const float val = c->data[i].logit;
        int ib = (int) (scale * val + inter);
        ib = ib < 0 ? 0 : (ib > NB - 1 ? NB - 1 : ib);
        bidx[i] = ib;
        histo[ib]++;
    }
    int nhave = 0;
    int ib = NB - 1;
    for (; ib >= 0; --ib) {
        nhave += histo[ib];
        if (nhave >= npartial) break;
    }
    bk_token *ptrs[NB];
    bk_token *ptr = out;
    for (int j = NB - 1; j >= ib; --j) {
        ptrs[NB - 1 - j] = ptr;
        ptr += histo[j];
    }
    for (size_t i = 0; i < c->size; i++) {
        int j = bidx[i];
        if (j >= ib) *ptrs[NB - 1 - j]++ = c->data[i];
    }
    free(bidx);
    ptr = out;
    int ndone = 0;
    for (int j = NB - 1; j > ib; --j) {
        logit_desc_sort(ptr, (size_t) histo[j], NULL);
        ptr += histo[j];
        ndone += histo[j];
    }
    logit_desc_heap_select_sort(ptr, npartial - ndone, histo[ib], NULL);
    return (size_t) nhave;
}

void bk_partial_sort_inplace(bk_cands *c, int npartial) {
    if (npartial <= 128) {
        logit_desc_heap_select_sort(c->data, npartial, (ptrdiff_t) c->size, NULL);
        c->size = (size_t) npartial;
        c->sorted = 1;
        return;
    }
    bk_token *tmp = malloc(c->size * sizeof(bk_token));
    bk_partial_sort_buckets(c, npartial, tmp);
    memcpy(c->data, tmp, (size_t) npartial * sizeof(bk_token));
    free(tmp);
    c->size = (size_t) npartial;
    c->sorted = 1;
}

void bk_temp_impl(bk_cands *c, float temp) {
    if (c->size == 0) return;
    if (temp <= 0.0f) {
        size_t max_i = 0;
        float max_l = c->data[0].logit;
        for (size_t i = 1; i < c->size; i++) {
            if (c->data[i].logit > max_l) {
                c->data[max_i].logit = -INFINITY;
                max_i = i;
                max_l = c->data[i].logit;
            } else {
                c->data[i].logit = -INFINITY;
            }
        }
        return;
    }
    for (size_t i = 0; i < c->size; i++) c->data[i].logit /= temp;
}

static inline float fmax_cxx(float a, float b) { return (a < b) ? b : a; }   /* std::max(a, b) */

/* the first logit when sorted, else the running std::max over the array */
static float max_logit(const bk_cands *c) {
    float max_l = c->data[0].logit;
    if (!c->sorted) {
        for (size_t i = 1; i < c->size; i++) max_l = fmax_cxx(max_l, c->data[i].logit);
    }
    return max_l;
}

void bk_softmax(bk_cands *c, int do_sort) {
    if (do_sort && !c->sorted) bk_partial_sort_inplace(c, (int) c->size);
    const float max_l = max_logit(c);
    float cum = 0.0f;
    for (size_t i = 0; i < c->size; i++) {
        float p = expf(c->data[i].logit - max_l);
        c->data[i].p = p;
        cum += p;
    }
    for (size_t i = 0; i < c->size; i++) c->data[i].p /= cum;
}

/* ------------------------------------------------------------------------------------------------------------
 * samplers */

void bk_logit_bias(bk_cands *c, const int32_t *tokens, const float *biases, size_t n) {
    if (n == 0) return;
    size_t *search = malloc(n * sizeof(size_t));
    size_t ns = 0;
    for (size_t k = 0; k < n; k++) {
        int32_t t = tokens[k];
        if (t >= 0 && c->size > (size_t) t && c->data[t].id == t) c->data[t].logit += biases[k];
        else search[ns++] = k;
    }
    for (size_t i = 0; i < c->size && ns > 0; i++) {
        for (size_t s = 0; s < ns; s++) {
            if (c->data[i].id == tokens[search[s]]) {
                c->data[i].logit += biases[search[s]];
                break;
            }
        }
    }
    free(search);
}

void bk_penalties(bk_cands *c, const int32_t *counts, int32_t n_vocab, float repeat, float freq, float present) {
    for (size_t i = 0; i < c->size; i++) {
        int32_t id = c->data[i].id;
        if (id < 0 || id >= n_vocab) continue;
        const int count = counts[id];
        if (count == 0) continue;
        if (c->data[i].logit <= 0) c->data[i].logit *= repeat;
        else c->data[i].logit /= repeat;
        c->data[i].logit -= (float) count * freq + (float) (count > 0) * present;
    }
    c->sorted = 0;
}

void bk_dry_apply(bk_cands *c, const uint8_t *has, const float *penalty, int32_t n_vocab) {
    for (size_t i = 0; i < c->size; i++) {
        int32_t id = c->data[i].id;
        if (id >= 0 && id < n_vocab && has[id]) c->data[i].logit -= penalty[id];
    }
    c->sorted = 0;
}

int bk_dry_scan(const int32_t *last, int n_last, int penalty_last_n, int allowed_length, float multiplier,
                float base, const int32_t *tok_off, const int32_t *seq_off, const int32_t *brk,
                int32_t n_vocab, uint8_t *has, float *penalty, int32_t *touched) {
    /* rat(i): the i-th most recent token */
#define RAT(i) last[n_last - 1 - (i)]
    int n = n_last < penalty_last_n ? n_last : penalty_last_n;
    if (n <= allowed_length) return -1;
    int rep_limit = n;
    for (int i = 0; i < n; i++) {
        int32_t t = RAT(i);
        if (t < 0 || t >= n_vocab || tok_off[t] == tok_off[t + 1]) continue;
        int longest = -1;
        for (int s = tok_off[t]; s < tok_off[t + 1]; s++) {
            int len = seq_off[s + 1] - seq_off[s];
            if (len > longest && len <= i) {
                int match = 1;
                for (int o = 0; o < len; o++) {
                    if (brk[seq_off[s] + o] != RAT(i - o - 1)) { match = 0; break; }
                }
                if (match) longest = len;
            }
        }
        if (longest >= 0) {
            rep_limit = i - longest;
            break;
        }
    }
    if (rep_limit < allowed_length) return -1;

    if (n <= 0) return -1;
    int *rc = calloc((size_t) n, sizeof(int));
    {
        const int lastk = n - 1;
        int rt = 0, lt = 0;
        for (int k = 1; k < n; k++) {
            if (k > rt) {
                int m = 0;
                while (m + k < n && RAT(m) == RAT(m + k)) m++;
                rc[lastk - k] = m < rep_limit ? m : rep_limit;
                if (m > 0) {
                    lt = k;
                    rt = k + m - 1;
                }
            } else {
                int p = k - lt;
                int right = rt - k + 1;
                if (rc[lastk - p] < right) {
                    int m = rc[lastk - p] < rep_limit ? rc[lastk - p] : rep_limit;
                    rc[lastk - k] = m;
                } else {
                    int i = rt + 1;
                    while (i < n && RAT(i) == RAT(i - k)) i++;
                    int m = (i - k) < rep_limit ? (i - k) : rep_limit;
                    rc[lastk - k] = m;
                    lt = k;
                    rt = i - 1;
                }
            }
        }
    }
    /* dry_max_token_repeat, kept in penalty[] as an int until the end */
    int n_touched = 0;
    int *maxrep = malloc((size_t) (n > 0 ? n : 1) * sizeof(int));
    for (int i = 0; i < n - 1; i++) {
        int len = rc[i];
        if (len >= allowed_length) {
            int32_t t = RAT(n - 2 - i);
            int found = -1;
            for (int j = 0; j < n_touched; j++) if (touched[j] == t) { found = j; break; }
            if (found < 0) {
                touched[n_touched] = t;
                maxrep[n_touched] = len;
                n_touched++;
            } else if (maxrep[found] < len) {
                maxrep[found] = len;
            }
        }
    }
    const float FLOAT_MAX_LOG = 88.7228391f;
    int max_exponent = 0;
    if (base > 1.000001f) max_exponent = (int) (FLOAT_MAX_LOG / logf(base));
    int out = 0;
    for (int j = 0; j < n_touched; j++) {
        int32_t t = touched[j];
        int single = 0;
        if (t >= 0 && t < n_vocab) {
            for (int s = tok_off[t]; s < tok_off[t + 1]; s++) if (seq_off[s + 1] == seq_off[s]) { single = 1; break; }
        }
        if (single || t < 0 || t >= n_vocab) continue;
        int e = maxrep[j] - allowed_length;
        if (max_exponent > 0 && e > max_exponent) e = max_exponent;
        float pen = (float) ((double) multiplier * pow((double) base, (double) e));
        has[t] = 1;
        penalty[t] = pen;
        touched[out++] = t;
    }
    free(maxrep);
    free(rc);
    return out;
#undef RAT
}

void bk_top_n_sigma(bk_cands *c, float n) {
    if (n <= 0.0f || c->size <= 1) return;
    float max = c->data[0].logit;
    float sum = 0;
    size_t valid = 0;
    for (size_t i = 0; i < c->size; i++) {
        if (c->data[i].logit != -INFINITY) {
            max = fmax_cxx(max, c->data[i].logit);
            sum += c->data[i].logit;
            valid++;
        }
    }
    float mean = valid > 0 ? sum / (float) valid : 0;
    float acc = 0;
    for (size_t i = 0; i < c->size; i++) {
        if (c->data[i].logit != -INFINITY) {
            double d = (double) (c->data[i].logit - mean);
            acc = (float) ((double) acc + pow(d, 2.0));
        }
    }
    float sd = valid > 0 ? (float) sqrt((double) (acc / (float) valid)) : 0;
    for (size_t i = 0; i < c->size; i++) {
        if (c->data[i].logit < max - (n * sd)) c->data[i].logit = -INFINITY;
    }
}

void bk_top_k(bk_cands *c, int32_t k) {
    if (k <= 0) return;
    if ((size_t) k > c->size) k = (int32_t) c->size;
    if (!c->sorted) bk_partial_sort_inplace(c, k);
    c->size = (size_t) k;
}

void bk_typical(bk_cands *c, float p, size_t min_keep) {
    if (p >= 1.0f) return;
    bk_softmax(c, 1);
    float entropy = 0.0f;
    for (size_t i = 0; i < c->size; i++) entropy += -c->data[i].p * logf(c->data[i].p);
    float *score = malloc(c->size * sizeof(float));
    size_t *idx = malloc(c->size * sizeof(size_t));
    for (size_t i = 0; i < c->size; i++) {
        score[i] = fabsf(-logf(c->data[i].p) - entropy);
        idx[i] = i;
    }
    bk_sort_index_by_score(idx, c->size, score);
    float cum = 0.0f;
    size_t last_idx = c->size;
    for (size_t i = 0; i < c->size; i++) {
        cum += c->data[idx[i]].p;
        if (cum > p && (min_keep == 0 || i >= min_keep - 1)) {
            last_idx = i + 1;
            break;
        }
    }
    bk_token *nw = malloc((last_idx ? last_idx : 1) * sizeof(bk_token));
    for (size_t i = 0; i < last_idx; i++) nw[i] = c->data[idx[i]];
    memcpy(c->data, nw, last_idx * sizeof(bk_token));
    c->size = last_idx;
    c->sorted = 0;
    free(nw);
    free(idx);
    free(score);
}

void bk_top_p(bk_cands *c, float p, size_t min_keep) {
    if (p >= 1.0f) return;
    bk_softmax(c, 0);
    size_t k = c->size;
    bk_token *pdata = c->data;
    bk_token *buf = NULL;
    if (!c->sorted && c->size > 1024) {
        k = c->size < 256 ? c->size : 256;
        buf = malloc(c->size * sizeof(bk_token));
        bk_partial_sort_buckets(c, (int) k, buf);
        pdata = buf;
    } else if (!c->sorted) {
        bk_partial_sort_inplace(c, (int) k);
    }
    float cum = 0.0f;
    size_t last_idx = c->size;
    for (size_t i = 0; i < c->size; i++) {
        cum += pdata[i].p;
        if (cum >= p && i + 1 >= min_keep) {
            last_idx = i + 1;
            break;
        }
        if (!c->sorted && i == k - 1) {
            k = c->size;
            bk_partial_sort_buckets(c, (int) k, buf);
            pdata = buf;
        }
    }
    if (!c->sorted) {
        memcpy(c->data, buf, last_idx * sizeof(bk_token));
        c->sorted = 1;
    }
    c->size = last_idx;
    free(buf);
}

void bk_min_p(bk_cands *c, float p, size_t min_keep) {
    if (p <= 0.0f || !c->size) return;
    int applied = 0;
    if (!c->sorted) {
        float max_logit = -FLT_MAX;
        for (size_t i = 0; i < c->size; i++) max_logit = fmax_cxx(max_logit, c->data[i].logit);
        const float min_logit = max_logit + logf(p);
        bk_token *f = malloc(c->size * sizeof(bk_token));
        size_t nf = 0;
        for (size_t i = 0; i < c->size; i++) if (c->data[i].logit >= min_logit) f[nf++] = c->data[i];
        if (nf > 0 && nf >= min_keep) {
            memcpy(c->data, f, nf * sizeof(bk_token));
            c->size = nf;
            applied = 1;
        }
        free(f);
    }
    if (!applied) {
        if (!c->sorted) bk_partial_sort_inplace(c, (int) c->size);
        const float min_logit = c->data[0].logit + logf(p);
        size_t i = 1;
        for (; i < c->size; i++) {
            if (c->data[i].logit < min_logit && i >= min_keep) break;
        }
        c->size = i;
    }
}

void bk_xtc(bk_cands *c, float probability, float threshold, size_t min_keep, bk_mt19937 *g) {
    if (probability <= 0.0f || threshold > 0.5f || c->size < 2) return;
    float chance = bk_uniform_float(g);
    if (chance > probability) return;
    bk_softmax(c, 1);
    int pos_last = 0;
    for (size_t i = 0; i < c->size; i++) {
        if (c->data[i].p >= threshold) pos_last = (int) i;
        else break;
    }
    if (c->size - (size_t) pos_last >= min_keep && pos_last > 0) {
        c->data += pos_last;
        c->size -= (size_t) pos_last;
    }
}

void bk_temp_ext(bk_cands *c, float temp, float delta, float exponent) {
    if (delta > 0) {
        const float min_temp = fmax_cxx(0.0f, temp - delta);
        const float max_temp = temp + delta;
        if (c->size <= 1) return;
        float max_entropy = -logf(1.0f / (float) c->size);
        bk_softmax(c, 1);
        float entropy = 0.0f;
        for (size_t i = 0; i < c->size; i++) {
            float prob = c->data[i].p;
            if (prob > 0.0f) entropy -= prob * logf(prob);
        }
        float norm = entropy / max_entropy;
        float dyn = min_temp + (max_temp - min_temp) * powf(norm, exponent);
        bk_temp_impl(c, dyn);
        const double max_l = c->data[0].logit;
        double cum = 0.0;
        for (size_t i = 0; i < c->size; i++) {
            double q = exp((double) c->data[i].logit - max_l);
            c->data[i].p = (float) q;
            cum += q;
        }
        for (size_t i = 0; i < c->size; i++) c->data[i].p = (float) ((double) c->data[i].p / cum);
    } else {
        bk_temp_impl(c, temp);
    }
}

void bk_dist(bk_cands *c, bk_mt19937 *g) {
    if (c->size == 0) {
        c->selected = -1;
        return;
    }
    c->selected = 0;
    if (c->size == 1) {
        (void) bk_uniform_double(g);
        c->data[0].p = 1.0f;
        return;
    }
    const float max_l = max_logit(c);
    double sum = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        float p = expf(c->data[i].logit - max_l);
        c->data[i].p = p;
        sum += p;
    }
    const double rnd = bk_uniform_double(g);
    double run = 0.0;
    const double tgt = sum * rnd;
    int found = 0;
    for (size_t i = 0; i < c->size; i++) {
        if (!found) {
            run += c->data[i].p;
            if (run >= tgt) {
                c->selected = (int64_t) i;
                found = 1;
            }
        }
        c->data[i].p = (float) ((double) c->data[i].p / sum);
    }
    if (!found) c->selected = (int64_t) c->size - 1;
}

/* both mirostats end alike: draw (discrete_distribution), then mu -= eta * (surprise - tau) */
static void mirostat_draw(bk_cands *c, float tau, float eta, float *mu, bk_mt19937 *g) {
    const int idx = bk_discrete(c, g);
    c->selected = idx;
    float surprise = -log2f(c->data[idx].p);
    float e = surprise - tau;
    *mu = *mu - eta * e;
}

void bk_mirostat(bk_cands *c, int32_t n_vocab, float tau, float eta, int32_t m, float *mu, bk_mt19937 *g) {
    bk_softmax(c, 1);
    float s_hat = 0.0f, sum_ti_bi = 0.0f, sum_ti_sq = 0.0f;
    for (size_t i = 0; i < (size_t) (m - 1) && i < c->size - 1; i++) {
        float t_i = logf((float) (i + 2) / (float) (i + 1));
        float b_i = logf(c->data[i].p / c->data[i + 1].p);
        sum_ti_bi += t_i * b_i;
        sum_ti_sq += t_i * t_i;
    }
    s_hat = sum_ti_bi / sum_ti_sq;
    float eps = s_hat - 1;
    float k = powf((eps * powf(2, *mu)) / (1 - powf((float) n_vocab, -eps)), 1 / s_hat);
    int ki = (int) k;
    bk_top_k(c, ki > 1 ? ki : 1);
    bk_softmax(c, 1);
    mirostat_draw(c, tau, eta, mu, g);
}

void bk_mirostat_v2(bk_cands *c, float tau, float eta, float *mu, bk_mt19937 *g) {
    bk_softmax(c, 1);
    size_t n = 0;
    while (n < c->size && !(-log2f(c->data[n].p) > *mu)) n++;
    c->size = n;
    if (c->size == 0) c->size = 1;
    bk_softmax(c, 1);
    mirostat_draw(c, tau, eta, mu, g);
}

static inline float clampf_cxx(float v, float lo, float hi) { return (v < lo) ? lo : (hi < v) ? hi : v; }

void bk_adaptive_p(bk_cands *c, float target, const float *state, float *orig, bk_mt19937 *g) {
    bk_softmax(c, 0);
    if (target < 0.0f) {
        c->selected = bk_discrete(c, g);
        return;
    }
    for (size_t i = 0; i < c->size; i++) orig[i] = c->data[i].p;
    float t = clampf_cxx(target, 0.0f, 1.0f);
    const float ws = state[0], tw = state[1];
    float adapted = clampf_cxx(tw == 0.0f ? t : 2.0f * t - (ws / tw), 0.0f, 1.0f);
    const float inv_width = 1.0f / 0.3f;
    for (size_t i = 0; i < c->size; i++) {
        if (c->data[i].logit == -INFINITY) continue;
        float d = fabsf((c->data[i].p - adapted) * inv_width);
        c->data[i].logit = 5.0f - 10.0f * d * d / (1.0f + d);
    }
    bk_softmax(c, 0);
    c->selected = bk_discrete(c, g);
}
