/* Backend sampling graphs of llama.cpp b11192 on ggml-cpu; see backend_sampling.h. Written from the graphs in
 * llama-sampler.cpp and the CPU ops they use (argsort, top_k, get_rows, soft_max, cumsum, scale, step, sum,
 * clamp, set_rows, log, add, sub, argmax). */
#include "backend_sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "act.h"   /* bk_v_expf: ggml_v_expf */

/* the 8-lane sum ggml_vec_soft_max_f32 takes: ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)) */
static inline float lanes_sum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

void bk_ggml_soft_max_row(int n, float *y, const float *x) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];     /* ggml_vec_max_f32: MAX(max, x[i]) */
    double sum = 0.0;
    int i = 0;
    const __m256 vmax = _mm256_set1_ps(max);
    for (; i + 7 < n; i += 8) {
        const __m256 v = bk_v_expf(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
        _mm256_storeu_ps(y + i, v);
        sum += (double) lanes_sum(v);
    }
    for (; i < n; i++) {
        const float v = expf(x[i] - max);
        sum += (double) v;
        y[i] = v;
    }
    sum = 1.0 / sum;
    const float s = (float) sum;
    for (i = 0; i < n; i++) y[i] *= s;
}

static float *logits_of(const bk_cands *c) {
    float *x = malloc((c->size ? c->size : 1) * sizeof(float));
    for (size_t i = 0; i < c->size; i++) x[i] = c->data[i].logit;
    return x;
}

/* ggml_vec_argmax_f32: the last index holding the maximum */
static size_t argmax_logit(const bk_cands *c) {
    float max = -INFINITY;
    size_t idx = 0;
    for (size_t i = 0; i < c->size; i++) {
        const float v = c->data[i].logit;
        max = max > v ? max : v;
        if (max == v) idx = i;
    }
    return idx;
}

void bk_be_top_k(bk_cands *c, int32_t k) {
    /* std::partial_sort of the index array with data[a] > data[b]: the same moves as on the entries */
    bk_partial_sort_logit_desc(c->data, (size_t) k, c->size);
    c->size = (size_t) k;
    if (k > 1) {
        const bk_token t = c->data[0];
        c->data[0] = c->data[1];
        c->data[1] = t;
    }
    c->sorted = 0;
}

void bk_be_top_p(bk_cands *c, float p) {
    const size_t n = c->size;
    bk_sort_logit_desc(c->data, n);            /* argsort (std::sort, data[a] > data[b]) + get_rows */
    float *s = logits_of(c);
    bk_ggml_soft_max_row((int) n, s, s);
    float cum = 0.0f;
    double cnt = 0.0;
    unsigned char *keep = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        cum = i == 0 ? s[0] : cum + s[i];      /* ggml_vec_cumsum_f32 */
        keep[i] = fmaf(cum, -1.0f, p) > 0.0f;  /* scale_bias(cdf, -1, p), step */
        cnt += (double) keep[i];               /* ggml_sum: double sum, stored as float */
    }
    float idxf = (float) cnt;
    const float hi = (float) (n - 1);
    idxf = idxf < hi ? idxf : hi;              /* clamp: MAX(MIN(x, max), min) */
    idxf = idxf > 0.0f ? idxf : 0.0f;
    keep[(size_t) (int32_t) idxf] = 1;         /* set_rows(mask, ones, (int32) idxf) */
    for (size_t i = 0; i < n; i++) c->data[i].logit = c->data[i].logit + (keep[i] ? 0.0f : -INFINITY);
    free(keep);
    free(s);
    c->sorted = 0;
}

void bk_be_min_p(bk_cands *c, float p) {
    const float thr = fmaf(c->data[argmax_logit(c)].logit, 1.0f, logf(p));   /* scale_bias(max, 1, logf(p)) */
    for (size_t i = 0; i < c->size; i++) {
        const float l = c->data[i].logit;
        c->data[i].logit = l + ((l - thr) > 0.0f ? 0.0f : -INFINITY);
    }
}

void bk_be_temp(bk_cands *c, float temp) {
    if (temp <= 0.0f) {
        const size_t m = argmax_logit(c);
        c->data[0] = c->data[m];
        c->data[0].p = 0.0f;
        c->size = 1;
        return;
    }
    const float s = 1.0f / temp;
    for (size_t i = 0; i < c->size; i++) c->data[i].logit *= s;
}

