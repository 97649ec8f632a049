/* Small AVX2 helpers shared by the K-quant, Q5_0 and repack kernels (kquants.c, quants_q5.c, repack.c).
 * Internal: not part of any kernel's contract. */
#ifndef BK_KQ_SIMD_H
#define BK_KQ_SIMD_H
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* H(a) = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)): ggml's hsum_float_8 */
static inline float bk_kq_hsum8(__m256 a) {
    __m128 t = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(t);
}

/* (a0 + a2) + (a1 + a3) */
static inline float bk_kq_hsum4(__m128 a) {
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

/* Q4_K / repacked Q4_K 12-byte scale groups: 8 six-bit scales into sc[0..7], 8 six-bit mins into mn[0..7]
 * (ggml's get_scale_min_k4 for j = 0..7). */
static inline void bk_kq_scales_mins(const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    for (int j = 0; j < 4; j++) {
        sc[j] = q[j] & 63;
        mn[j] = q[j + 4] & 63;
        sc[j + 4] = (uint8_t)((q[j + 8] & 0x0F) | ((q[j] >> 6) << 4));
        mn[j + 4] = (uint8_t)((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
    }
}

/* The same 12 bytes decoded in a register: bytes 0..7 the scales, 8..15 the mins. */
static inline __m128i bk_kq_scales_mins16(const uint8_t *q) {
    uint32_t u[4];
    memcpy(u, q, 12);
    u[3] = ((u[2] >> 4) & 0x0F0F0F0Fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    const uint32_t m03 = u[1] & 0x3F3F3F3Fu;
    u[1] = (u[2] & 0x0F0F0F0Fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    u[2] = m03;
    u[0] &= 0x3F3F3F3Fu;
    return _mm_loadu_si128((const __m128i *)u);
}

/* eight int32 lanes: lane j = sum of u[4j..4j+3] * s[4j..4j+3] (u unsigned bytes, s signed) */
static inline __m256i bk_kq_dot4_us(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* The body of a gemm over nr weight rows x nc activation columns made of one-row tiles of up to 4 columns:
 * TILE(C, nb, out, s_col, row, y_cols, by) with C a constant 1..4 (one instantiation each); rows of BT blocks bx
 * bytes apart. Used by the Q5_K, Q6_K and Q5_1 gemms. */
#define BK_KQ_GEMM_ROW_TILES(TILE, BT, nb, s, s_col, nr, nc, vx, bx, vy, by)                                       \
    do {                                                                                                       \
        const uint8_t *x_ = (const uint8_t *)(vx), *y_ = (const uint8_t *)(vy);                                 \
        for (int c_ = 0; c_ < (nc); c_ += 4) {                                                                  \
            const int C_ = (nc) - c_ < 4 ? (nc) - c_ : 4;                                                       \
            for (int r_ = 0; r_ < (nr); r_++) {                                                                 \
                const BT *xr_ = (const BT *)(x_ + (size_t)r_ * (bx));                                           \
                float *o_ = (s) + c_ * (s_col) + r_;                                                            \
                const uint8_t *yc_ = y_ + (size_t)c_ * (by);                                                    \
                if (C_ == 4) TILE(4, nb, o_, s_col, xr_, yc_, by);                                              \
                else if (C_ == 3) TILE(3, nb, o_, s_col, xr_, yc_, by);                                         \
                else if (C_ == 2) TILE(2, nb, o_, s_col, xr_, yc_, by);                                         \
                else TILE(1, nb, o_, s_col, xr_, yc_, by);                                                      \
            }                                                                                                   \
        }                                                                                                       \
    } while (0)

#endif
