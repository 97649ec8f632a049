/* Flash attention over an F16 KV cache in llama.cpp b11192's float order (see attention.h for the contract).
 *
 * The reference is ggml-cpu/ops.cpp (`ggml_compute_forward_flash_attn_ext_f16`, `_one_chunk`, `_tiled`,
 * `ggml_flash_attn_ext_reduce_partials`), vec.h/vec.cpp (`ggml_vec_dot_f16`, `ggml_vec_scale_f16`,
 * `ggml_vec_mad_f16`, `ggml_vec_soft_max_f32`, `ggml_v_expf`) and simd-gemm.h, as built for AVX2+FMA+F16C with
 * GCC's -ffp-contract=fast. This file is compiled with -ffp-contract=off: every fused multiply-add the oracle
 * makes is written out (fmaf / _mm256_fmadd_ps), every other operation rounds.
 *
 * What is free and what is not. Within one (query row, head) the order of every operation is fixed. Which
 * thread computes which row is free (rows are independent), except that the tiled path's query tiles must be
 * the oracle's (a KV tile is skipped only when all rows of the tile have it fully masked; otherwise a fully
 * masked row still adds 0*V, which can turn -0 into +0 or 0*inf into NaN), and the split-KV chunks are the
 * oracle's (oracle_nth of them, reduced in order).
 */
#include "attention.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "act.h" /* bk_v_expf: ggml_v_expf */
#include "attn_common.h"
#include "fp16.h"

#define PAD16(n) (((n) + 15) & ~(size_t)15)

/* ---- vector helpers (the AVX2 mappings of ggml's simd-mappings.h) ---- */

/* Round 8 floats to F16 and back: what storing to an F16 buffer and loading it again gives. */
static inline __m256 round_h8(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, 0)); }

static inline float round_h1(float x) { return bk_h2f(bk_f2h(x)); }

/* Widen n halves (exact), inlined: the rows here are short and many. */
static inline void widen_row(const uint16_t *x, float *y, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    for (; i < n; i++) y[i] = bk_h2f(x[i]);
}

/* Sum of 8 lanes as ggml_vec_soft_max_f32 adds them: ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)). */
static inline float hsum8_softmax(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ---- path selection and scratch ---- */

int bk_attn_f16_path(int32_t n_tokens, int32_t n_kv, int32_t dv) {
    if (n_tokens == 1 && n_kv >= BK_ATTN_SPLIT_MIN_KV) return BK_ATTN_SPLIT_KV;
    if (n_tokens >= BK_ATTN_TILE_Q && dv % 8 == 0) return BK_ATTN_TILED;
    return BK_ATTN_ONE_CHUNK;
}

int bk_attn_f16_path_streams(int32_t n_tokens, int32_t n_kv, int32_t dv, int32_t multi_stream) {
    const int path = bk_attn_f16_path(n_tokens, n_kv, dv);
    return multi_stream && path == BK_ATTN_SPLIT_KV ? BK_ATTN_ONE_CHUNK : path;
}

/* Per-thread scratch, in floats. Tiled: Q tile, KQ, VKQ, V tile, K tile (transposed), row S/M/max/skip.
 * One-chunk: see oc_group_floats. */
static size_t tiled_floats(int32_t dk, int32_t dv) {
    const size_t Q = BK_ATTN_TILE_Q, KV = BK_ATTN_TILE_KV;
    return PAD16(Q * dk) + PAD16(Q * KV) + PAD16(Q * dv) + PAD16(KV * dv) + PAD16(KV * dk) +
           PAD16(4 * Q);
}

static size_t oc_group_floats(int32_t G, int32_t dk, int32_t dv);

/* A one-chunk group has at most n_head heads. */
static size_t per_thread_floats(int32_t n_head, int32_t dk, int32_t dv) {
    size_t a = tiled_floats(dk, dv), b = oc_group_floats(n_head, dk, dv);
    return a > b ? a : b;
}

size_t bk_attn_f16_scratch_floats(int32_t n_head, int32_t dk, int32_t dv, int32_t oracle_nth, int32_t nth) {
    return (size_t)nth * per_thread_floats(n_head, dk, dv) + (size_t)n_head * oracle_nth * (2 + (size_t)dv);
}

int bk_attn_f16_check(const bk_attn_f16_args *a) {
    if (!a || !a->q || !a->k || !a->v || !a->out || !a->scratch) return BK_ATTN_NULL;
    if (a->n_tokens <= 0 || a->n_head <= 0 || a->n_head_kv <= 0 || a->dk <= 0 || a->dv <= 0 || a->n_kv <= 0 ||
        a->n_head % a->n_head_kv != 0)
        return BK_ATTN_BAD_SHAPE;
    if (a->oracle_nth <= 0) return BK_ATTN_BAD_NTH;
    if (a->q_head < a->dk || a->q_row < (int64_t)a->n_head * a->dk || a->k_head < a->dk ||
        a->k_cell < (int64_t)a->n_head_kv * a->dk || a->v_head < a->dv || a->v_cell < (int64_t)a->n_head_kv * a->dv ||
        (a->mask && a->mask_row < a->n_kv) || a->out_head < a->dv || a->out_row < (int64_t)a->n_head * a->dv)
        return BK_ATTN_BAD_STRIDE;
    return BK_ATTN_OK;
}

/* ---- paths A and C: the one-chunk recurrence ---- */

/* The end of ggml_vec_dot_f16 (GGML_F16_VEC_REDUCE): ((s0+s2)+(s1+s3)), then lanes l + (l+4), then
 * (t0+t1)+(t2+t3). */
static inline float hsum_dot(__m256 s0, __m256 s1, __m256 s2, __m256 s3) {
    s0 = _mm256_add_ps(s0, s2);
    s1 = _mm256_add_ps(s1, s3);
    s0 = _mm256_add_ps(s0, s1);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

/* In-place 8x8 transpose: lane c of y[l] becomes lane l of y[c]. */
static inline void transpose8(__m256 y[8]) {
    const __m256 a0 = _mm256_unpacklo_ps(y[0], y[1]), a1 = _mm256_unpackhi_ps(y[0], y[1]);
    const __m256 a2 = _mm256_unpacklo_ps(y[2], y[3]), a3 = _mm256_unpackhi_ps(y[2], y[3]);
    const __m256 a4 = _mm256_unpacklo_ps(y[4], y[5]), a5 = _mm256_unpackhi_ps(y[4], y[5]);
    const __m256 a6 = _mm256_unpacklo_ps(y[6], y[7]), a7 = _mm256_unpackhi_ps(y[6], y[7]);
    const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE);
    const __m256 b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE);
    const __m256 b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE);
    const __m256 b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
    y[0] = _mm256_permute2f128_ps(b0, b4, 0x20);
    y[1] = _mm256_permute2f128_ps(b1, b5, 0x20);
    y[2] = _mm256_permute2f128_ps(b2, b6, 0x20);
    y[3] = _mm256_permute2f128_ps(b3, b7, 0x20);
    y[4] = _mm256_permute2f128_ps(b0, b4, 0x31);
    y[5] = _mm256_permute2f128_ps(b1, b5, 0x31);
    y[6] = _mm256_permute2f128_ps(b2, b6, 0x31);
    y[7] = _mm256_permute2f128_ps(b3, b7, 0x31);
}

