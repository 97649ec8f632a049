/* Activations: ggml_v_expf (ggml-cpu/vec.h, AVX2 + FMA version) and SwiGLU (vec.cpp ggml_vec_swiglu_f32).
 *
 * bk_v_expf(x), eight lanes:
 *     z = fma(x, 0x1.715476p+0, 0x1.8p23);  n = fl(z - 0x1.8p23);
 *     b = fma(-n, 0x1.7f7d1cp-20, fma(-n, 0x1.62e4p-1, x));
 *     e = bits(z) << 23;  k = asfloat(e + bits(1.0f));  u = fl(b * b);
 *     j = fma(fma(fma(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma(0x1.555e66p-3, b, 0x1.fffdb6p-2)), u,
 *             fl(0x1.ffffecp-1 * b));
 *     if no lane has |n| > 126: fma(j, k, k) in every lane; else per lane:
 *         |n| > 192: fl(s1 * s1);  |n| > 126: fl(fma(s2, j, s2) * s1);  else fma(k, j, k)
 *         with g = n <= 0 ? 0x82000000 : 0, s1 = asfloat(g + 0x7f000000), s2 = asfloat(e - g) (uint32 wrap).
 * bk_swiglu_f32: y = fl(silu(g) * u), silu(g) = fl(g / fl(1 + E(fl(0 - g)))) with E = bk_v_expf on groups of 8;
 *     the n % 8 tail uses libm: fl(fl(g / fl(1 + expf(-g))) * u) (ggml_silu_f32).
 */
#ifndef BK_ACT_H
#define BK_ACT_H
#include <stdint.h>
#include <immintrin.h>

static inline __m256 bk_v_expf(__m256 x) {
    const __m256 shift = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
    const __m256 n = _mm256_sub_ps(z, shift);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
    const __m256 absn = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(absn, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 p_hi = _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f));
    const __m256 p_lo = _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f));
    const __m256 j = _mm256_fmadd_ps(_mm256_fmadd_ps(p_hi, u, p_lo), u,
                                     _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    if (!_mm256_movemask_ps(big)) return _mm256_fmadd_ps(j, k, k);
    const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                       _mm256_set1_epi32((int)0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 huge = _mm256_cmp_ps(absn, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 r_big = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
    const __m256 r_norm = _mm256_fmadd_ps(k, j, k);
    const __m256 r = _mm256_blendv_ps(r_norm, r_big, big);
    return _mm256_blendv_ps(r, _mm256_mul_ps(s1, s1), huge);
}

/* silu(x) = x / (1 + E(0 - x)) */
static inline __m256 bk_v_silu(__m256 x) {
    const __m256 ex = bk_v_expf(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), ex));
}

/* g, u: float[n] IN; y: float[n] OUT (may alias g or u) */
void bk_swiglu_f32(int64_t n, float *y, const float *g, const float *u);

/* y = E(x) lane by lane for n floats (n % 8 == 0), for tests */
void bk_expf_f32(int64_t n, float *y, const float *x);

#endif
