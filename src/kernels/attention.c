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

#include "fp16.h"

#define PAD16(n) (((n) + 15) & ~(size_t)15)

/* ---- vector helpers (the AVX2 mappings of ggml's simd-mappings.h) ---- */

static inline __m256 load_h8(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* Round 8 floats to F16 and back: what storing to an F16 buffer and loading it again gives. */
static inline __m256 round_h8(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, 0)); }

static inline float round_h1(float x) { return bk_h2f(bk_f2h(x)); }

/* ggml_vec_dot_f16 with the second operand already widened (its values are F16, so widening is exact):
 * four 8-lane accumulators over 32-element steps, acc_j = fma(x, y, acc_j); then ((a0+a2)+(a1+a3)), lanes
 * l + l+4, then (t0+t1)+(t2+t3); the tail (n % 32) is added in double, and the result rounded to float. */
static inline float dot_f16_f32(int n, const uint16_t *x, const float *y) {
    const int np = n & ~31;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    for (int i = 0; i < np; i += 32) {
        s0 = _mm256_fmadd_ps(load_h8(x + i), _mm256_loadu_ps(y + i), s0);
        s1 = _mm256_fmadd_ps(load_h8(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
        s2 = _mm256_fmadd_ps(load_h8(x + i + 16), _mm256_loadu_ps(y + i + 16), s2);
        s3 = _mm256_fmadd_ps(load_h8(x + i + 24), _mm256_loadu_ps(y + i + 24), s3);
    }
    s0 = _mm256_add_ps(s0, s2);
    s1 = _mm256_add_ps(s1, s3);
    s0 = _mm256_add_ps(s0, s1);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    double sum = (double)_mm_cvtss_f32(_mm_hadd_ps(t1, t1));
    for (int i = np; i < n; i++) sum += (double)(bk_h2f(x[i]) * y[i]);
    return (float)sum;
}

/* ggml_v_expf (vec.h, AVX2+FMA). */
static inline __m256 v_expf(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(_mm256_set1_ps(1))));
    const __m256i c = _mm256_castps_si256(
        _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), n), _mm256_set1_ps(126), _CMP_GT_OQ));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    if (!_mm256_movemask_ps(_mm256_castsi256_ps(c))) return _mm256_fmadd_ps(j, k, k);
    const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                       _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256i d = _mm256_castps_si256(
        _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.f), n), _mm256_set1_ps(192), _CMP_GT_OQ));
    return _mm256_or_ps(
        _mm256_and_ps(_mm256_castsi256_ps(d), _mm256_mul_ps(s1, s1)),
        _mm256_andnot_ps(_mm256_castsi256_ps(d),
                         _mm256_or_ps(_mm256_and_ps(_mm256_castsi256_ps(c), _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1)),
                                      _mm256_andnot_ps(_mm256_castsi256_ps(c), _mm256_fmadd_ps(k, j, k)))));
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

/* Per-thread scratch, in floats. Tiled: Q tile, KQ, mask, VKQ, V tile, K tile (transposed), tile M/S/skip.
 * One-chunk: Q widened from F16, the accumulator (as floats holding F16 values), a reduction row. */
static size_t tiled_floats(int32_t dk, int32_t dv) {
    const size_t Q = BK_ATTN_TILE_Q, KV = BK_ATTN_TILE_KV;
    return PAD16(Q * dk) + PAD16(Q * KV) + PAD16(Q * KV) + PAD16(Q * dv) + PAD16(KV * dv) + PAD16(KV * dk) +
           PAD16(3 * Q);
}

static size_t onechunk_floats(int32_t dk, int32_t dv) { return PAD16(dk) + PAD16(dk) + PAD16(dv) + PAD16(dv); }

static size_t per_thread_floats(int32_t dk, int32_t dv) {
    size_t a = tiled_floats(dk, dv), b = onechunk_floats(dk, dv);
    return a > b ? a : b;
}