/* ggml_vec_dot_f16's order on operands already widened (exact: both hold F16 values). Four 8-lane
 * accumulators over 32-element steps, acc = fma(x, y, acc) from +0 (not a plain product: fma turns a -0
 * product into +0), hsum_dot, the n % 32 tail added in double, the result rounded to float. */
static inline float dot_f32(int n, const float *x, const float *y) {
    const int np = n & ~31;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    for (int i = 0; i < np; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), s3);
    }
    double sum = (double)hsum_dot(s0, s1, s2, s3);
    for (int i = np; i < n; i++) sum += (double)(x[i] * y[i]);
    return (float)sum;
}

#define OC_BLK 32 /* cells per block of the one-chunk pipeline */

/* Scratch of one one-chunk group of G heads, in floats. */
static size_t oc_group_floats(int32_t G, int32_t dk, int32_t dv) {
    return PAD16((size_t)G * dk) + PAD16(dk) + PAD16(dk) + PAD16((size_t)G * dv) + 3 * PAD16((size_t)G * OC_BLK) +
           PAD16(OC_BLK) + PAD16((size_t)OC_BLK * dv) + PAD16((size_t)G * OC_BLK * 8) + PAD16(2 * (size_t)G);
}

typedef struct oc_ws {
    float *qf;      /* [G][dk] Q rounded to F16, widened */
    uint16_t *qh;   /* [dk] */
    float *kf;      /* [dk] one K row widened */
    float *acc;     /* [G][dv] the F16 accumulators, widened */
    float *sb, *msb, *vsb; /* [G][OC_BLK] scores, then the scale and weight of each cell */
    int32_t *idx;   /* [OC_BLK] cells of the block */
    float *vf;      /* [OC_BLK][dv] V rows of the block widened */
    float *xb;      /* [G][OC_BLK][8] partial dot lanes */
    float *M, *S;   /* [G] */
} oc_ws;

static oc_ws oc_scratch(float *p, int32_t G, int32_t dk, int32_t dv) {
    oc_ws w;
    w.qf = p;                p += PAD16((size_t)G * dk);
    w.qh = (uint16_t *)p;    p += PAD16(dk);
    w.kf = p;                p += PAD16(dk);
    w.acc = p;               p += PAD16((size_t)G * dv);
    w.sb = p;                p += PAD16((size_t)G * OC_BLK);
    w.msb = p;               p += PAD16((size_t)G * OC_BLK);
    w.vsb = p;               p += PAD16((size_t)G * OC_BLK);
    w.idx = (int32_t *)p;    p += PAD16(OC_BLK);
    w.vf = p;                p += PAD16((size_t)OC_BLK * dv);
    w.xb = p;                p += PAD16((size_t)G * OC_BLK * 8);
    w.M = p;
    w.S = p + G;
    return w;
}

