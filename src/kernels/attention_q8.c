/* Flash attention over a Q8_0 KV cache and the Hadamard rotation that goes with it, in llama.cpp b11192's float
 * order (see attention.h). References: ggml-cpu/ops.cpp `ggml_compute_forward_flash_attn_ext_f16_one_chunk` with
 * a quantized K/V (the F32-accumulator branch), `ggml_compute_forward_fwht`; ggml-cpu/arch/x86/quants.c
 * (`quantize_row_q8_0`, `ggml_vec_dot_q8_0_q8_0`, here through quants.h); ggml-quants.c `dequantize_row_q8_0`;
 * src/llama-kv-cache.cpp (which rotation sizes), src/llama-graph.cpp build_attn (where the rotations go).
 * Compiled with -ffp-contract=off: every fused multiply-add is written out. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "attention.h"
#include "attn_common.h"
#include "fp16.h"
#include "quants.h"

#define PAD16(n) (((n) + 15) & ~(size_t)15)
#define Q8_BLK 32 /* cells per block of the pipeline */

/* ---- Hadamard rotation ---- */

int bk_attn_rot_k_size(int32_t dk) {
    if (dk <= 0 || dk % 64) return 0;
    int n = 64;
    while (dk % (2 * n) == 0) n *= 2;
    return n;
}

void bk_hadamard_rows(float *x, int64_t n_rows, int n, int64_t row_stride, int ith, int nth) {
    const float scale = 1.0f / sqrtf((float)n);
    const __m256 vs = _mm256_set1_ps(scale);
    for (int64_t r = ith; r < n_rows; r += nth) {
        float *y = x + r * row_stride;
        int i = 0;
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), vs));
        for (; i < n; i++) y[i] = y[i] * scale;
        /* (u, v) -> (u + v, u - v): elementwise, so lanes or scalars give the same values */
        for (int len = 1; len < n; len <<= 1) {
            for (int b = 0; b < n; b += 2 * len) {
                int j = 0;
                if (len >= 8) {
                    for (; j < len; j += 8) {
                        const __m256 u = _mm256_loadu_ps(y + b + j), v = _mm256_loadu_ps(y + b + len + j);
                        _mm256_storeu_ps(y + b + j, _mm256_add_ps(u, v));
                        _mm256_storeu_ps(y + b + len + j, _mm256_sub_ps(u, v));
                    }
                }
                for (; j < len; j++) {
                    const float u = y[b + j], v = y[b + len + j];
                    y[b + j] = u + v;
                    y[b + len + j] = u - v;
                }
            }
        }
    }
}

/* ---- attention ---- */

static size_t q8_group_floats(int32_t G, int32_t dk, int32_t dv) {
    const size_t qbytes = (size_t)G * (dk / BK_QK) * sizeof(bk_block_q8_0);
    return PAD16((qbytes + 3) / 4) + PAD16((size_t)G * dv) + 3 * PAD16((size_t)G * Q8_BLK) + PAD16(Q8_BLK) +
           PAD16((size_t)Q8_BLK * dv) + PAD16(2 * (size_t)G);
}

size_t bk_attn_q8_0_scratch_floats(int32_t n_head, int32_t dk, int32_t dv, int32_t nth) {
    return (size_t)nth * q8_group_floats(n_head, dk, dv);
}

int bk_attn_q8_0_check(const bk_attn_q8_0_args *a) {
    if (!a || !a->q || !a->k || !a->v || !a->out || !a->scratch) return BK_ATTN_NULL;
    if (a->n_tokens <= 0 || a->n_head <= 0 || a->n_head_kv <= 0 || a->dk <= 0 || a->dv <= 0 || a->n_kv <= 0 ||
        a->n_head % a->n_head_kv != 0 || a->dk % BK_QK || a->dv % BK_QK)
        return BK_ATTN_BAD_SHAPE;
    const int64_t kb = a->dk / BK_QK * (int64_t)sizeof(bk_block_q8_0), vb = a->dv / BK_QK * (int64_t)sizeof(bk_block_q8_0);
    if (a->q_head < a->dk || a->q_row < (int64_t)a->n_head * a->dk || a->k_head < kb ||
        a->k_cell < a->n_head_kv * kb || a->v_head < vb || a->v_cell < a->n_head_kv * vb ||
        (a->mask && a->mask_row < a->n_kv) || a->out_head < a->dv || a->out_row < (int64_t)a->n_head * a->dv)
        return BK_ATTN_BAD_STRIDE;
    return BK_ATTN_OK;
}

typedef struct q8_ws {
    bk_block_q8_0 *qq; /* [G][dk/32] Q quantized */
    float *acc;        /* [G][dv] */
    float *sb, *msb, *vsb;
    int32_t *idx;
    float *vf;         /* [Q8_BLK][dv] V rows of the block dequantized (exact) */
    float *M, *S;
} q8_ws;

static q8_ws q8_scratch(float *p, int32_t G, int32_t dk, int32_t dv) {
    q8_ws w;
    const size_t qbytes = (size_t)G * (dk / BK_QK) * sizeof(bk_block_q8_0);
    w.qq = (bk_block_q8_0 *)p; p += PAD16((qbytes + 3) / 4);
    w.acc = p;                 p += PAD16((size_t)G * dv);
    w.sb = p;                  p += PAD16((size_t)G * Q8_BLK);
    w.msb = p;                 p += PAD16((size_t)G * Q8_BLK);
    w.vsb = p;                 p += PAD16((size_t)G * Q8_BLK);
    w.idx = (int32_t *)p;      p += PAD16(Q8_BLK);
    w.vf = p;                  p += PAD16((size_t)Q8_BLK * dv);
    w.M = p;
    w.S = p + G;
    return w;
}

