/* Q5_K x Q8_K and the K-quant rows as floats; the float order is in kquants_q5k.h. */
#include "kquants_q5k.h"
#include "fp16.h"
#include "kq_simd.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- Q5_K x Q8_K */

/* The eight 32-element chunks of a Q5_K block as unsigned 5-bit values */
static inline void q5k_chunks(const bk_block_q5_K *b, __m256i q[8]) {
    const __m256i m15 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    const __m256i hb = _mm256_loadu_si256((const __m256i *)b->qh);
    for (int c = 0; c < 4; c++) {
        const __m256i nib = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
        /* bit 2c / 2c+1 of each qh byte moved to bit 4 (16-bit shifts: the mask keeps the byte's own bit) */
        const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * c), one), 4);
        const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * c + 1), one), 4);
        q[2 * c] = _mm256_or_si256(_mm256_and_si256(nib, m15), h0);
        q[2 * c + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(nib, 4), m15), h1);
    }
}

/* M = sum over s of mn[s] * (bsums[2s] + bsums[2s+1]) */
static inline int q5k_min_sum(const uint8_t mn[8], const bk_block_q8_K *y) {
    const __m128i s = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *)y->bsums),
                                     _mm_loadu_si128((const __m128i *)y->bsums + 1));
    __m128i p = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mn)), s);
    p = _mm_add_epi32(p, _mm_unpackhi_epi64(p, p));
    p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 1));
    return _mm_cvtsi128_si32(p);
}

/* A tile of one Q5_K row against C activation columns (C <= 4, a constant after inlining): s[c*s_col]. */
static inline __attribute__((always_inline)) void q5k_tile(int C, int nb, float *s, int64_t s_col,
                                                           const bk_block_q5_K *x, const uint8_t *y, size_t by) {
    __m256 acc[4];
    float summs[4];
    for (int c = 0; c < C; c++) {
        acc[c] = _mm256_setzero_ps();
        summs[c] = 0.0f;
    }
    for (int i = 0; i < nb; i++) {
        uint8_t scmn[16];
        _mm_storeu_si128((__m128i *)scmn, bk_kq_scales_mins16(x[i].scales));
        __m256i q[8], sumi[4];
        q5k_chunks(&x[i], q);
        for (int c = 0; c < C; c++) sumi[c] = _mm256_setzero_si256();
        for (int K = 0; K < 8; K++) {
            const __m256i sc = _mm256_set1_epi16(scmn[K]);
            for (int c = 0; c < C; c++) {
                const bk_block_q8_K *yb = (const bk_block_q8_K *)(y + c * by) + i;
                const __m256i p16 = _mm256_maddubs_epi16(q[K], _mm256_loadu_si256((const __m256i *)(yb->qs + 32 * K)));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(sc, p16));
            }
        }
        const float xd = bk_h2f(x[i].d), xm = bk_h2f(x[i].dmin);
        for (int c = 0; c < C; c++) {
            const bk_block_q8_K *yb = (const bk_block_q8_K *)(y + c * by) + i;
            const float dmin = -(yb->d * xm);
            summs[c] = fmaf(dmin, (float)q5k_min_sum(scmn + 8, yb), summs[c]);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(yb->d * xd), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    for (int c = 0; c < C; c++) s[c * s_col] = bk_kq_hsum8(acc[c]) + summs[c];
}

float bk_dot_q5_K_q8_K(int n, const void *vx, const void *vy) {
    float s;
    q5k_tile(1, n / BK_QK_K, &s, 0, (const bk_block_q5_K *)vx, (const uint8_t *)vy, 0);
    return s;
}

void bk_dot_q5_K_q8_K_rows(int n, float *s, int nr, const void *vx, size_t bx, const void *vy) {
    const uint8_t *x = (const uint8_t *)vx;
    for (int r = 0; r < nr; r++) s[r] = bk_dot_q5_K_q8_K(n, x + (size_t)r * bx, vy);
}

void bk_gemm_q5_K_q8_K(int n, float *s, int64_t s_col, int nr, int nc, const void *vx, size_t bx, const void *vy,
                       size_t by) {
    BK_KQ_GEMM_ROW_TILES(q5k_tile, bk_block_q5_K, n / BK_QK_K, s, s_col, nr, nc, vx, bx, vy, by);
}

/* ---------------------------------------------------------------- rows as floats */

/* Q4_K (qh NULL) or Q5_K rows: blocks of `bytes`, d, dmin and the scales first, then (Q5_K) qh, then qs */
static void dequant_4_5(const uint8_t *x, size_t bytes, int fifth, float *y, int64_t k) {
    for (int64_t i = 0; i < k / BK_QK_K; i++, x += bytes) {
        uint16_t hd[2];
        memcpy(hd, x, 4);
        uint8_t sc[8], mn[8];
        bk_kq_scales_mins(x + 4, sc, mn);
        const uint8_t *qh = fifth ? x + 16 : NULL, *qs = x + 16 + (fifth ? 32 : 0);
        const float d = bk_h2f(hd[0]), dm = bk_h2f(hd[1]);
        for (int c = 0; c < 4; c++, y += 64) {
            const uint8_t *q = qs + 32 * c;
            const float d1 = d * sc[2 * c], m1 = dm * mn[2 * c];
            const float d2 = d * sc[2 * c + 1], m2 = dm * mn[2 * c + 1];
            for (int b = 0; b < 32; b++) {
                const int h = qh ? qh[b] >> (2 * c) : 0;
                const float lo = d1 * (float)((q[b] & 15) | (h & 1) << 4);
                const float hi = d2 * (float)((q[b] >> 4) | (h & 2) << 3);
                y[b] = lo - m1;
                y[32 + b] = hi - m2;
            }
        }
    }
}

void bk_dequant_row_q4_K(const void *x, float *y, int64_t k) {
    dequant_4_5((const uint8_t *)x, sizeof(bk_block_q4_K), 0, y, k);
}

void bk_dequant_row_q5_K(const void *x, float *y, int64_t k) {
    dequant_4_5((const uint8_t *)x, sizeof(bk_block_q5_K), 1, y, k);
}

void bk_dequant_row_q6_K(const void *vx, float *y, int64_t k) {
    const bk_block_q6_K *x = (const bk_block_q6_K *)vx;
    for (int64_t i = 0; i < k / BK_QK_K; i++, y += BK_QK_K) {
        const float d = bk_h2f(x[i].d);
        for (int e = 0; e < BK_QK_K; e++) {
            const int j = e / 128, part = (e % 128) / 32, l = e % 32;
            const uint8_t lo = x[i].ql[64 * j + 32 * (part & 1) + l];
            const int q = ((part < 2 ? lo & 15 : lo >> 4) | ((x[i].qh[32 * j + l] >> (2 * part)) & 3) << 4) - 32;
            y[e] = d * (float)x[i].scales[e / 16] * (float)q;
        }
    }
}