/* acc = f16(fma(v, vs, f16(acc * ms))) over the n cells of a block (the scale only where ms != 1: x * 1 is x),
 * S = fma(S, ms, vs). DV known at compile time keeps the accumulator in registers. */
static inline void oc_accumulate(int dv, int n, float *acc, const float *vf, const uint16_t *vb, int64_t v_cell,
                                 const int32_t *idx, const float *msb, const float *vsb, float *Sp) {
    const int dv8 = dv & ~7;
    float S = *Sp;
    if (dv == 64) {
        /* V widened straight from the cache: the accumulator stays in registers */
        __m256 r[8];
        for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(acc + 8 * i);
        for (int j = 0; j < n; j++) {
            const float ms = msb[j], vs = vsb[j];
            if (ms != 1.0f) {
                const __m256 m = _mm256_set1_ps(ms);
                for (int i = 0; i < 8; i++) r[i] = round_h8(_mm256_mul_ps(r[i], m));
            }
            const __m256 w = _mm256_set1_ps(vs);
            const uint16_t *vr = vb + (int64_t)idx[j] * v_cell;
            for (int i = 0; i < 8; i++)
                r[i] = round_h8(_mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(vr + 8 * i))), w, r[i]));
            S = fmaf(S, ms, vs);
        }
        for (int i = 0; i < 8; i++) _mm256_storeu_ps(acc + 8 * i, r[i]);
    } else {
        for (int j = 0; j < n; j++) {
            const float ms = msb[j], vs = vsb[j];
            if (ms != 1.0f) {
                const __m256 m = _mm256_set1_ps(ms);
                int d = 0;
                for (; d < dv8; d += 8) _mm256_storeu_ps(acc + d, round_h8(_mm256_mul_ps(_mm256_loadu_ps(acc + d), m)));
                for (; d < dv; d++) acc[d] = round_h1(acc[d] * ms);
            }
            const __m256 w = _mm256_set1_ps(vs);
            const float *vr = vf + (size_t)j * dv;
            int d = 0;
            for (; d < dv8; d += 8)
                _mm256_storeu_ps(acc + d, round_h8(_mm256_fmadd_ps(_mm256_loadu_ps(vr + d), w, _mm256_loadu_ps(acc + d))));
            for (; d < dv; d++) acc[d] = round_h1(fmaf(vr[d], vs, acc[d]));
            S = fmaf(S, ms, vs);
        }
    }
    *Sp = S;
}

/* The one-chunk recurrence (ggml `_one_chunk`) for query row t and heads h0 .. h0+G-1, which share one KV head,
 * over cells [c0, c1). Each head's sequence of operations is exactly ggml's; the work is only reordered:
 * per block of OC_BLK unmasked cells, first every score (the K row widened once for the G heads), then the
 * running max and libm expf of each cell, then the F16 accumulator chain (the V row widened once).
 * On return w->acc[g] holds the accumulator widened, w->M[g] and w->S[g] the max and sum. */