/* dequantize_row_q8_0: y = (float)q * h(d), exact */
static inline void dequant_row(const bk_block_q8_0 *x, float *y, int n) {
    for (int b = 0; b < n / BK_QK; b++) {
        const __m256 d = _mm256_set1_ps(bk_h2f(x[b].d));
        for (int i = 0; i < BK_QK; i += 8) {
            const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(x[b].qs + i)));
            _mm256_storeu_ps(y + b * BK_QK + i, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
        }
    }
}

/* The one-chunk recurrence for query row t and heads h0 .. h0+G-1 sharing a KV head, over all n_kv cells:
 * per block of unmasked cells, the scores, then the running max and expf, then the F32 accumulators. */
static void q8_group(const bk_attn_q8_0_args *a, int t, int h0, int G, const q8_ws *w) {
    const int dk = a->dk, dv = a->dv, nbk = dk / BK_QK;
    const int hk = h0 / (a->n_head / a->n_head_kv);
    const uint8_t *kb = a->k + (int64_t)hk * a->k_head;
    const uint8_t *vb = a->v + (int64_t)hk * a->v_head;
    const uint16_t *mp = a->mask ? a->mask + (int64_t)t * a->mask_row : NULL;
    const float scale = a->scale;

    for (int g = 0; g < G; g++) {
        bk_quant_row_q8_0(a->q + (int64_t)t * a->q_row + (int64_t)(h0 + g) * a->q_head, w->qq + (size_t)g * nbk, dk);
        w->M[g] = -INFINITY;
        w->S[g] = 0.0f;
    }
    memset(w->acc, 0, (size_t)G * dv * sizeof(float));

    int64_t c = 0;
    while (c < a->n_kv) {
        int n = 0;
        for (; c < a->n_kv && n < Q8_BLK; c++) {
            const float mv = mp ? bk_h2f(mp[c]) : 0.0f;
            if (mv == -INFINITY) continue;
            w->msb[n] = mv;
            w->idx[n++] = (int32_t)c;
        }
        if (n == 0) break;
        for (int j = 0; j < n; j++) {
            const void *kr = kb + (int64_t)w->idx[j] * a->k_cell;
            for (int g = 0; g < G; g++) {
                float s = bk_dot_q8_0_q8_0(dk, kr, w->qq + (size_t)g * nbk);
                s = s * scale;
                w->sb[g * Q8_BLK + j] = s + w->msb[j];
            }
        }
        for (int g = 0; g < G; g++)
            bk_attn_online_factors(w->sb + g * Q8_BLK, n, &w->M[g], w->msb + g * Q8_BLK, w->vsb + g * Q8_BLK);
        for (int j = 0; j < n; j++)
            dequant_row((const bk_block_q8_0 *)(vb + (int64_t)w->idx[j] * a->v_cell), w->vf + (size_t)j * dv, dv);
        for (int g = 0; g < G; g++) {
            float *acc = w->acc + (size_t)g * dv;
            const float *msb = w->msb + g * Q8_BLK, *vsb = w->vsb + g * Q8_BLK;
            float S = w->S[g];
            for (int j = 0; j < n; j++) {
                const float ms = msb[j], vs = vsb[j];
                if (ms != 1.0f) { /* ggml_vec_scale_f32; x * 1 is x */
                    const __m256 m = _mm256_set1_ps(ms);
                    for (int d = 0; d < dv; d += 8) _mm256_storeu_ps(acc + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), m));
                }
                /* ggml_vec_mad_f32: acc = fma(v, vs, acc) */
                const __m256 wv = _mm256_set1_ps(vs);
                const float *vr = w->vf + (size_t)j * dv;
                for (int d = 0; d < dv; d += 8)
                    _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(_mm256_loadu_ps(vr + d), wv, _mm256_loadu_ps(acc + d)));
                S = fmaf(S, ms, vs);
            }
            w->S[g] = S;
        }
    }
}

void bk_attn_q8_0(const bk_attn_q8_0_args *a, int ith, int nth) {
    /* heads per unit: the whole GQA group when that leaves two units per thread, else fewer */
    const int gqa = a->n_head / a->n_head_kv;
    int G = 1;
    for (int g = gqa; g > 1; g--)
        if (gqa % g == 0 && (int64_t)a->n_tokens * (a->n_head / g) >= 2 * (int64_t)nth) {
            G = g;
            break;
        }
    const q8_ws w = q8_scratch(a->scratch + (size_t)ith * q8_group_floats(a->n_head, a->dk, a->dv), G, a->dk, a->dv);
    const int ngroups = a->n_head / G;
    const int64_t nunits = (int64_t)a->n_tokens * ngroups;
    for (int64_t u = ith; u < nunits; u += nth) {
        const int t = (int)(u / ngroups), h0 = (int)(u % ngroups) * G;
        q8_group(a, t, h0, G, &w);
        for (int g = 0; g < G; g++) {
            const float S = w.S[g];
            const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
            const __m256 si = _mm256_set1_ps(S_inv);
            const float *acc = w.acc + (size_t)g * a->dv;
            float *dst = a->out + (int64_t)t * a->out_row + (int64_t)(h0 + g) * a->out_head;
            for (int d = 0; d < a->dv; d += 8) _mm256_storeu_ps(dst + d, _mm256_mul_ps(_mm256_loadu_ps(acc + d), si));
        }
    }
}
