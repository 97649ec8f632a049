/* Activation quantization and integer dot products; the float order of each function is in quants.h. */
#include "quants.h"
#include "fp16.h"
#include "simd_common.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

#define hsum8 bk_hsum8
#define unpack_nibbles bk_unpack_nibbles
#define lane_sums_us bk_lanes_avx2

/* the same for two signed operands: |x| times y with x's sign moved onto y */
static inline __m256 lane_sums_ss(__m256i x, __m256i y) {
    return lane_sums_us(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* ---------------------------------------------------------------- quantization */

/* Quantize 32 floats: returns the 32 int8 values in order, writes d (float, unrounded) and the integer sum. */
static inline __m256i quant_block(const float *x, float *d_out, int *sum_out) {
    __m256 v[4];
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        m = _mm256_max_ps(m, _mm256_and_ps(v[i], absmask));
    }
    __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);

    *d_out = amax / 127.0f;
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);

    __m256i q[4];
    for (int i = 0; i < 4; i++)
        q[i] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));

    if (sum_out) {
        __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
        *sum_out = _mm_cvtsi128_si32(s4);
    }

    /* narrow 4 x 8 int32 to 32 int8 in element order: the packs work per 128-bit half, the permute puts the
     * 32-bit groups back in order */
    const __m256i w01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i w23 = _mm256_packs_epi32(q[2], q[3]);
    const __m256i b = _mm256_packs_epi16(w01, w23);
    return _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

void bk_quant_row_q8_0(const float *x, void *vy, int64_t k) {
    bk_block_q8_0 *y = (bk_block_q8_0 *)vy;
    const int64_t nb = k / BK_QK;
    for (int64_t i = 0; i < nb; i++) {
        float d;
        const __m256i q = quant_block(x + i * BK_QK, &d, NULL);
        y[i].d = bk_f2h(d);
        _mm256_storeu_si256((__m256i *)y[i].qs, q);
    }
}

void bk_quant_row_q8_1(const float *x, void *vy, int64_t k) {
    bk_block_q8_1 *y = (bk_block_q8_1 *)vy;
    const int64_t nb = k / BK_QK;
    for (int64_t i = 0; i < nb; i++) {
        float d;
        int sum;
        const __m256i q = quant_block(x + i * BK_QK, &d, &sum);
        y[i].d = bk_f2h(d);
        y[i].s = bk_f2h(d * (float)sum);
        _mm256_storeu_si256((__m256i *)y[i].qs, q);
    }
}

/* ---------------------------------------------------------------- dot products */

float bk_dot_q4_1_q8_1(int n, const void *vx, const void *vy) {
    const bk_block_q4_1 *x = (const bk_block_q4_1 *)vx;
    const bk_block_q8_1 *y = (const bk_block_q8_1 *)vy;
    const int nb = n / BK_QK;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int i = 0; i < nb; i++) {
        summs = fmaf(bk_h2f(x[i].m), bk_h2f(y[i].s), summs);
        const __m256 dd = _mm256_set1_ps(bk_h2f(x[i].d) * bk_h2f(y[i].d));
        const __m256 p = lane_sums_us(unpack_nibbles(x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(dd, p, acc);
    }
    return hsum8(acc) + summs;
}

float bk_dot_q8_0_q8_0(int n, const void *vx, const void *vy) {
    const bk_block_q8_0 *x = (const bk_block_q8_0 *)vx;
    const bk_block_q8_0 *y = (const bk_block_q8_0 *)vy;
    const int nb = n / BK_QK;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const __m256 dd = _mm256_set1_ps(bk_h2f(x[i].d) * bk_h2f(y[i].d));
        const __m256 p = lane_sums_ss(_mm256_loadu_si256((const __m256i *)x[i].qs),
                                      _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(dd, p, acc);
    }
    return hsum8(acc);
}

float bk_dot_q4_0_q8_0(int n, const void *vx, const void *vy) {
    const bk_block_q4_0 *x = (const bk_block_q4_0 *)vx;
    const bk_block_q8_0 *y = (const bk_block_q8_0 *)vy;
    const int nb = n / BK_QK;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        const __m256 dd = _mm256_set1_ps(bk_h2f(x[i].d) * bk_h2f(y[i].d));
        const __m256i qx = _mm256_sub_epi8(unpack_nibbles(x[i].qs), _mm256_set1_epi8(8));
        const __m256 p = lane_sums_ss(qx, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(dd, p, acc);
    }
    return hsum8(acc);
}

/* Four Q4_1 rows against one Q8_1 row; each row keeps its own accumulators in the single-row order. */
static void dot4_q4_1_q8_1(int nb, float *s, const uint8_t *x, size_t bx, const bk_block_q8_1 *y) {
    const bk_block_q4_1 *x0 = (const bk_block_q4_1 *)(x);
    const bk_block_q4_1 *x1 = (const bk_block_q4_1 *)(x + bx);
    const bk_block_q4_1 *x2 = (const bk_block_q4_1 *)(x + 2 * bx);
    const bk_block_q4_1 *x3 = (const bk_block_q4_1 *)(x + 3 * bx);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    float m0 = 0.0f, m1 = 0.0f, m2 = 0.0f, m3 = 0.0f;
    for (int i = 0; i < nb; i++) {
        const float yd = bk_h2f(y[i].d), ys = bk_h2f(y[i].s);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        m0 = fmaf(bk_h2f(x0[i].m), ys, m0);
        m1 = fmaf(bk_h2f(x1[i].m), ys, m1);
        m2 = fmaf(bk_h2f(x2[i].m), ys, m2);
        m3 = fmaf(bk_h2f(x3[i].m), ys, m3);
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x0[i].d) * yd), lane_sums_us(unpack_nibbles(x0[i].qs), qy), a0);
        a1 = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x1[i].d) * yd), lane_sums_us(unpack_nibbles(x1[i].qs), qy), a1);
        a2 = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x2[i].d) * yd), lane_sums_us(unpack_nibbles(x2[i].qs), qy), a2);
        a3 = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x3[i].d) * yd), lane_sums_us(unpack_nibbles(x3[i].qs), qy), a3);
    }
    s[0] = hsum8(a0) + m0;
    s[1] = hsum8(a1) + m1;
    s[2] = hsum8(a2) + m2;
    s[3] = hsum8(a3) + m3;
}