static void one_chunk_group(const bk_attn_f16_args *a, int t, int h0, int G, int64_t c0, int64_t c1, const oc_ws *w) {
    const int dk = a->dk, dv = a->dv;
    const int hk = h0 / (a->n_head / a->n_head_kv);
    const uint16_t *kb = a->k + (int64_t)hk * a->k_head;
    const uint16_t *vb = a->v + (int64_t)hk * a->v_head;
    const uint16_t *mp = a->mask ? a->mask + (int64_t)t * a->mask_row : NULL;
    const float scale = a->scale;

    for (int g = 0; g < G; g++) {
        /* Q rounded to F16 as ggml_cpu_fp32_to_fp16 does, kept widened for the dot products */
        bk_fp32_to_fp16_row(a->q + (int64_t)t * a->q_row + (int64_t)(h0 + g) * a->q_head, w->qh, dk);
        bk_fp16_to_fp32_row(w->qh, w->qf + (size_t)g * dk, dk);
        w->M[g] = -INFINITY;
        w->S[g] = 0.0f;
    }
    memset(w->acc, 0, (size_t)G * dv * sizeof(float));

    int64_t c = c0;
    while (c < c1) {
        /* the next block of cells whose mask is not -inf (ggml skips the others entirely) */
        int n = 0;
        if (mp) {
            for (; c < c1 && n < OC_BLK; c++) {
                const float mv = bk_h2f(mp[c]);
                if (mv == -INFINITY) continue;
                w->msb[n] = mv; /* the mask value, until phase 2 overwrites it */
                w->idx[n++] = (int32_t)c;
            }
        } else {
            for (; c < c1 && n < OC_BLK; c++) {
                w->msb[n] = 0.0f;
                w->idx[n++] = (int32_t)c;
            }
        }
        if (n == 0) break;

        /* scores: s = fl(fl(dot(K, Qh) * scale) + mask) */
        if (dk == 64) {
            /* per cell and head the lanes X = (s0+s2)+(s1+s3); then, eight cells at a time, the rest of the
             * reduction ((X0+X4)+(X1+X5))+((X2+X6)+(X3+X7)) on transposed lanes: the same additions */
            for (int j = 0; j < n; j++) {
                const uint16_t *kr = kb + (int64_t)w->idx[j] * a->k_cell;
                __m256 kv[8];
                for (int i = 0; i < 8; i++) kv[i] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kr + 8 * i)));
                for (int g = 0; g < G; g++) {
                    const float *qf = w->qf + (size_t)g * 64;
                    const __m256 z = _mm256_setzero_ps();
                    __m256 s0 = _mm256_fmadd_ps(kv[0], _mm256_loadu_ps(qf), z);
                    __m256 s1 = _mm256_fmadd_ps(kv[1], _mm256_loadu_ps(qf + 8), z);
                    __m256 s2 = _mm256_fmadd_ps(kv[2], _mm256_loadu_ps(qf + 16), z);
                    __m256 s3 = _mm256_fmadd_ps(kv[3], _mm256_loadu_ps(qf + 24), z);
                    s0 = _mm256_fmadd_ps(kv[4], _mm256_loadu_ps(qf + 32), s0);
                    s1 = _mm256_fmadd_ps(kv[5], _mm256_loadu_ps(qf + 40), s1);
                    s2 = _mm256_fmadd_ps(kv[6], _mm256_loadu_ps(qf + 48), s2);
                    s3 = _mm256_fmadd_ps(kv[7], _mm256_loadu_ps(qf + 56), s3);
                    const __m256 x = _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3));
                    _mm256_storeu_ps(w->xb + ((size_t)g * OC_BLK + j) * 8, x);
                }
            }
            const __m256 vscale = _mm256_set1_ps(scale);
            for (int g = 0; g < G; g++) {
                const float *xb = w->xb + (size_t)g * OC_BLK * 8;
                float *sb = w->sb + g * OC_BLK;
                int j = 0;
                for (; j + 8 <= n; j += 8) {
                    __m256 y[8];
                    for (int i = 0; i < 8; i++) y[i] = _mm256_loadu_ps(xb + (size_t)(j + i) * 8);
                    transpose8(y);
                    const __m256 t0 = _mm256_add_ps(y[0], y[4]), t1 = _mm256_add_ps(y[1], y[5]);
                    const __m256 t2 = _mm256_add_ps(y[2], y[6]), t3 = _mm256_add_ps(y[3], y[7]);
                    __m256 r = _mm256_add_ps(_mm256_add_ps(t0, t1), _mm256_add_ps(t2, t3));
                    r = _mm256_mul_ps(r, vscale);
                    _mm256_storeu_ps(sb + j, _mm256_add_ps(r, _mm256_loadu_ps(w->msb + j)));
                }
                for (; j < n; j++) {
                    const float *x = xb + (size_t)j * 8;
                    const float r = ((x[0] + x[4]) + (x[1] + x[5])) + ((x[2] + x[6]) + (x[3] + x[7]));
                    const float rs = r * scale;
                    sb[j] = rs + w->msb[j];
                }
            }
        } else {
            for (int j = 0; j < n; j++) {
                widen_row(kb + (int64_t)w->idx[j] * a->k_cell, w->kf, dk);
                for (int g = 0; g < G; g++) {
                    float sc = dot_f32(dk, w->kf, w->qf + (size_t)g * dk);
                    sc = sc * scale;
                    w->sb[g * OC_BLK + j] = sc + w->msb[j];
                }
            }
        }
        /* running max; ms scales the accumulator on a new max, vs weighs the cell */
        for (int g = 0; g < G; g++)
            bk_attn_online_factors(w->sb + g * OC_BLK, n, &w->M[g], w->msb + g * OC_BLK, w->vsb + g * OC_BLK);
        /* the accumulators */
        if (dv != 64)
            for (int j = 0; j < n; j++) widen_row(vb + (int64_t)w->idx[j] * a->v_cell, w->vf + (size_t)j * dv, dv);
        for (int g = 0; g < G; g++)
            oc_accumulate(dv, n, w->acc + (size_t)g * dv, w->vf, vb, a->v_cell, w->idx, w->msb + g * OC_BLK,
                          w->vsb + g * OC_BLK, &w->S[g]);
    }
}

/* ggml_vec_scale_f32 into the output row. */
static void scale_out(int dv, const float *src, float s, float *dst) {
    const __m256 vs = _mm256_set1_ps(s);
    int d = 0;
    for (; d + 8 <= dv; d += 8) _mm256_storeu_ps(dst + d, _mm256_mul_ps(_mm256_loadu_ps(src + d), vs));
    for (; d < dv; d++) dst[d] = src[d] * s;
}

static float *thread_scratch(const bk_attn_f16_args *a, int ith) {
    return a->scratch + (size_t)ith * per_thread_floats(a->n_head, a->dk, a->dv);
}

/* Heads per work unit: all the query heads of a KV head when that leaves at least two units per thread,
 * else fewer (a divisor of the group), down to one. Results do not depend on it. */