void bk_be_logit_bias(bk_cands *c, const int32_t *tokens, const float *biases, size_t n) {
    float *b = calloc(c->size ? c->size : 1, sizeof(float));      /* fill(0) + set_rows */
    for (size_t j = 0; j < n; j++) b[tokens[j]] = biases[j];
    for (size_t i = 0; i < c->size; i++) c->data[i].logit = c->data[i].logit + b[i];
    free(b);
}

static inline float penalize(float x, int32_t cnt, float r, float inv_r, float freq, float present) {
    const float act = (float) cnt > 0.0f ? 1.0f : 0.0f;          /* step(counts_f32) */
    if (r != 1.0f) {
        const float pos = x > 0.0f ? 1.0f : 0.0f;
        const float neg = 1.0f - pos;
        float s = pos * inv_r + neg * r;                           /* scale, scale, add */
        s = s * act;
        s = s + (1.0f - act);
        x = x * s;
    }
    if (freq != 0.0f) x = x - (float) cnt * freq;
    if (present != 0.0f) x = x - act * present;
    return x;
}

void bk_be_penalties(bk_cands *c, const int32_t *counts, int32_t n_vocab, int32_t n_max, int has_candidates,
                     float repeat, float freq, float present) {
    const float inv_r = 1.0f / repeat;
    if (has_candidates) {
        for (size_t i = 0; i < c->size; i++) {
            const int32_t id = c->data[i].id;
            c->data[i].logit = penalize(c->data[i].logit, counts[id], repeat, inv_r, freq, present);
        }
        return;
    }
    /* gathered at the counted tokens (sorted ids) and the filler, scattered back; entry t is token t */
    int32_t n_active = 0, filler = -1;
    for (int32_t t = 0; t < n_vocab; t++) {
        if (counts[t] > 0) n_active++;
        else if (filler < 0) filler = t;
    }
    float fill_v = 0.0f;
    if (n_active < n_max && filler >= 0) fill_v = penalize(c->data[filler].logit, 0, repeat, inv_r, freq, present);
    for (int32_t t = 0; t < n_vocab; t++) {
        if (counts[t] > 0) c->data[t].logit = penalize(c->data[t].logit, counts[t], repeat, inv_r, freq, present);
    }
    if (n_active < n_max && filler >= 0) c->data[filler].logit = fill_v;
}

void bk_be_dynatemp(bk_cands *c, float temp, float delta, float exponent) {
    const size_t n = c->size;
    const float min_temp = 0.0f > temp - delta ? 0.0f : temp - delta;
    const float max_temp = temp + delta;
    const float max_entropy = logf((float) (int64_t) n);
    float *pr = logits_of(c);
    bk_ggml_soft_max_row((int) n, pr, pr);
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        float q = pr[i] < 1.0f ? pr[i] : 1.0f;                   /* clamp(1e-10, 1) */
        q = q > 1e-10f ? q : 1e-10f;
        sum += (double) (q * logf(q));                           /* log, mul, sum */
    }
    free(pr);
    const float entropy = (float) sum * -1.0f;
    const float norm = entropy * (1.0f / max_entropy);
    const float pw = expf(logf(norm) * exponent);
    const float dyn = fmaf(pw, max_temp - min_temp, min_temp);  /* scale_bias */
    for (size_t i = 0; i < n; i++) c->data[i].logit = c->data[i].logit / dyn;
}

int64_t bk_be_dist(bk_cands *c, float u) {
    const size_t n = c->size;
    float *pr = logits_of(c);
    bk_ggml_soft_max_row((int) n, pr, pr);
    float cum = 0.0f;
    double cnt = 0.0;
    for (size_t i = 0; i < n; i++) {
        cum = i == 0 ? pr[0] : cum + pr[i];
        cnt += (cum - u) > 0.0f ? 1.0 : 0.0;   /* sub, step, sum */
        c->data[i].p = pr[i];
    }
    free(pr);
    float idxf = (float) cnt;
    const float nf = (float) n;
    idxf = idxf < nf ? idxf : nf;              /* clamp(1, n) */
    idxf = idxf > 1.0f ? idxf : 1.0f;
    const float pos = fmaf(idxf, -1.0f, nf);   /* scale_bias(-1, n) */
    c->selected = (int64_t) (int32_t) pos;
    c->sorted = 0;
    return c->selected;
}
