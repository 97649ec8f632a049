/* TQ1_0 / TQ2_0 x Q8_K dot products; the layouts and the float order are in quants_tq.h. */
#include "quants_tq.h"
#include "fp16.h"
#include "kq_simd.h"

#include <immintrin.h>
#include <string.h>

/* The trits T(q, s) of 32 bytes, where pw holds 3^s for each 16-bit lane (both bytes of a lane share it): the
 * even and odd bytes are widened to 16 bits, multiplied mod 256, times 3, and the top byte kept. */
static inline __m256i trits_tq1(__m256i v, __m256i pw) {
    const __m256i lo8 = _mm256_set1_epi16(0xFF), three = _mm256_set1_epi16(3);
    __m256i e = _mm256_and_si256(_mm256_mullo_epi16(_mm256_and_si256(v, lo8), pw), lo8);
    __m256i o = _mm256_and_si256(_mm256_mullo_epi16(_mm256_srli_epi16(v, 8), pw), lo8);
    e = _mm256_srli_epi16(_mm256_mullo_epi16(e, three), 8);
    o = _mm256_srli_epi16(_mm256_mullo_epi16(o, three), 8);
    return _mm256_or_si256(e, _mm256_slli_epi16(o, 8));
}

/* A TQ1_0 super-block's 256 trits as eight registers, register k holding elements 32k .. 32k+31 in order. */
static inline void decode_tq1(const bk_block_tq1_0 *b, __m256i t[8]) {
    static const int16_t p3[5] = {1, 3, 9, 27, 81};
    const __m256i first = _mm256_loadu_si256((const __m256i *)b->qs);
    for (int s = 0; s < 5; s++) t[s] = trits_tq1(first, _mm256_set1_epi16(p3[s]));
    /* bytes 32..47: trit s of byte m is element 160 + 16s + m, so registers 5 and 6 take two powers each */
    const __m256i tail = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b->qs + 32)));
    t[5] = trits_tq1(tail, _mm256_setr_m128i(_mm_set1_epi16(1), _mm_set1_epi16(3)));
    t[6] = trits_tq1(tail, _mm256_setr_m128i(_mm_set1_epi16(9), _mm_set1_epi16(27)));
    /* register 7: trit 4 of bytes 32..47 (elements 224..239), then qh: trit s of qh[j] is element 240 + 4s + j */
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    const __m256i last = _mm256_setr_m128i(_mm_loadu_si128((const __m128i *)(b->qs + 32)), _mm_set1_epi32((int)qh));
    const __m256i pw = _mm256_setr_epi16(81, 81, 81, 81, 81, 81, 81, 81, 1, 1, 3, 3, 9, 9, 27, 27);
    t[7] = trits_tq1(last, pw);
}

/* A TQ2_0 super-block's 256 trits, register k = 4j + s holding elements 128j + 32s .. +31 */
static inline void decode_tq2(const bk_block_tq2_0 *b, __m256i t[8]) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int j = 0; j < 2; j++) {
        const __m256i v = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * j));
        for (int s = 0; s < 4; s++) t[4 * j + s] = _mm256_and_si256(_mm256_srli_epi16(v, 2 * s), m3);
    }
}

/* One row against C activation columns (C <= 4, constant after inlining); TQ1 selects TQ1_0, else TQ2_0. */
static inline __attribute__((always_inline)) void tq_tile(int TQ1, int C, int nb, float *s, int64_t s_col,
                                                          const uint8_t *xr, const uint8_t *y, size_t by) {
    __m256 acc[4];
    const __m256i ones = _mm256_set1_epi16(1);
    for (int c = 0; c < C; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        __m256i t[8];
        float xd;
        if (TQ1) {
            const bk_block_tq1_0 *b = (const bk_block_tq1_0 *)xr + i;
            decode_tq1(b, t);
            xd = bk_h2f(b->d);
        } else {
            const bk_block_tq2_0 *b = (const bk_block_tq2_0 *)xr + i;
            decode_tq2(b, t);
            xd = bk_h2f(b->d);
        }
        for (int c = 0; c < C; c++) {
            const bk_block_q8_K *yb = (const bk_block_q8_K *)(y + c * by) + i;
            __m256i sum16 = _mm256_setzero_si256();  /* 16-bit lane l: elements 32k + 2l, 32k + 2l + 1 */
            for (int k = 0; k < 8; k++)
                sum16 = _mm256_add_epi16(sum16, _mm256_maddubs_epi16(t[k], _mm256_loadu_si256((const __m256i *)
                                                                                           (yb->qs + 32 * k))));
            sum16 = _mm256_sub_epi16(sum16, _mm256_loadu_si256((const __m256i *)yb->bsums));
            const __m256i p = _mm256_madd_epi16(sum16, ones);
            acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(yb->d * xd), acc[c]);
        }
    }
    for (int c = 0; c < C; c++) s[c * s_col] = bk_kq_hsum8(acc[c]);
}