static int group_size(const bk_attn_f16_args *a, int64_t units_per_kv_head, int nth) {
    const int gqa = a->n_head / a->n_head_kv;
    for (int G = gqa; G > 1; G--) {
        if (gqa % G) continue;
        if (units_per_kv_head * a->n_head_kv * (gqa / G) >= 2 * (int64_t)nth) return G;
    }
    return 1;
}

static void run_one_chunk(const bk_attn_f16_args *a, int ith, int nth) {
    const int G = group_size(a, a->n_tokens, nth);
    const oc_ws w = oc_scratch(thread_scratch(a, ith), G, a->dk, a->dv);
    const int ngroups = a->n_head / G;
    const int64_t nunits = (int64_t)a->n_tokens * ngroups;
    for (int64_t u = ith; u < nunits; u += nth) {
        const int t = (int)(u / ngroups), h0 = (int)(u % ngroups) * G;
        one_chunk_group(a, t, h0, G, 0, a->n_kv, &w);
        for (int g = 0; g < G; g++) {
            const float S = w.S[g];
            const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
            scale_out(a->dv, w.acc + (size_t)g * a->dv, S_inv,
                      a->out + (int64_t)t * a->out_row + (int64_t)(h0 + g) * a->out_head);
        }
    }
}

/* ---- path C: split-KV decode ---- */

static float *partial_at(const bk_attn_f16_args *a, int nth, int h, int k) {
    float *base = a->scratch + (size_t)nth * per_thread_floats(a->n_head, a->dk, a->dv);
    return base + ((size_t)h * a->oracle_nth + k) * (2 + (size_t)a->dv);
}

static void run_split_partials(const bk_attn_f16_args *a, int ith, int nth) {
    const int onth = a->oracle_nth;
    const int G = group_size(a, onth, nth);
    const oc_ws w = oc_scratch(thread_scratch(a, ith), G, a->dk, a->dv);
    const int64_t chunk = ((int64_t)a->n_kv + onth - 1) / onth;
    const int ngroups = a->n_head / G;
    const int64_t nunits = (int64_t)onth * ngroups;
    for (int64_t u = ith; u < nunits; u += nth) {
        const int k = (int)(u / ngroups), h0 = (int)(u % ngroups) * G;
        const int64_t c0 = k * chunk;
        const int64_t c1 = c0 + chunk < a->n_kv ? c0 + chunk : a->n_kv;
        if (c0 >= a->n_kv) {
            for (int g = 0; g < G; g++) {
                float *p = partial_at(a, nth, h0 + g, k);
                p[0] = -INFINITY;
                p[1] = 0.0f;
            }
            continue;
        }
        one_chunk_group(a, 0, h0, G, c0, c1, &w);
        for (int g = 0; g < G; g++) {
            float *p = partial_at(a, nth, h0 + g, k);
            p[0] = w.M[g];
            p[1] = w.S[g];
            memcpy(p + 2, w.acc + (size_t)g * a->dv, (size_t)a->dv * sizeof(float));
        }
    }
}

static void run_split_reduce(const bk_attn_f16_args *a, int ith, int nth) {
    const int dv = a->dv, onth = a->oracle_nth;
    const int64_t chunk = ((int64_t)a->n_kv + onth - 1) / onth;
    float *acc = thread_scratch(a, ith);
    for (int h = ith; h < a->n_head; h += nth) {
        float M = -INFINITY, S = 0.0f;
        memset(acc, 0, (size_t)dv * sizeof(float));
        for (int k = 0; k < onth; k++) {
            if ((int64_t)k * chunk >= a->n_kv) continue;
            const float *p = partial_at(a, nth, h, k);
            const float Mk = p[0], Sk = p[1];
            if (Sk == 0.0f) continue;
            const float Mn = fmaxf(M, Mk);
            const float so = expf(M - Mn);
            const float sn = expf(Mk - Mn);
            /* contracted by the oracle's compiler as fma(A, so, V*sn) */
            for (int d = 0; d < dv; d++) acc[d] = fmaf(acc[d], so, p[2 + d] * sn);
            S = fmaf(S, so, Sk * sn);
            M = Mn;
        }
        float *dst = a->out + (int64_t)h * a->out_head;
        if (S != 0.0f) {
            scale_out(dv, acc, 1.0f / S, dst);
        } else {
            memcpy(dst, acc, (size_t)dv * sizeof(float));
        }
    }
}

/* ---- path B: tiled ---- */

typedef struct tile_ws {
    float *Q;     /* [TILE_Q][dk] query rows (F32) */
    float *KQ;    /* [TILE_Q][TILE_KV] scores, then probabilities */
    float *VKQ;   /* [TILE_Q][dv] accumulators */
    float *V;     /* [TILE_KV][dv] V tile widened */
    float *K;     /* [dk][TILE_KV] K tile widened and transposed */
    float *S, *M, *tmax; /* [TILE_Q] */
    uint8_t *skip;
} tile_ws;

