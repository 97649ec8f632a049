/* Q2_K / Q3_K x Q8_K dot products; the float order of each is in kquants_q23.h. */
#include "kquants_q23.h"
#include "fp16.h"
#include "kq_simd.h"

#include <immintrin.h>

/* int16 scale vectors per 32-element chunk k: sub-block 2k's scale in the low 128 bits, 2k+1's in the high */
static inline void chunk_scales(const int16_t sc[16], __m256i scv[8]) {
    for (int k = 0; k < 8; k++)
        scv[k] = _mm256_setr_m128i(_mm_set1_epi16(sc[2 * k]), _mm_set1_epi16(sc[2 * k + 1]));
}

/* The 2-bit fields of 32 packed bytes, chunk t = bits 2t..2t+1 (the 16-bit shifts only bring in bits the mask
 * clears) */
static inline __m256i two_bits(__m256i v, int t) {
    return _mm256_and_si256(_mm256_srli_epi16(v, 2 * t), _mm256_set1_epi8(3));
}

/* Q3_K's six-bit signed scales */
static inline void q3_scales(const uint8_t *p, int16_t sc[16]) {
    for (int s = 0; s < 16; s++) {
        const int lo = s < 8 ? (p[s] & 15) : (p[s - 8] >> 4);
        const int hi = (p[8 + s % 4] >> (2 * (s / 4))) & 3;
        sc[s] = (int16_t)((lo | hi << 4) - 32);
    }
}

/* A tile of one row against C activation columns (C <= 4, constant after inlining); Q3 selects Q3_K, else Q2_K.
 * Each output is in the single dot product's order: s[c*s_col]. */
static inline __attribute__((always_inline)) void q23_tile(int Q3, int C, int nb, float *s, int64_t s_col,
                                                           const uint8_t *xr, const uint8_t *y, size_t by) {
    __m256 acc[4];
    for (int c = 0; c < C; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < nb; i++) {
        int16_t sc[16];
        __m256i lo[8], hi[8], scv[8];
        float xd, xdmin = 0.0f;
        __m256i mn16 = _mm256_setzero_si256();
        if (Q3) {
            const bk_block_q3_K *b = (const bk_block_q3_K *)xr + i;
            q3_scales(b->scales, sc);
            const __m256i one = _mm256_set1_epi8(1);
            const __m256i h = _mm256_loadu_si256((const __m256i *)b->hmask);
            for (int j = 0; j < 2; j++) {
                const __m256i bits = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * j));
                for (int t = 0; t < 4; t++) {
                    const int k = 4 * j + t;
                    lo[k] = two_bits(bits, t);
                    /* 4 where the high bit is clear, else 0 */
                    const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(h, k), one);
                    hi[k] = _mm256_slli_epi16(_mm256_xor_si256(hb, one), 2);
                }
            }
            xd = bk_h2f(b->d);
        } else {
            const bk_block_q2_K *b = (const bk_block_q2_K *)xr + i;
            const __m128i raw = _mm_loadu_si128((const __m128i *)b->scales);
            mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(15)));
            for (int t = 0; t < 16; t++) sc[t] = (int16_t)(b->scales[t] & 15);
            for (int j = 0; j < 2; j++) {
                const __m256i bits = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * j));
                for (int t = 0; t < 4; t++) lo[4 * j + t] = two_bits(bits, t);
            }
            xd = bk_h2f(b->d);
            xdmin = bk_h2f(b->dmin);
        }
        chunk_scales(sc, scv);
        for (int c = 0; c < C; c++) {
            const bk_block_q8_K *yb = (const bk_block_q8_K *)(y + c * by) + i;
            __m256i sumi = _mm256_setzero_si256();
            for (int k = 0; k < 8; k++) {
                const __m256i q8 = _mm256_loadu_si256((const __m256i *)(yb->qs + 32 * k));
                __m256i p16 = _mm256_maddubs_epi16(lo[k], q8);
                if (Q3) p16 = _mm256_sub_epi16(p16, _mm256_maddubs_epi16(hi[k], q8));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scv[k], p16));
            }
            if (!Q3) {
                const float dmin = -yb->d * xdmin;
                const __m256i m = _mm256_madd_epi16(mn16, _mm256_loadu_si256((const __m256i *)yb->bsums));
                acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(m), acc[c]);
            }
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(yb->d * xd), _mm256_cvtepi32_ps(sumi), acc[c]);
        }
    }
    for (int c = 0; c < C; c++) s[c * s_col] = bk_kq_hsum8(acc[c]);
}

static inline __attribute__((always_inline)) void q23_gemm(int Q3, int n, float *s, int64_t s_col, int nr, int nc,
                                                           const void *vx, size_t bx, const void *vy, size_t by) {
    const uint8_t *x = (const uint8_t *)vx, *y = (const uint8_t *)vy;
    const int nb = n / BK_QK_K;
    for (int c = 0; c < nc; c += 4) {
        const int C = nc - c < 4 ? nc - c : 4;
        const uint8_t *yc = y + (size_t)c * by;
        for (int r = 0; r < nr; r++) {
            const uint8_t *xr = x + (size_t)r * bx;
            float *o = s + c * s_col + r;
            if (C == 4) q23_tile(Q3, 4, nb, o, s_col, xr, yc, by);
            else if (C == 3) q23_tile(Q3, 3, nb, o, s_col, xr, yc, by);
            else if (C == 2) q23_tile(Q3, 2, nb, o, s_col, xr, yc, by);
            else q23_tile(Q3, 1, nb, o, s_col, xr, yc, by);
        }
    }
}

float bk_dot_q2_K_q8_K(int n, const void *x, const void *y) {
    float s;
    q23_tile(0, 1, n / BK_QK_K, &s, 0, (const uint8_t *)x, (const uint8_t *)y, 0);
    return s;
}

float bk_dot_q3_K_q8_K(int n, const void *x, const void *y) {
    float s;
    q23_tile(1, 1, n / BK_QK_K, &s, 0, (const uint8_t *)x, (const uint8_t *)y, 0);
    return s;
}

void bk_gemm_q2_K_q8_K(int n, float *s, int64_t s_col, int nr, int nc, const void *x, size_t bx, const void *y,
                       size_t by) {
    q23_gemm(0, n, s, s_col, nr, nc, x, bx, y, by);
}

void bk_gemm_q3_K_q8_K(int n, float *s, int64_t s_col, int nr, int nc, const void *x, size_t bx, const void *y,
                       size_t by) {
    q23_gemm(1, n, s, s_col, nr, nc, x, bx, y, by);
}

void bk_dot_q2_K_q8_K_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y) {
    q23_gemm(0, n, s, 0, nr, 1, x, bx, y, 0);
}

void bk_dot_q3_K_q8_K_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y) {
    q23_gemm(1, n, s, 0, nr, 1, x, bx, y, 0);
}
