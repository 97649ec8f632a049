/* Q5_0 x Q8_0 dot products; the float order is in quants_q5.h. */
#include "quants_q5.h"
#include "quants.h"
#include "fp16.h"
#include "kq_simd.h"

#include <immintrin.h>
#include <string.h>

/* 32 signed values q - 16 of one Q5_0 block */
static inline __m256i q5_values(const bk_block_q5_0 *b) {
    const __m128i lo = _mm_loadu_si128((const __m128i *)b->qs);
    const __m256i nib = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(lo), _mm_srli_epi16(lo, 4), 1),
                                         _mm256_set1_epi8(0x0F));
    uint32_t h;
    memcpy(&h, b->qh, 4);
    /* byte i gets bit i of h: spread the 4 bytes of h over 8-byte groups, then test one bit per byte */
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h),
                                               _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                                                  0x0303030303030303LL));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    /* q - 16 = nibble | 0xF0 where the fifth bit is clear */
    return _mm256_or_si256(nib, _mm256_andnot_si256(set, _mm256_set1_epi8((char)0xF0)));
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

static void dot4(int nb, float *s, const uint8_t *x, size_t bx, const bk_block_q8_0 *y) {
    const bk_block_q5_0 *x0 = (const bk_block_q5_0 *)x, *x1 = (const bk_block_q5_0 *)(x + bx);
    const bk_block_q5_0 *x2 = (const bk_block_q5_0 *)(x + 2 * bx), *x3 = (const bk_block_q5_0 *)(x + 3 * bx);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < nb; i++) {
        const float yd = bk_h2f(y[i].d);
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);
        a0 = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x0[i].d) * yd), lanes_ss(q5_values(&x0[i]), qy), a0);
        a1 = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x1[i].d) * yd), lanes_ss(q5_values(&x1[i]), qy), a1);
        a2 = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x2[i].d) * yd), lanes_ss(q5_values(&x2[i]), qy), a2);
        a3 = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x3[i].d) * yd), lanes_ss(q5_values(&x3[i]), qy), a3);
    }
    s[0] = bk_kq_hsum8(a0);
    s[1] = bk_kq_hsum8(a1);
    s[2] = bk_kq_hsum8(a2);
    s[3] = bk_kq_hsum8(a3);
}

void bk_dot_q5_0_q8_0_rows(int n, float *s, int nr, const void *vx, size_t bx, const void *vy) {
    const uint8_t *x = (const uint8_t *)vx;
    int r = 0;
    for (; r + 4 <= nr; r += 4) dot4(n / 32, s + r, x + (size_t)r * bx, bx, (const bk_block_q8_0 *)vy);
    for (; r < nr; r++) s[r] = bk_dot_q5_0_q8_0(n, x + (size_t)r * bx, vy);
}