static tile_ws tile_scratch(const bk_attn_f16_args *a, int ith) {
    const size_t Q = BK_ATTN_TILE_Q, KV = BK_ATTN_TILE_KV;
    float *p = thread_scratch(a, ith);
    tile_ws w;
    w.Q = p;            p += PAD16(Q * a->dk);
    w.KQ = p;           p += PAD16(Q * KV);
    w.VKQ = p;          p += PAD16(Q * a->dv);
    w.V = p;            p += PAD16(KV * a->dv);
    w.K = p;            p += PAD16(KV * a->dk);
    w.S = p;
    w.M = p + Q;
    w.tmax = p + 2 * Q;
    w.skip = (uint8_t *)(p + 3 * Q);
    return w;
}

/* C[i][j] += A[i][k] * B[k][j] over k in order, each element one fma chain C = fma(B, A, C) (simd_gemm's
 * arithmetic; the blocking is free). RM rows x 16 columns per call, RM known at compile time. */
static inline __attribute__((always_inline)) void gemm_6x16(int RM, int K, const float *A, int lda, const float *B,
                                                           int ldb, float *C, int ldc) {
    __m256 c0[6], c1[6];
    for (int i = 0; i < RM; i++) {
        c0[i] = _mm256_loadu_ps(C + (size_t)i * ldc);
        c1[i] = _mm256_loadu_ps(C + (size_t)i * ldc + 8);
    }
    for (int k = 0; k < K; k++) {
        const __m256 b0 = _mm256_loadu_ps(B + (size_t)k * ldb), b1 = _mm256_loadu_ps(B + (size_t)k * ldb + 8);
        for (int i = 0; i < RM; i++) {
            const __m256 av = _mm256_broadcast_ss(A + (size_t)i * lda + k);
            c0[i] = _mm256_fmadd_ps(b0, av, c0[i]);
            c1[i] = _mm256_fmadd_ps(b1, av, c1[i]);
        }
    }
    for (int i = 0; i < RM; i++) {
        _mm256_storeu_ps(C + (size_t)i * ldc, c0[i]);
        _mm256_storeu_ps(C + (size_t)i * ldc + 8, c1[i]);
    }
}

static inline __attribute__((always_inline)) void gemm_6x8(int RM, int K, const float *A, int lda, const float *B,
                                                          int ldb, float *C, int ldc) {
    __m256 c0[6];
    for (int i = 0; i < RM; i++) c0[i] = _mm256_loadu_ps(C + (size_t)i * ldc);
    for (int k = 0; k < K; k++) {
        const __m256 b0 = _mm256_loadu_ps(B + (size_t)k * ldb);
        for (int i = 0; i < RM; i++) c0[i] = _mm256_fmadd_ps(b0, _mm256_broadcast_ss(A + (size_t)i * lda + k), c0[i]);
    }
    for (int i = 0; i < RM; i++) _mm256_storeu_ps(C + (size_t)i * ldc, c0[i]);
}

/* Call KERNEL with its row count RM as a compile-time constant (1..6). */
#define WITH_RM(KERNEL, rm, ...)                       \
    switch (rm) {                                      \
    case 6: KERNEL(6, __VA_ARGS__); break;             \
    case 5: KERNEL(5, __VA_ARGS__); break;             \
    case 4: KERNEL(4, __VA_ARGS__); break;             \
    case 3: KERNEL(3, __VA_ARGS__); break;             \
    case 2: KERNEL(2, __VA_ARGS__); break;             \
    default: KERNEL(1, __VA_ARGS__); break;            \
    }

/* C[M][N] += A[M][K] * B[K][N], N % 8 == 0. Inlined so that each call site's constant sizes and strides
 * reach the kernels. */
static inline __attribute__((always_inline)) void gemm_acc(int M, int N, int K, const float *A, int lda,
                                                           const float *B, int ldb, float *C, int ldc) {
    for (int i = 0; i < M; i += 6) {
        const int rm = M - i < 6 ? M - i : 6;
        const float *Ai = A + (size_t)i * lda;
        float *Ci = C + (size_t)i * ldc;
        int j = 0;
        for (; j + 16 <= N; j += 16) WITH_RM(gemm_6x16, rm, K, Ai, lda, B + j, ldb, Ci + j, ldc)
        for (; j < N; j += 8) WITH_RM(gemm_6x8, rm, K, Ai, lda, B + j, ldb, Ci + j, ldc)
    }
}

/* K tile widened and transposed: K[d][j] = h(k row of cell ic+j)[d], j < kv_tile. */
static void pack_k_tile(const uint16_t *kb, int64_t k_cell, int64_t ic, int kv_tile, int dk, float *K) {
    const int KV = BK_ATTN_TILE_KV;
    int j = 0;
    if ((dk & 7) == 0) {
        for (; j + 8 <= kv_tile; j += 8) {
            for (int d = 0; d < dk; d += 8) {
                __m256 y[8];
                for (int i = 0; i < 8; i++)
                    y[i] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kb + (ic + j + i) * k_cell + d)));
                transpose8(y);
                for (int i = 0; i < 8; i++) _mm256_storeu_ps(K + (size_t)(d + i) * KV + j, y[i]);
            }
        }
    }
    for (; j < kv_tile; j++) {
        const uint16_t *kr = kb + (ic + j) * k_cell;
        for (int d = 0; d < dk; d++) K[(size_t)d * KV + j] = bk_h2f(kr[d]);
    }
}