size_t bk_attn_f16_scratch_floats(int32_t n_head, int32_t dk, int32_t dv, int32_t oracle_nth, int32_t nth) {
    return (size_t)nth * per_thread_floats(dk, dv) + (size_t)n_head * oracle_nth * (2 + (size_t)dv);
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

/* ---- path A: one query row of one head over cells [c0, c1) ---- */

/* The one-chunk recurrence. qf: dk floats of scratch, acc: dv floats of scratch. On return acc holds the
 * F16 accumulator's values (widened), *Mp and *Sp the running max and sum. */
static void one_chunk_row(const bk_attn_f16_args *a, int t, int h, int64_t c0, int64_t c1, float *qf, uint16_t *qh,
                          float *acc, float *Mp, float *Sp) {
    const int dk = a->dk, dv = a->dv;
    const int hk = h / (a->n_head / a->n_head_kv);
    const uint16_t *kb = a->k + (int64_t)hk * a->k_head;
    const uint16_t *vb = a->v + (int64_t)hk * a->v_head;
    const uint16_t *mp = a->mask ? a->mask + (int64_t)t * a->mask_row : NULL;
    const float scale = a->scale;

    /* Q rounded to F16 (ggml_cpu_fp32_to_fp16), kept widened for the dot products */
    bk_fp32_to_fp16_row(a->q + (int64_t)t * a->q_row + (int64_t)h * a->q_head, qh, dk);
    bk_fp16_to_fp32_row(qh, qf, dk);
    memset(acc, 0, (size_t)dv * sizeof(float));

    const int dv8 = dv & ~7;
    float S = 0.0f, M = -INFINITY;
    for (int64_t c = c0; c < c1; c++) {
        const float mv = mp ? bk_h2f(mp[c]) : 0.0f;
        if (mv == -INFINITY) continue;
        float s = dot_f16_f32(dk, kb + c * a->k_cell, qf);
        s = s * scale;
        s = s + mv;
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            const float Mold = M;
            M = s;
            ms = expf(Mold - M);
            /* ggml_vec_scale_f16: acc = f16(acc * ms) */
            const __m256 vms = _mm256_set1_ps(ms);
            int d = 0;
            for (; d < dv8; d += 8) _mm256_storeu_ps(acc + d, round_h8(_mm256_mul_ps(_mm256_loadu_ps(acc + d), vms)));
            for (; d < dv; d++) acc[d] = round_h1(acc[d] * ms);
        } else {
            vs = expf(s - M);
        }
        /* ggml_vec_mad_f16: acc = f16(fma(v, vs, acc)) */
        const uint16_t *vr = vb + c * a->v_cell;
        const __m256 vvs = _mm256_set1_ps(vs);
        int d = 0;
        for (; d < dv8; d += 8)
            _mm256_storeu_ps(acc + d, round_h8(_mm256_fmadd_ps(load_h8(vr + d), vvs, _mm256_loadu_ps(acc + d))));
        for (; d < dv; d++) acc[d] = round_h1(fmaf(bk_h2f(vr[d]), vs, acc[d]));
        S = fmaf(S, ms, vs);
    }
    *Mp = M;
    *Sp = S;
}

/* ggml_vec_scale_f32 into the output row. */
static void scale_out(int dv, const float *src, float s, float *dst) {
    const __m256 vs = _mm256_set1_ps(s);
    int d = 0;
    for (; d + 8 <= dv; d += 8) _mm256_storeu_ps(dst + d, _mm256_mul_ps(_mm256_loadu_ps(src + d), vs));
    for (; d < dv; d++) dst[d] = src[d] * s;
}

static float *thread_scratch(const bk_attn_f16_args *a, int ith) {
    return a->scratch + (size_t)ith * per_thread_floats(a->dk, a->dv);
}

static void run_one_chunk(const bk_attn_f16_args *a, int ith, int nth) {
    float *ws = thread_scratch(a, ith);
    float *qf = ws;
    uint16_t *qh = (uint16_t *)(ws + PAD16(a->dk));
    float *acc = ws + 2 * PAD16(a->dk);
    const int64_t nunits = (int64_t)a->n_tokens * a->n_head;
    for (int64_t u = ith; u < nunits; u += nth) {
        const int t = (int)(u / a->n_head), h = (int)(u % a->n_head);
        float M, S;
        one_chunk_row(a, t, h, 0, a->n_kv, qf, qh, acc, &M, &S);
        const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
        scale_out(a->dv, acc, S_inv, a->out + (int64_t)t * a->out_row + (int64_t)h * a->out_head);
    }
}