/* the gemms' tiles (kq_simd.h's BK_KQ_GEMM_ROW_TILES hands each a block row) */
#define TQ1_TILE(C, nb, o, s_col, xr, yc, by) tq_tile(1, C, nb, o, s_col, (const uint8_t *)(xr), yc, by)
#define TQ2_TILE(C, nb, o, s_col, xr, yc, by) tq_tile(0, C, nb, o, s_col, (const uint8_t *)(xr), yc, by)

float bk_dot_tq1_0_q8_K(int n, const void *x, const void *y) {
    float s;
    tq_tile(1, 1, n / BK_QK_K, &s, 0, (const uint8_t *)x, (const uint8_t *)y, 0);
    return s;
}

float bk_dot_tq2_0_q8_K(int n, const void *x, const void *y) {
    float s;
    tq_tile(0, 1, n / BK_QK_K, &s, 0, (const uint8_t *)x, (const uint8_t *)y, 0);
    return s;
}

void bk_gemm_tq1_0_q8_K(int n, float *s, int64_t s_col, int nr, int nc, const void *x, size_t bx, const void *y,
                        size_t by) {
    BK_KQ_GEMM_ROW_TILES(TQ1_TILE, bk_block_tq1_0, n / BK_QK_K, s, s_col, nr, nc, x, bx, y, by);
}

void bk_gemm_tq2_0_q8_K(int n, float *s, int64_t s_col, int nr, int nc, const void *x, size_t bx, const void *y,
                        size_t by) {
    BK_KQ_GEMM_ROW_TILES(TQ2_TILE, bk_block_tq2_0, n / BK_QK_K, s, s_col, nr, nc, x, bx, y, by);
}

/* the trit s of byte q (quants_tq.h's T(q, s)) */
static inline int trit_tq1(uint8_t q, int s) {
    static const uint8_t p3[5] = {1, 3, 9, 27, 81};
    return ((uint8_t)(q * p3[s]) * 3) >> 8;
}

void bk_dequant_row_tq1_0(const void *vx, float *y, int64_t k) {
    const bk_block_tq1_0 *x = (const bk_block_tq1_0 *)vx;
    for (int64_t i = 0; i < k / BK_QK_K; i++, y += BK_QK_K) {
        const float d = bk_h2f(x[i].d);
        for (int s = 0; s < 5; s++)
            for (int m = 0; m < 32; m++) y[32 * s + m] = (float)(trit_tq1(x[i].qs[m], s) - 1) * d;
        for (int s = 0; s < 5; s++)
            for (int m = 0; m < 16; m++) y[160 + 16 * s + m] = (float)(trit_tq1(x[i].qs[32 + m], s) - 1) * d;
        for (int s = 0; s < 4; s++)
            for (int j = 0; j < 4; j++) y[240 + 4 * s + j] = (float)(trit_tq1(x[i].qh[j], s) - 1) * d;
    }
}

void bk_dequant_row_tq2_0(const void *vx, float *y, int64_t k) {
    const bk_block_tq2_0 *x = (const bk_block_tq2_0 *)vx;
    for (int64_t i = 0; i < k / BK_QK_K; i++, y += BK_QK_K) {
        const float d = bk_h2f(x[i].d);
        for (int j = 0; j < 2; j++)
            for (int s = 0; s < 4; s++)
                for (int m = 0; m < 32; m++)
                    y[128 * j + 32 * s + m] = (float)(((x[i].qs[32 * j + m] >> (2 * s)) & 3) - 1) * d;
    }
}