/* One query tile: rows t0 .. t0+rows-1 of head h, over all KV tiles (ggml `_tiled`). */
static void tiled_tile(const bk_attn_f16_args *a, const tile_ws *w, int h, int t0, int rows) {
    const int Q = BK_ATTN_TILE_Q, KV = BK_ATTN_TILE_KV;
    const int dk = a->dk, dv = a->dv;
    const int hk = h / (a->n_head / a->n_head_kv);
    const uint16_t *kb = a->k + (int64_t)hk * a->k_head;
    const uint16_t *vb = a->v + (int64_t)hk * a->v_head;
    const __m256 vscale = _mm256_set1_ps(a->scale);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);

    for (int r = 0; r < Q; r++) {
        w->S[r] = 0.0f;
        w->M[r] = -INFINITY;
    }
    memset(w->VKQ, 0, (size_t)rows * dv * sizeof(float));
    for (int r = 0; r < rows; r++)
        memcpy(w->Q + (size_t)r * dk, a->q + (int64_t)(t0 + r) * a->q_row + (int64_t)h * a->q_head,
               (size_t)dk * sizeof(float));
    /* the oracle zeroes the K and V tiles once per query tile; a partial last KV tile keeps the rows of
     * the previous processed tile past its end, and they enter the VKQ chains multiplied by 0 */
    memset(w->K, 0, (size_t)dk * KV * sizeof(float));
    memset(w->V, 0, (size_t)KV * dv * sizeof(float));

    for (int64_t ic = 0; ic < a->n_kv; ic += KV) {
        const int kv_tile = (int)(a->n_kv - ic < KV ? a->n_kv - ic : KV);

        /* skipped when every row has the whole tile at -inf (F16 -inf is the one pattern 0xFC00) */
        if (a->mask) {
            int can_skip = 1;
            const __m256i ninf16 = _mm256_set1_epi16((short)0xFC00);
            for (int r = 0; r < rows && can_skip; r++) {
                const uint16_t *mr = a->mask + (int64_t)(t0 + r) * a->mask_row + ic;
                int j = 0;
                for (; j + 16 <= kv_tile; j += 16) {
                    const __m256i m = _mm256_loadu_si256((const __m256i *)(mr + j));
                    if (_mm256_movemask_epi8(_mm256_cmpeq_epi16(m, ninf16)) != -1) {
                        can_skip = 0;
                        break;
                    }
                }
                for (; can_skip && j < kv_tile; j++)
                    if (mr[j] != 0xFC00) can_skip = 0;
            }
            if (can_skip) continue;
        }

        /* KQ = Q K^T: fma chains over d from 0 */
        pack_k_tile(kb, a->k_cell, ic, kv_tile, dk, w->K);
        memset(w->KQ, 0, (size_t)rows * KV * sizeof(float));
        gemm_acc(rows, KV, dk, w->Q, dk, w->K, KV, w->KQ, KV);

        for (int r = 0; r < rows; r++) {
            float *kq = w->KQ + (size_t)r * KV;
            /* ggml_vec_scale_f32, padding to -inf, then ggml_vec_add_f32 of the mask widened */
            if (a->mask) {
                const uint16_t *mr = a->mask + (int64_t)(t0 + r) * a->mask_row + ic;
                int j = 0;
                for (; j + 8 <= kv_tile; j += 8) {
                    const __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(mr + j)));
                    _mm256_storeu_ps(kq + j, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(kq + j), vscale), m));
                }
                for (; j < kv_tile; j++) {
                    const float x = kq[j] * a->scale;
                    kq[j] = x + bk_h2f(mr[j]);
                }
                for (; j < KV; j++) kq[j] = -INFINITY; /* -inf + -inf (the padded mask) */
            } else {
                for (int j = 0; j < KV; j += 8)
                    _mm256_storeu_ps(kq + j, _mm256_mul_ps(_mm256_loadu_ps(kq + j), vscale));
                for (int j = kv_tile; j < KV; j++) kq[j] = -INFINITY;
            }

            /* the row max, ggml_vec_max_f32's ternary chain; lane-wise when no NaN is present (then only the
             * sign of a zero maximum could differ, and that never reaches a result) */
            __m256 mx = ninf, nan = _mm256_setzero_ps();
            for (int j = 0; j < KV; j += 8) {
                const __m256 x = _mm256_loadu_ps(kq + j);
                mx = _mm256_max_ps(mx, x);
                nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
            }
            float tmax;
            if (_mm256_movemask_ps(nan)) {
                tmax = -INFINITY;
                for (int j = 0; j < KV; j++) tmax = tmax > kq[j] ? tmax : kq[j];
            } else {
                float l[8];
                _mm256_storeu_ps(l, mx);
                tmax = l[0];
                for (int i = 1; i < 8; i++) tmax = tmax > l[i] ? tmax : l[i];
            }
            if (tmax == -INFINITY) {
                w->skip[r] = 1;
                continue;
            }
            w->skip[r] = 0;
            const float Mold = w->M[r];
            const float Mnew = fmaxf(Mold, tmax);
            if (Mnew > Mold) {
                const float ms = expf(Mold - Mnew);
                scale_out(dv, w->VKQ + (size_t)r * dv, ms, w->VKQ + (size_t)r * dv);
                w->S[r] *= ms;
            }
            w->M[r] = Mnew;
            /* ggml_vec_soft_max_f32: P = v_expf(KQ - M), sum of 8-lane sums in double */
            const __m256 vm = _mm256_set1_ps(Mnew);
            double sum = 0.0;
            for (int j = 0; j < KV; j += 8) {
                const __m256 p = bk_v_expf(_mm256_sub_ps(_mm256_loadu_ps(kq + j), vm));
                _mm256_storeu_ps(kq + j, p);
                sum += (double)hsum8_softmax(p);
            }
            w->S[r] = (float)((double)w->S[r] + sum);
        }

        /* VKQ += P V: fma chains over the 64 cells in order, the masked ones and the padding included */
        for (int j = 0; j < kv_tile; j++) widen_row(vb + (ic + j) * a->v_cell, w->V + (size_t)j * dv, dv);
        for (int r = 0; r < rows; r++)
            if (w->skip[r]) memset(w->KQ + (size_t)r * KV, 0, KV * sizeof(float));
        gemm_acc(rows, dv, KV, w->KQ, KV, w->V, dv, w->VKQ, dv);
    }

    for (int r = 0; r < rows; r++) {
        const float S_inv = w->S[r] == 0.0f ? 0.0f : 1.0f / w->S[r];
        scale_out(dv, w->VKQ + (size_t)r * dv, S_inv,
                  a->out + (int64_t)(t0 + r) * a->out_row + (int64_t)h * a->out_head);
    }
}

