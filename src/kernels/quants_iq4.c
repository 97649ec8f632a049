/* IQ4_NL and IQ4_XS (quants_iq4.h): encoders, decoders and the MUL_MAT kernels llama-server b11192 runs for them.
 * Read from ggml/src/ggml-quants.c (quantize_row_iq4_nl_impl, dequantize_row_iq4_*), ggml-cpu's
 * arch/x86/quants.c, arch/x86/repack.cpp and llamafile/sgemm.cpp; written here in this project's words. The
 * encoders' float steps keep ggml-base's order (no FMA: BANKML_FP_FLAGS); the kernels' integer sums are exact,
 * so only their float steps need ggml's order, which the header spells out. */
#include "quants_iq4.h"
#include "encode.h"
#include "fp16.h"
#include "kquants.h"
#include "quants.h"
#include "repack.h"
#include "simd_common.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

static const int8_t K[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* ---------------------------------------------------------------- encoding */

/* The index of the level nearest v: bisection over K, a tie taking the upper level; NaN ends on the top one. */
static int nearest_level(float v) {
    if (v <= K[0]) return 0;
    if (v >= K[15]) return 15;
    int lo = 0, hi = 15;                /* K[lo] <= v < K[hi] */
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < K[mid]) hi = mid;
        else lo = mid;
    }
    return v - K[lo] < K[hi] - v ? lo : hi;
}

/* The weighted fit of one level choice: the levels nearest fl(x * inv), and Sqx, Sqq with w = x * x. */
static void fit(const float *x, float inv, uint8_t *L, float *sqx, float *sqq) {
    float a = 0.0f, b = 0.0f;
    for (int j = 0; j < 32; j++) {
        const int l = nearest_level(inv * x[j]);
        if (L) L[j] = (uint8_t)l;
        const float q = (float)K[l], w = x[j] * x[j];
        a += w * q * x[j];
        b += w * q * q;
    }
    *sqx = a;
    *sqq = b;
}

/* The scale of one 32-element block (0 for a block under 1e-15), before rounding to a half. */
static float block_scale(const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) { amax = fabsf(x[j]); max = x[j]; }
    if (amax < 1e-15f) return 0.0f;
    const float d0 = -max / (float)K[0];
    float sqx, sqq;
    fit(x, 1.0f / d0, NULL, &sqx, &sqq);
    float d = sqq > 0 ? sqx / sqq : 0.0f, best = d * sqx;
    for (int t = -7; t <= 7; t++) {
        fit(x, (float)(t + K[0]) / max, NULL, &sqx, &sqq);
        if (sqq > 0 && sqx * sqx > best * sqq) {
            d = sqx / sqq;
            best = d * sqx;
        }
    }
    return d;
}

/* The 32 levels of x for the scale d (inverse 0 when d is 0), packed two a byte: element i low, i + 16 high. */
static void put_levels(const float *x, float d, uint8_t *qs) {
    uint8_t L[32];
    const float inv = d ? 1.0f / d : 0.0f;
    for (int j = 0; j < 32; j++) L[j] = (uint8_t)nearest_level(inv * x[j]);
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
}

void bk_iq4_encode_nl(const float *x, uint8_t *out) {
    bk_block_iq4_nl b;
    const float d = block_scale(x);
    b.d = bk_encode_to_half(d);
    put_levels(x, d, b.qs);
    memcpy(out, &b, sizeof b);
}

/* round half to even through the 1.5 * 2^23 trick (ggml-quants.c nearest_int), as encode.c */
static inline int round_even(float v) {
    const float t = v + 12582912.f;
    uint32_t u;
    memcpy(&u, &t, 4);
    return (int)(u & 0x7fffffu) - 0x400000;
}

void bk_iq4_encode_xs(const float *x, uint8_t *out) {
    bk_block_iq4_xs b;
    float s[8], top = 0.0f, atop = 0.0f;
    for (int i = 0; i < 8; i++) {
        s[i] = block_scale(x + 32 * i);
        if (fabsf(s[i]) > atop) { atop = fabsf(s[i]); top = s[i]; }
    }
    const float D = -top / 32;
    b.d = bk_encode_to_half(D);
    b.scales_h = 0;
    memset(b.scales_l, 0, sizeof b.scales_l);
    const float inv = D ? 1.0f / D : 0.0f;
    for (int i = 0; i < 8; i++) {
        int l = round_even(inv * s[i]);
        l = l < -32 ? -32 : l > 31 ? 31 : l;
        put_levels(x + 32 * i, D * (float)l, b.qs + 16 * i);
        l += 32;
        b.scales_l[i / 2] |= (uint8_t)((l & 15) << (4 * (i % 2)));
        b.scales_h |= (uint16_t)((l >> 4) << (2 * i));
    }
    memcpy(out, &b, sizeof b);
}

