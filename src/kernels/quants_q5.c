/* Q5_0 x Q8_0 and Q5_1 x Q8_1 dot products; the float order is in quants_q5.h. */
#include "quants_q5.h"
#include "quants.h"
#include "fp16.h"
#include "kq_simd.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* 32 bytes, byte i 0xFF where bit i of the four bytes qh (little-endian) is set: the fifth bits of Q5_0 / Q5_1 */
static inline __m256i fifth_bits(const uint8_t *qh) {
    uint32_t h;
    memcpy(&h, qh, 4);
    /* spread the 4 bytes of h over 8-byte groups, then test one bit per byte */
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h),
                                               _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                                                  0x0303030303030303LL));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

/* the 32 nibbles of qs in element order (low nibbles 0..15, high 16..31) */
static inline __m256i nibbles(const uint8_t *qs) {
    const __m128i lo = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), _mm_srli_epi16(lo, 4), 1),
                            _mm256_set1_epi8(0x0F));
}

/* 32 signed values q - 16 of one Q5_0 block */
static inline __m256i q5_values(const bk_block_q5_0 *b) {
    /* q - 16 = nibble | 0xF0 where the fifth bit is clear */
    return _mm256_or_si256(nibbles(b->qs), _mm256_andnot_si256(fifth_bits(b->qh), _mm256_set1_epi8((char)0xF0)));
}

/* exact integer lane sums of x*y, x signed (|x| <= 16), y signed, as floats */
static inline __m256 lanes_ss(__m256i x, __m256i y) {
    return _mm256_cvtepi32_ps(bk_kq_dot4_us(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)));
}

float bk_dot_q5_0_q8_0(int n, const void *vx, const void *vy) {
    const bk_block_q5_0 *x = (const bk_block_q5_0 *)vx;
    const bk_block_q8_0 *y = (const bk_block_q8_0 *)vy;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / 32; i++) {
        const __m256 d = _mm256_set1_ps(bk_h2f(x[i].d) * bk_h2f(y[i].d));
        acc = _mm256_fmadd_ps(d, lanes_ss(q5_values(&x[i]), _mm256_loadu_si256((const __m256i *)y[i].qs)), acc);
    }
    return bk_kq_hsum8(acc);
}

/* A tile of R weight rows x C activation columns (R, C <= 4, constants after inlining): each output keeps
 * the single dot product's accumulator and order; the rows' decoded values are shared by the columns and the
 * columns' loads by the rows. s[c*s_col + r]. */
static inline __attribute__((always_inline)) void tile(int R, int C, int nb, float *s, int64_t s_col,
                                                       const uint8_t *x, size_t bx, const uint8_t *y, size_t by) {
    __m256 acc[4][4];
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++) acc[c][r] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        __m256i v[4], a[4];
        float dx[4];
        for (int r = 0; r < R; r++) {
            const bk_block_q5_0 *b = (const bk_block_q5_0 *)(x + r * bx) + i;
            v[r] = q5_values(b);
            a[r] = _mm256_sign_epi8(v[r], v[r]);
            dx[r] = bk_h2f(b->d);
        }
        for (int c = 0; c < C; c++) {
            const bk_block_q8_0 *yb = (const bk_block_q8_0 *)(y + c * by) + i;
            const __m256i qy = _mm256_loadu_si256((const __m256i *)yb->qs);
            const float dy = bk_h2f(yb->d);
            for (int r = 0; r < R; r++) {
                const __m256 p = _mm256_cvtepi32_ps(bk_kq_dot4_us(a[r], _mm256_sign_epi8(qy, v[r])));
                acc[c][r] = _mm256_fmadd_ps(_mm256_set1_ps(dx[r] * dy), p, acc[c][r]);
            }
        }
    }
    for (int c = 0; c < C; c++)
        for (int r = 0; r < R; r++) s[c * s_col + r] = bk_kq_hsum8(acc[c][r]);
}

void bk_dot_q5_0_q8_0_rows(int n, float *s, int nr, const void *vx, size_t bx, const void *vy) {
    const uint8_t *x = (const uint8_t *)vx;
    int r = 0;
    for (; r + 4 <= nr; r += 4) tile(4, 1, n / 32, s + r, 0, x + (size_t)r * bx, bx, (const uint8_t *)vy, 0);
    for (; r < nr; r++) tile(1, 1, n / 32, s + r, 0, x + (size_t)r * bx, bx, (const uint8_t *)vy, 0);
}