/* The oracle's row chunks (ggml_compute_forward_flash_attn_ext_f16, non-split branch) and the query tiles
 * cut from them; tile number n goes to thread n % nth. */
static void run_tiled(const bk_attn_f16_args *a, int ith, int nth) {
    const tile_ws w = tile_scratch(a, ith);
    const int64_t N = a->n_tokens;
    /* this call's rows [lo, hi) of ggml's N * n_head * streams: a stream starts on a head boundary, and no tile
     * crosses one, so the tiles met inside [lo, hi) are the oracle's */
    const int64_t n_str = a->multi_stream && a->n_stream > 1 ? a->n_stream : 1;
    const int64_t lo = n_str > 1 ? (int64_t)a->stream * N * a->n_head : 0, hi = lo + N * a->n_head;
    const int64_t nr = N * a->n_head * n_str;
    const int onth = a->oracle_nth;
    const int64_t nth_scaled = (int64_t)onth * 4;
    const int64_t chunk_size = (nr + nth_scaled - 1) / nth_scaled;
    int64_t nchunk = (nr + chunk_size - 1) / chunk_size;
    if (onth == 1 || nchunk < onth) nchunk = onth;
    const int64_t dr = (nr + nchunk - 1) / nchunk;

    int64_t tile_no = 0;
    for (int64_t ch = 0; ch < nchunk; ch++) {
        const int64_t ir0 = dr * ch < lo ? lo : dr * ch;
        const int64_t ir1 = dr * ch + dr < hi ? dr * ch + dr : hi;
        int64_t ir = ir0;
        while (ir < ir1) {
            const int64_t h = (ir - lo) / N, t = ir % N;
            int64_t rows = BK_ATTN_TILE_Q;
            if (ir1 - ir < rows) rows = ir1 - ir;
            if (N - t < rows) rows = N - t;
            if (tile_no % nth == ith) tiled_tile(a, &w, (int)h, (int)t, (int)rows);
            tile_no++;
            ir += rows;
        }
    }
}

/* ---- entry points ---- */

void bk_attn_f16(const bk_attn_f16_args *a, int ith, int nth) {
    switch (bk_attn_f16_path_streams(a->n_tokens, a->n_kv, a->dv, a->multi_stream)) {
    case BK_ATTN_SPLIT_KV: run_split_partials(a, ith, nth); break;
    case BK_ATTN_TILED: run_tiled(a, ith, nth); break;
    default: run_one_chunk(a, ith, nth); break;
    }
}

void bk_attn_f16_reduce(const bk_attn_f16_args *a, int ith, int nth) {
    if (bk_attn_f16_path_streams(a->n_tokens, a->n_kv, a->dv, a->multi_stream) == BK_ATTN_SPLIT_KV) run_split_reduce(a, ith, nth);
}

void bk_attn_f16_serial(const bk_attn_f16_args *a) {
    bk_attn_f16(a, 0, 1);
    bk_attn_f16_reduce(a, 0, 1);
}