/* ---------------------------------------------------------------- decoding */

static void dequant32(const uint8_t *qs, float d, float *y) {
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)K[qs[j] & 15];
        y[j + 16] = d * (float)K[qs[j] >> 4];
    }
}

void bk_dequant_row_iq4_nl(const void *vx, float *y, int64_t k) {
    const bk_block_iq4_nl *x = (const bk_block_iq4_nl *)vx;
    for (int64_t i = 0; i < k / 32; i++) dequant32(x[i].qs, bk_h2f(x[i].d), y + 32 * i);
}

static inline int xs_scale(const bk_block_iq4_xs *b, int s) {
    return (((b->scales_l[s / 2] >> (4 * (s % 2))) & 15) | (((b->scales_h >> (2 * s)) & 3) << 4)) - 32;
}

void bk_dequant_row_iq4_xs(const void *vx, float *y, int64_t k) {
    const bk_block_iq4_xs *x = (const bk_block_iq4_xs *)vx;
    for (int64_t i = 0; i < k / 256; i++) {
        const float d = bk_h2f(x[i].d);
        for (int s = 0; s < 8; s++) dequant32(x[i].qs + 16 * s, d * (float)xs_scale(x + i, s), y + 256 * i + 32 * s);
    }
}

/* ---------------------------------------------------------------- dot products */

/* 32 nibbles (element order, as bk_unpack_nibbles) mapped through K to signed bytes */
static inline __m256i levels32(const uint8_t *qs) {
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)K));
    return _mm256_shuffle_epi8(lut, bk_unpack_nibbles(qs));
}

/* eight int32 lanes, lane j = the exact sum of a[4j..4j+3] * b[4j..4j+3], both signed (|a| <= 127, |b| <= 127) */
static inline __m256i dot4_ss(__m256i a, __m256i b) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a)),
                             _mm256_set1_epi16(1));
}

/* block i's eight lanes, fma'd into acc with fl(h(x.d) * h(y.d)) */
static inline __m256 nl_block(const bk_block_iq4_nl *x, const bk_block_q8_0 *y, __m256 acc) {
    const __m256 dd = _mm256_set1_ps(bk_h2f(x->d) * bk_h2f(y->d));
    const __m256i I = dot4_ss(levels32(x->qs), _mm256_loadu_si256((const __m256i *)y->qs));
    return _mm256_fmadd_ps(dd, _mm256_cvtepi32_ps(I), acc);
}

float bk_dot_iq4_nl_q8_0_tb(int n, const void *vx, const void *vy) {
    const bk_block_iq4_nl *x = (const bk_block_iq4_nl *)vx;
    const bk_block_q8_0 *y = (const bk_block_q8_0 *)vy;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / 32; i++) acc = nl_block(x + i, y + i, acc);
    return bk_hsum8(acc);
}

float bk_dot_iq4_nl_q8_0(int n, const void *vx, const void *vy) {
    const bk_block_iq4_nl *x = (const bk_block_iq4_nl *)vx;
    const bk_block_q8_0 *y = (const bk_block_q8_0 *)vy;
    const int nb = n / 32;
    __m256 even = _mm256_setzero_ps(), odd = even;
    int i = 0;
    for (; i + 1 < nb; i += 2) {
        even = nl_block(x + i, y + i, even);
        odd = nl_block(x + i + 1, y + i + 1, odd);
    }
    float s = bk_hsum8(_mm256_add_ps(even, odd));
    if (i < nb) {  /* the last block of an odd count, in scalar C */
        int sum = 0;
        for (int j = 0; j < 16; j++)
            sum += y[i].qs[j] * K[x[i].qs[j] & 15] + y[i].qs[j + 16] * K[x[i].qs[j] >> 4];
        s = fmaf(bk_h2f(y[i].d) * bk_h2f(x[i].d), (float)sum, s);
    }
    return s;
}

/* one super-block's eight int32 lanes: lane j = sum over the sub-blocks of (ls - 32) * (its elements 4j..4j+3) */
static inline __m256i xs_lanes(const bk_block_iq4_xs *x, const bk_block_q8_K *y) {
    __m256i I = _mm256_setzero_si256();
    for (int s = 0; s < 8; s++) {
        const __m256i ys = _mm256_loadu_si256((const __m256i *)(y->qs + 32 * s));
        const __m256i p = dot4_ss(levels32(x->qs + 16 * s), ys);
        I = _mm256_add_epi32(I, _mm256_mullo_epi32(p, _mm256_set1_epi32(xs_scale(x, s))));
    }
    return I;
}

