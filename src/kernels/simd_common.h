/* Small SIMD pieces shared by the integer dot-product kernels (quants.c, rows8.c) and floatdot.c; private to
 * src/kernels. Each is one of ggml's own steps (arch/x86/quants.c, llamafile/sgemm.cpp). */
#ifndef BK_SIMD_COMMON_H
#define BK_SIMD_COMMON_H
#include <immintrin.h>
#include <stdint.h>

/* hsum_float_8 / sgemm's hsum: ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) */
static inline float bk_hsum8(__m256 a) {
    __m128 t = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
    t = _mm_add_ps(t, _mm_movehl_ps(t, t));
    t = _mm_add_ss(t, _mm_movehdup_ps(t));
    return _mm_cvtss_f32(t);
}

/* 32 nibbles as bytes: element i < 16 is qs[i] & 15, element i + 16 is qs[i] >> 4 */
static inline __m256i bk_unpack_nibbles(const uint8_t *qs) {
    const __m128i lo = _mm_loadu_si128((const __m128i *)qs);
    const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), _mm_srli_epi16(lo, 4), 1);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

/* eight int32 lanes, lane j = the exact sum of u[4j..4j+3] * s[4j..4j+3] (u unsigned, s signed bytes), as floats:
 * vpmaddubsw + vpmaddwd as ggml (no 16-bit saturation is reachable with ggml's operands) ... */
static inline __m256 bk_lanes_avx2(__m256i u, __m256i s) {
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

/* ... or vpdpbusd from zero (AVX512-VNNI + VL): the same integers */
__attribute__((target("avx512f,avx512vl,avx512bw,avx512vnni")))
static inline __m256 bk_lanes_vnni(__m256i u, __m256i s) {
    return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s));
}

#endif