/* ---- path C: split-KV decode ---- */

static float *partial_at(const bk_attn_f16_args *a, int nth, int h, int k) {
    float *base = a->scratch + (size_t)nth * per_thread_floats(a->dk, a->dv);
    return base + ((size_t)h * a->oracle_nth + k) * (2 + (size_t)a->dv);
}

static void run_split_partials(const bk_attn_f16_args *a, int ith, int nth) {
    float *ws = thread_scratch(a, ith);
    float *qf = ws;
    uint16_t *qh = (uint16_t *)(ws + PAD16(a->dk));
    float *acc = ws + 2 * PAD16(a->dk);
    const int onth = a->oracle_nth;
    const int64_t chunk = ((int64_t)a->n_kv + onth - 1) / onth;
    const int64_t nunits = (int64_t)onth * a->n_head;
    for (int64_t u = ith; u < nunits; u += nth) {
        const int k = (int)(u / a->n_head), h = (int)(u % a->n_head);
        float *p = partial_at(a, nth, h, k);
        const int64_t c0 = k * chunk;
        const int64_t c1 = c0 + chunk < a->n_kv ? c0 + chunk : a->n_kv;
        if (c0 >= a->n_kv) {
            p[0] = -INFINITY;
            p[1] = 0.0f;
            continue;
        }
        one_chunk_row(a, 0, h, c0, c1, qf, qh, p + 2, &p[0], &p[1]);
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
    float *mask;  /* [TILE_Q][TILE_KV] */
    float *VKQ;   /* [TILE_Q][dv] accumulators */
    float *V;     /* [TILE_KV][dv] V tile widened */
    float *K;     /* [dk][TILE_KV] K tile widened and transposed */
    float *S, *M; /* [TILE_Q] */
    uint8_t *skip;
} tile_ws;

static tile_ws tile_scratch(const bk_attn_f16_args *a, int ith) {
    const size_t Q = BK_ATTN_TILE_Q, KV = BK_ATTN_TILE_KV;
    float *p = thread_scratch(a, ith);
    tile_ws w;
    w.Q = p;            p += PAD16(Q * a->dk);
    w.KQ = p;           p += PAD16(Q * KV);
    w.mask = p;         p += PAD16(Q * KV);
    w.VKQ = p;          p += PAD16(Q * a->dv);
    w.V = p;            p += PAD16(KV * a->dv);
    w.K = p;            p += PAD16(KV * a->dk);
    w.S = p;
    w.M = p + Q;
    w.skip = (uint8_t *)(p + 2 * Q);
    return w;
}

/* KQ[r][0..64) = fma chain over d of K[d][j] * Q[r][d] from 0 (simd_gemm, C zeroed), rows r < rows. */
static void tile_kq(const tile_ws *w, int rows, int dk) {
    const int KV = BK_ATTN_TILE_KV;
    int r = 0;
    for (; r + 2 <= rows; r += 2) {
        const float *q0 = w->Q + (size_t)r * dk, *q1 = q0 + dk;
        __m256 a0[8], a1[8];
        for (int j = 0; j < 8; j++) a0[j] = a1[j] = _mm256_setzero_ps();
        for (int d = 0; d < dk; d++) {
            const float *kr = w->K + (size_t)d * KV;
            const __m256 x0 = _mm256_set1_ps(q0[d]), x1 = _mm256_set1_ps(q1[d]);
            for (int j = 0; j < 8; j++) {
                const __m256 kv = _mm256_loadu_ps(kr + 8 * j);
                a0[j] = _mm256_fmadd_ps(kv, x0, a0[j]);
                a1[j] = _mm256_fmadd_ps(kv, x1, a1[j]);
            }
        }
        for (int j = 0; j < 8; j++) {
            _mm256_storeu_ps(w->KQ + (size_t)r * KV + 8 * j, a0[j]);
            _mm256_storeu_ps(w->KQ + (size_t)(r + 1) * KV + 8 * j, a1[j]);
        }
    }
    for (; r < rows; r++) {
        const float *q0 = w->Q + (size_t)r * dk;
        __m256 a0[8];
        for (int j = 0; j < 8; j++) a0[j] = _mm256_setzero_ps();
        for (int d = 0; d < dk; d++) {
            const float *kr = w->K + (size_t)d * KV;
            const __m256 x0 = _mm256_set1_ps(q0[d]);
            for (int j = 0; j < 8; j++) a0[j] = _mm256_fmadd_ps(_mm256_loadu_ps(kr + 8 * j), x0, a0[j]);
        }
        for (int j = 0; j < 8; j++) _mm256_storeu_ps(w->KQ + (size_t)r * KV + 8 * j, a0[j]);
    }
}

/* VKQ[r][d] = fma chain over the 64 cells j of V[j][d] * P[r][j], from VKQ[r][d] (simd_gemm), rows r < rows. */
static void tile_vkq(const tile_ws *w, int rows, int dv) {
    const int KV = BK_ATTN_TILE_KV;
    for (int r = 0; r < rows; r++) {
        const float *p = w->KQ + (size_t)r * KV;
        float *o = w->VKQ + (size_t)r * dv;
        int d = 0;
        for (; d + 32 <= dv; d += 32) {
            __m256 a0 = _mm256_loadu_ps(o + d), a1 = _mm256_loadu_ps(o + d + 8);
            __m256 a2 = _mm256_loadu_ps(o + d + 16), a3 = _mm256_loadu_ps(o + d + 24);
            for (int j = 0; j < KV; j++) {
                const float *vr = w->V + (size_t)j * dv + d;
                const __m256 pj = _mm256_set1_ps(p[j]);
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(vr), pj, a0);
                a1 = _mm256_fmadd_ps(_mm256_loadu_ps(vr + 8), pj, a1);
                a2 = _mm256_fmadd_ps(_mm256_loadu_ps(vr + 16), pj, a2);
                a3 = _mm256_fmadd_ps(_mm256_loadu_ps(vr + 24), pj, a3);
            }
            _mm256_storeu_ps(o + d, a0);
            _mm256_storeu_ps(o + d + 8, a1);
            _mm256_storeu_ps(o + d + 16, a2);
            _mm256_storeu_ps(o + d + 24, a3);
        }
        for (; d < dv; d += 8) {
            __m256 a0 = _mm256_loadu_ps(o + d);
            for (int j = 0; j < KV; j++)
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w->V + (size_t)j * dv + d), _mm256_set1_ps(p[j]), a0);
            _mm256_storeu_ps(o + d, a0);
        }
    }
}