void bk_gemm_q5_0_q8_0(int n, float *s, int64_t s_col, int nr, int nc, const void *vx, size_t bx, const void *vy,
                       size_t by) {
    const uint8_t *x = (const uint8_t *)vx, *y = (const uint8_t *)vy;
    const int nb = n / 32;
    for (int c = 0; c < nc; c += 4) {
        const int C = nc - c < 4 ? nc - c : 4;
        const uint8_t *yc = y + (size_t)c * by;
        float *sc = s + c * s_col;
        int r = 0;
        for (; r + 2 <= nr; r += 2) {
            const uint8_t *xr = x + (size_t)r * bx;
            if (C == 4) tile(2, 4, nb, sc + r, s_col, xr, bx, yc, by);
            else if (C == 3) tile(2, 3, nb, sc + r, s_col, xr, bx, yc, by);
            else if (C == 2) tile(2, 2, nb, sc + r, s_col, xr, bx, yc, by);
            else tile(2, 1, nb, sc + r, s_col, xr, bx, yc, by);
        }
        for (; r < nr; r++) {
            const uint8_t *xr = x + (size_t)r * bx;
            if (C == 4) tile(1, 4, nb, sc + r, s_col, xr, bx, yc, by);
            else if (C == 3) tile(1, 3, nb, sc + r, s_col, xr, bx, yc, by);
            else if (C == 2) tile(1, 2, nb, sc + r, s_col, xr, bx, yc, by);
            else tile(1, 1, nb, sc + r, s_col, xr, bx, yc, by);
        }
    }
}

/* ---------------------------------------------------------------- Q5_1 x Q8_1 */

/* One Q5_1 row against C Q8_1 columns (C <= 4, a constant after inlining), each output in the single dot's
 * order: s[c*s_col]. */
static inline __attribute__((always_inline)) void tile51(int C, int nb, float *s, int64_t s_col,
                                                         const bk_block_q5_1 *x, const uint8_t *y, size_t by) {
    __m256 acc[4];
    float summs[4];
    for (int c = 0; c < C; c++) {
        acc[c] = _mm256_setzero_ps();
        summs[c] = 0.0f;
    }
    for (int i = 0; i < nb; i++) {
        const __m256i q = _mm256_or_si256(nibbles(x[i].qs), _mm256_and_si256(fifth_bits(x[i].qh), _mm256_set1_epi8(0x10)));
        const float dx = bk_h2f(x[i].d), mx = bk_h2f(x[i].m);
        for (int c = 0; c < C; c++) {
            const bk_block_q8_1 *yb = (const bk_block_q8_1 *)(y + c * by) + i;
            summs[c] = fmaf(mx, bk_h2f(yb->s), summs[c]);
            const __m256 p = _mm256_cvtepi32_ps(bk_kq_dot4_us(q, _mm256_loadu_si256((const __m256i *)yb->qs)));
            acc[c] = _mm256_fmadd_ps(p, _mm256_set1_ps(dx * bk_h2f(yb->d)), acc[c]);
        }
    }
    for (int c = 0; c < C; c++) s[c * s_col] = bk_kq_hsum8(acc[c]) + summs[c];
}

float bk_dot_q5_1_q8_1(int n, const void *vx, const void *vy) {
    float s;
    tile51(1, n / 32, &s, 0, (const bk_block_q5_1 *)vx, (const uint8_t *)vy, 0);
    return s;
}

void bk_dot_q5_1_q8_1_rows(int n, float *s, int nr, const void *vx, size_t bx, const void *vy) {
    const uint8_t *x = (const uint8_t *)vx;
    for (int r = 0; r < nr; r++) s[r] = bk_dot_q5_1_q8_1(n, x + (size_t)r * bx, vy);
}

void bk_gemm_q5_1_q8_1(int n, float *s, int64_t s_col, int nr, int nc, const void *vx, size_t bx, const void *vy,
                       size_t by) {
    BK_KQ_GEMM_ROW_TILES(tile51, bk_block_q5_1, n / 32, s, s_col, nr, nc, vx, bx, vy, by);
}