float bk_dot_iq4_xs_q8_K(int n, const void *vx, const void *vy) {
    const bk_block_iq4_xs *x = (const bk_block_iq4_xs *)vx;
    const bk_block_q8_K *y = (const bk_block_q8_K *)vy;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / 256; i++)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x[i].d) * y[i].d), _mm256_cvtepi32_ps(xs_lanes(x + i, y + i)), acc);
    return bk_hsum8(acc);
}

float bk_dot_iq4_xs_q8_K_panel(int n, const void *vx, const void *vy) {
    const bk_block_iq4_xs *x = (const bk_block_iq4_xs *)vx;
    const bk_block_q8_K *y = (const bk_block_q8_K *)vy;
    float acc = 0.0f;
    for (int i = 0; i < n / 256; i++) {
        int32_t lane[8], I = 0;
        _mm256_storeu_si256((__m256i *)lane, xs_lanes(x + i, y + i));
        for (int j = 0; j < 8; j++) I += lane[j];  /* exact: the order of an integer sum does not matter */
        acc = fmaf((float)I, bk_h2f(x[i].d) * y[i].d, acc);
    }
    return acc;
}

/* ---------------------------------------------------------------- iq4_nl_8x8 */

int bk_repack_iq4_nl_takes(int64_t m, int32_t k) { return bk_repack_q4_0_takes(m, k); }

int bk_repack_iq4_nl_8x8(const void *src, void *dst, int64_t m, int32_t k, int ith, int nth) {
    return bk_repack_b32_8x8(src, dst, m, k, 0, ith, nth);
}

/* two int32 per row (rows 0..3 in a, 4..7 in b, lanes [r0 r0 r1 r1 | r2 r2 r3 r3]) -> one per row, in order */
static inline __m256i per_row(__m256i a, __m256i b) {
    return _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(a, b), _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7));
}

static inline __m256i bcast8(const int8_t *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return _mm256_set1_epi64x(v);
}

/* C <= 4 activation columns against one repacked 8-row group (bk_block_q4_0x8 layout: qs[64h + 8j + e] = row
 * j's byte 8h + e). */
static void nl8_tile(int C, int nb, const bk_block_q4_0x8 *x, const uint8_t *act, size_t act_col, float *out,
                     int64_t out_col) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)K));
    __m256 A[4];
    for (int c = 0; c < C; c++) A[c] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        /* q[4h + 2s + v]: the signed levels of the low (s = 0) or high (s = 1) nibbles of bytes 8h..8h+7 of rows
         * 0-3 (v = 0) or 4-7 (v = 1) */
        __m256i q[8];
        for (int i = 0; i < 8; i++) {
            const __m256i raw = _mm256_loadu_si256((const __m256i *)(x[b].qs + 64 * (i / 4) + 32 * (i % 2)));
            q[i] = _mm256_shuffle_epi8(lut, _mm256_and_si256(i & 2 ? _mm256_srli_epi16(raw, 4) : raw, m4));
        }
        const __m256 D = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[b].d));
        for (int c = 0; c < C; c++) {
            const bk_block_q8_0 *y = (const bk_block_q8_0 *)(act + c * act_col) + b;
            __m256i part[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};  /* rows 0-3, rows 4-7 */
            for (int i = 0; i < 8; i++)  /* q[i] meets the activation bytes 16s + 8h .. 16s + 8h + 7 */
                part[i % 2] = _mm256_add_epi32(part[i % 2],
                                               dot4_ss(q[i], bcast8(y->qs + 16 * ((i / 2) % 2) + 8 * (i / 4))));
            const __m256 dd = _mm256_mul_ps(D, _mm256_set1_ps(bk_h2f(y->d)));
            A[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(per_row(part[0], part[1])), dd, A[c]);
        }
    }
    for (int c = 0; c < C; c++) _mm256_storeu_ps(out + c * out_col, A[c]);
}

void bk_matmul_iq4_nl_8x8(const void *w, int32_t k, const void *act, size_t act_col, int n, int64_t r0, int64_t r1,
                          float *out, int64_t out_col) {
    const int nb = k / 32;
    for (int64_t g = r0 / 8; g < r1 / 8; g++)  /* each 8-row group, its columns four at a time */
        for (int t = 0; t < n; t += 4)
            nl8_tile(n - t < 4 ? n - t : 4, nb, (const bk_block_q4_0x8 *)w + g * nb,
                     (const uint8_t *)act + t * act_col, act_col, out + t * out_col + 8 * g, out_col);
}