/* One query tile: rows ir .. ir+rows-1 of head h (token t0 .. t0+rows-1), over all KV tiles. */
static void tiled_tile(const bk_attn_f16_args *a, const tile_ws *w, int h, int t0, int rows) {
    const int Q = BK_ATTN_TILE_Q, KV = BK_ATTN_TILE_KV;
    const int dk = a->dk, dv = a->dv;
    const int hk = h / (a->n_head / a->n_head_kv);
    const uint16_t *kb = a->k + (int64_t)hk * a->k_head;
    const uint16_t *vb = a->v + (int64_t)hk * a->v_head;
    const __m256 vscale = _mm256_set1_ps(a->scale);

    for (int r = 0; r < Q; r++) {
        w->S[r] = 0.0f;
        w->M[r] = -INFINITY;
    }
    memset(w->VKQ, 0, (size_t)Q * dv * sizeof(float));
    for (int r = 0; r < rows; r++)
        memcpy(w->Q + (size_t)r * dk, a->q + (int64_t)(t0 + r) * a->q_row + (int64_t)h * a->q_head,
               (size_t)dk * sizeof(float));
    /* the oracle zeroes the K and V tiles once per query tile; a partial last KV tile keeps the rows of
     * the previous processed tile past its end, and they enter the VKQ chain multiplied by 0 */
    memset(w->K, 0, (size_t)dk * KV * sizeof(float));
    memset(w->V, 0, (size_t)KV * dv * sizeof(float));

    for (int64_t ic = 0; ic < a->n_kv; ic += KV) {
        const int kv_tile = (int)(a->n_kv - ic < KV ? a->n_kv - ic : KV);

        if (a->mask) {
            int can_skip = 1;
            for (int r = 0; r < rows; r++) {
                const uint16_t *mr = a->mask + (int64_t)(t0 + r) * a->mask_row + ic;
                float *m32 = w->mask + (size_t)r * KV;
                for (int j = 0; j < kv_tile; j++) {
                    m32[j] = bk_h2f(mr[j]);
                    if (m32[j] != -INFINITY) can_skip = 0;
                }
                for (int j = kv_tile; j < KV; j++) m32[j] = -INFINITY;
            }
            if (can_skip) continue;
        }

        for (int j = 0; j < kv_tile; j++) {
            const uint16_t *kr = kb + (ic + j) * a->k_cell;
            for (int d = 0; d < dk; d++) w->K[(size_t)d * KV + j] = bk_h2f(kr[d]);
        }
        tile_kq(w, rows, dk);

        for (int r = 0; r < rows; r++) {
            float *kq = w->KQ + (size_t)r * KV;
            const float *m32 = w->mask + (size_t)r * KV;
            /* ggml_vec_scale_f32, padding to -inf, then ggml_vec_add_f32 of the mask */
            for (int j = 0; j < KV; j += 8) _mm256_storeu_ps(kq + j, _mm256_mul_ps(_mm256_loadu_ps(kq + j), vscale));
            for (int j = kv_tile; j < KV; j++) kq[j] = -INFINITY;
            if (a->mask)
                for (int j = 0; j < KV; j += 8)
                    _mm256_storeu_ps(kq + j, _mm256_add_ps(_mm256_loadu_ps(kq + j), _mm256_loadu_ps(m32 + j)));

            float tmax = -INFINITY;
            for (int j = 0; j < KV; j++) tmax = tmax > kq[j] ? tmax : kq[j];
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
                const __m256 p = v_expf(_mm256_sub_ps(_mm256_loadu_ps(kq + j), vm));
                _mm256_storeu_ps(kq + j, p);
                sum += (double)hsum8_softmax(p);
            }
            w->S[r] = (float)((double)w->S[r] + sum);
        }

        for (int j = 0; j < kv_tile; j++) bk_fp16_to_fp32_row(vb + (ic + j) * a->v_cell, w->V + (size_t)j * dv, dv);
        for (int r = 0; r < rows; r++)
            if (w->skip[r]) memset(w->KQ + (size_t)r * KV, 0, KV * sizeof(float));
        tile_vkq(w, rows, dv);
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
    const int64_t nr = N * a->n_head;
    const int onth = a->oracle_nth;
    const int64_t nth_scaled = (int64_t)onth * 4;
    const int64_t chunk_size = (nr + nth_scaled - 1) / nth_scaled;
    int64_t nchunk = (nr + chunk_size - 1) / chunk_size;
    if (onth == 1 || nchunk < onth) nchunk = onth;
    const int64_t dr = (nr + nchunk - 1) / nchunk;

    int64_t tile_no = 0;
    for (int64_t ch = 0; ch < nchunk; ch++) {
        const int64_t ir0 = dr * ch;
        const int64_t ir1 = ir0 + dr < nr ? ir0 + dr : nr;
        int64_t ir = ir0;
        while (ir < ir1) {
            const int64_t h = ir / N, t = ir % N;
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
    switch (bk_attn_f16_path(a->n_tokens, a->n_kv, a->dv)) {
    case BK_ATTN_SPLIT_KV: run_split_partials(a, ith, nth); break;
    case BK_ATTN_TILED: run_tiled(a, ith, nth); break;
    default: run_one_chunk(a, ith, nth); break;
    }
}

void bk_attn_f16_reduce(const bk_attn_f16_args *a, int ith, int nth) {
    if (bk_attn_f16_path(a->n_tokens, a->n_kv, a->dv) == BK_ATTN_SPLIT_KV) run_split_reduce(a, ith, nth);
}

void bk_attn_f16_serial(const bk_attn_f16_args *a) {
    bk_attn_f16(a, 0, 1);
    bk_attn_f16_reduce(a, 0, 1);
}