void bk_dot_q4_1_q8_1_rows(int n, float *s, int nr, const void *vx, size_t bx, const void *vy) {
    const uint8_t *x = (const uint8_t *)vx;
    const int nb = n / BK_QK;
    int r = 0;
    for (; r + 4 <= nr; r += 4)
        dot4_q4_1_q8_1(nb, s + r, x + (size_t)r * bx, bx, (const bk_block_q8_1 *)vy);
    for (; r < nr; r++)
        s[r] = bk_dot_q4_1_q8_1(n, x + (size_t)r * bx, vy);
}

static void dot4_q8_0_q8_0(int nb, float *s, const uint8_t *x, size_t bx, const bk_block_q8_0 *y) {
    const bk_block_q8_0 *x0 = (const bk_block_q8_0 *)(x);
    const bk_block_q8_0 *x1 = (const bk_block_q8_0 *)(x + bx);
    const bk_block_q8_0 *x2 = (const bk_block_q8_0 *)(x + 2 * bx);
    const bk_block_q8_0 *x3 = (const bk_block_q8_0 *)(x + 3 * bx);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < nb; i++) {
        const float yd = bk_h2f(y[i].d);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x0[i].d) * yd),
                             lane_sums_ss(_mm256_loadu_si256((const __m256i *)x0[i].qs), qy), a0);
        a1 = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x1[i].d) * yd),
                             lane_sums_ss(_mm256_loadu_si256((const __m256i *)x1[i].qs), qy), a1);
        a2 = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x2[i].d) * yd),
                             lane_sums_ss(_mm256_loadu_si256((const __m256i *)x2[i].qs), qy), a2);
        a3 = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x3[i].d) * yd),
                             lane_sums_ss(_mm256_loadu_si256((const __m256i *)x3[i].qs), qy), a3);
    }
    s[0] = hsum8(a0);
    s[1] = hsum8(a1);
    s[2] = hsum8(a2);
    s[3] = hsum8(a3);
}

void bk_dot_q8_0_q8_0_rows(int n, float *s, int nr, const void *vx, size_t bx, const void *vy) {
    const uint8_t *x = (const uint8_t *)vx;
    const int nb = n / BK_QK;
    int r = 0;
    for (; r + 4 <= nr; r += 4)
        dot4_q8_0_q8_0(nb, s + r, x + (size_t)r * bx, bx, (const bk_block_q8_0 *)vy);
    for (; r < nr; r++)
        s[r] = bk_dot_q8_0_q8_0(n, x + (size_t)r * bx, vy);
}

/* ---------------------------------------------------------------- dequantization (get_rows) */

void bk_dequant_row_q8_0(const void *vx, float *y, int64_t k) {
    const bk_block_q8_0 *x = (const bk_block_q8_0 *)vx;
    for (int64_t i = 0; i < k / BK_QK; i++) {
        const float d = bk_h2f(x[i].d);
        for (int j = 0; j < BK_QK; j++) y[i * BK_QK + j] = (float)x[i].qs[j] * d;
    }
}

void bk_dequant_row_q4_1(const void *vx, float *y, int64_t k) {
    const bk_block_q4_1 *x = (const bk_block_q4_1 *)vx;
    for (int64_t i = 0; i < k / BK_QK; i++) {
        const float d = bk_h2f(x[i].d), m = bk_h2f(x[i].m);
        for (int j = 0; j < BK_QK / 2; j++) {
            y[i * BK_QK + j] = (float)(x[i].qs[j] & 15) * d + m;
            y[i * BK_QK + j + BK_QK / 2] = (float)(x[i].qs[j] >> 4) * d + m;
        }
    }
}

void bk_dequant_row_q4_0(const void *vx, float *y, int64_t k) {
    const bk_block_q4_0 *x = (const bk_block_q4_0 *)vx;
    for (int64_t i = 0; i < k / BK_QK; i++) {
        const float d = bk_h2f(x[i].d);
        for (int j = 0; j < BK_QK / 2; j++) {
            y[i * BK_QK + j] = (float)((x[i].qs[j] & 15) - 8) * d;
            y[i * BK_QK + j + BK_QK / 2] = (float)((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}
