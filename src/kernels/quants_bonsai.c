/* Q1_0 and Q2_0 x Q8_0 dot products; the float order is in quants_bonsai.h. */
#include "quants_bonsai.h"
#include "quants.h"
#include "fp16.h"
#include "kq_simd.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* 32 bytes of 0x00 where the element's bit is set and 0xFF where it is clear, from 4 bytes of bits */
static inline __m256i q1_clear_mask(const uint8_t *bits) {
    uint32_t b;
    memcpy(&b, bits, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)b),
                                               _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                                                  0x0303030303030303LL));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), _mm256_setzero_si256());
}

/* float lanes of the exact sums of +-y over elements 4j..4j+3 (minus where the bit is clear) */
static inline __m256 q1_lanes(const uint8_t *bits, const int8_t *qy) {
    const __m256i neg = q1_clear_mask(bits);
    const __m256i y = _mm256_loadu_si256((const __m256i *)qy);
    const __m256i sy = _mm256_sub_epi8(_mm256_xor_si256(y, neg), neg);  /* y, or -y where neg */
    return _mm256_cvtepi32_ps(bk_kq_dot4_us(_mm256_set1_epi8(1), sy));
}

float bk_dot_q1_0_q8_0(int n, const void *vx, const void *vy) {
    const bk_block_q1_0 *x = (const bk_block_q1_0 *)vx;
    const bk_block_q8_0 *y = (const bk_block_q8_0 *)vy;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / BK_QK1_0; i++) {
        const bk_block_q8_0 *yb = y + 4 * i;
        __m256 blk = _mm256_mul_ps(_mm256_set1_ps(bk_h2f(yb[0].d)), q1_lanes(x[i].qs, yb[0].qs));
        for (int K = 1; K < 4; K++)
            blk = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(yb[K].d)), q1_lanes(x[i].qs + 4 * K, yb[K].qs), blk);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(bk_h2f(x[i].d)), blk, acc);
    }
    return bk_kq_hsum8(acc);
}

/* exact sum over 32 elements of (c - 1) * y, the codes c of 8 bytes of a Q2_0 block */
static inline int q2_sum(const uint8_t *qs, const int8_t *qy) {
    uint64_t b;
    memcpy(&b, qs, 8);
    /* byte e of the expanded codes = bits 2*(e%4) of byte e/4: spread each byte over four lanes, shift, mask */
    const __m256i rep = _mm256_shuffle_epi8(_mm256_set1_epi64x((long long)b),
                                            _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3,
                                                             4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7));
    /* the byte at position p of each group of four takes its copy shifted right by 2p (16-bit shifts: the bits
     * shifted in from the neighbour byte land above the two kept) */
    const __m256i s0 = rep;
    const __m256i s2 = _mm256_srli_epi16(rep, 2), s4 = _mm256_srli_epi16(rep, 4), s6 = _mm256_srli_epi16(rep, 6);
    const __m256i pos = _mm256_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3,
                                         0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
    __m256i c = _mm256_blendv_epi8(s0, s2, _mm256_cmpeq_epi8(pos, _mm256_set1_epi8(1)));
    c = _mm256_blendv_epi8(c, s4, _mm256_cmpeq_epi8(pos, _mm256_set1_epi8(2)));
    c = _mm256_blendv_epi8(c, s6, _mm256_cmpeq_epi8(pos, _mm256_set1_epi8(3)));
    c = _mm256_and_si256(c, _mm256_set1_epi8(3));
    const __m256i y = _mm256_loadu_si256((const __m256i *)qy);
    /* sum(c*y) - sum(y): both exact in int32 */
    const __m256i cy = bk_kq_dot4_us(c, y), ones = bk_kq_dot4_us(_mm256_set1_epi8(1), y);
    __m256i d = _mm256_sub_epi32(cy, ones);
    __m128i t = _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4E));
    t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xB1));
    return _mm_cvtsi128_si32(t);
}

float bk_dot_q2_0_q8_0(int n, const void *vx, const void *vy) {
    const bk_block_q2_0 *x = (const bk_block_q2_0 *)vx;
    const bk_block_q8_0 *y = (const bk_block_q8_0 *)vy;
    float sum = 0.0f;
    for (int i = 0; i < n / BK_QK2_0; i++) {
        float s = 0.0f;
        for (int K = 0; K < 2; K++)
            s = fmaf(bk_h2f(y[2 * i + K].d), (float)q2_sum(x[i].qs + 8 * K, y[2 * i + K].qs), s);
        sum = fmaf(bk_h2f(x[i].d), s, sum);
    }
    return sum;
}

void bk_dot_q1_0_q8_0_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y) {
    for (int r = 0; r < nr; r++) s[r] = bk_dot_q1_0_q8_0(n, (const uint8_t *)x + (size_t)r * bx, y);
}

void bk_dot_q2_0_q8_0_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y) {
    for (int r = 0; r < nr; r++) s[r] = bk_dot_q2_0_q8_0(n, (const uint8_t *)x + (size_t)r * bx, y);
}

void bk_dequant_row_q1_0(const void *vx, float *y, int64_t k) {
    const bk_block_q1_0 *x = (const bk_block_q1_0 *)vx;
    for (int64_t i = 0; i < k / BK_QK1_0; i++) {
        const float d = bk_h2f(x[i].d), nd = -d;
        for (int j = 0; j < BK_QK1_0; j++) y[i * BK_QK1_0 + j] = (x[i].qs[j / 8] >> (j % 8)) & 1 ? d : nd;
    }
}

void bk_dequant_row_q2_0(const void *vx, float *y, int64_t k) {
    const bk_block_q2_0 *x = (const bk_block_q2_0 *)vx;
    for (int64_t i = 0; i < k / BK_QK2_0; i++) {
        const float d = bk_h2f(x[i].d);
        for (int j = 0; j < BK_QK2_0; j++)
            y[i * BK_QK2_0 + j] = (float)(((x[i].qs[j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
    }
}
