/* F16 / BF16 / F32 dot products in ggml's vec_dot order and in llamafile tinyBLAS's order; see floatdot.h. */
#include "floatdot.h"
#include "fp16.h"
#include "simd_common.h"

#include <immintrin.h>

/* GGML_F32x8_REDUCE of four accumulators */
static inline float reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 x = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

#define hsum8 bk_hsum8

static inline __m256 ld16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

/* vec_dot's main loop: four 8-lane accumulators a0..a3 over the first np = n - n % 32 elements, LOAD widening 8 */
#define LANES4(LOAD)                                                                                              \
    const int np = n & ~31;                                                                                       \
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;                                                   \
    for (int i = 0; i < np; i += 32) {                                                                            \
        a0 = _mm256_fmadd_ps(LOAD(x + i), LOAD(y + i), a0);                                                       \
        a1 = _mm256_fmadd_ps(LOAD(x + i + 8), LOAD(y + i + 8), a1);                                               \
        a2 = _mm256_fmadd_ps(LOAD(x + i + 16), LOAD(y + i + 16), a2);                                             \
        a3 = _mm256_fmadd_ps(LOAD(x + i + 24), LOAD(y + i + 24), a3);                                             \
    }

float bk_dot_f16(int n, const uint16_t *x, const uint16_t *y) {
    LANES4(ld16)
    double s = (double)reduce4(a0, a1, a2, a3);
    for (int i = np; i < n; i++) s += (double)(bk_h2f(x[i]) * bk_h2f(y[i]));
    return (float)s;
}

/* bfloat16 to float, 8 lanes: the exact widening (zero-extend, shift left by 16) */
static inline __m256 ldbf(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

float bk_dot_bf16(int n, const uint16_t *x, const uint16_t *y) {
    LANES4(ldbf)
    /* vec.cpp's own reduction: halves added, then lanes 0 + 2 and 1 + 3, then those two */
    const __m256 v = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    __m128 g = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    g = _mm_add_ps(g, _mm_movehl_ps(g, g));
    g = _mm_add_ss(g, _mm_movehdup_ps(g));
    double s = 0.0;
    s += (double)_mm_cvtss_f32(g);
    for (int i = np; i < n; i++) s += (double)(bk_bf2f(x[i]) * bk_bf2f(y[i]));
    return (float)s;
}

float bk_dot_f32(int n, const float *x, const float *y) {
    LANES4(_mm256_loadu_ps)
    float s = reduce4(a0, a1, a2, a3);
    /* the tail `sumf += x[i]*y[i]` as GCC 12 vectorised it in the oracle build (objdump of ggml_vec_dot_f32):
     * groups of 8 (when 8 or more remain) and then one group of 4 take rounded products added one at a time;
     * the last 0..3 elements are contracted into fma */
    int i = np;
    for (const int e = i + (n - i) / 8 * 8; i < e; i++) s += x[i] * y[i];
    if (n - i >= 4)
        for (const int e = i + 4; i < e; i++) s += x[i] * y[i];
    for (; i < n; i++) s = __builtin_fmaf(x[i], y[i], s);
    return s;
}

int bk_tinyblas_takes(int64_t m, int64_t k, int64_t n) { return n >= 2 && k % 8 == 0 && m % 4 == 0; }

/* An RM x RN block of outputs, one accumulator each (RM, RN compile-time after inlining). */
#define TB_TILE(NAME, T, LOAD)                                                                                    \
    static inline __attribute__((always_inline)) void NAME(int RM, int RN, int k, const T *w, int64_t w_row,      \
                                                           const T *x, int64_t x_col, float *out,                 \
                                                           int64_t out_col) {                                     \
        __m256 c[4][4];                                                                                           \
        for (int i = 0; i < RM; i++)                                                                              \
            for (int j = 0; j < RN; j++) c[i][j] = _mm256_setzero_ps();                                           \
        for (int l = 0; l < k; l += 8) {                                                                          \
            __m256 b[4];                                                                                          \
            for (int j = 0; j < RN; j++) b[j] = LOAD(x + j * x_col + l);                                          \
            for (int i = 0; i < RM; i++) {                                                                        \
                const __m256 a = LOAD(w + i * w_row + l);                                                         \
                for (int j = 0; j < RN; j++) c[i][j] = _mm256_fmadd_ps(a, b[j], c[i][j]);                         \
            }                                                                                                     \
        }                                                                                                         \
        for (int i = 0; i < RM; i++)                                                                              \
            for (int j = 0; j < RN; j++) out[j * out_col + i] = hsum8(c[i][j]);                                   \
    }

TB_TILE(tile_f16, uint16_t, ld16)
TB_TILE(tile_f32, float, _mm256_loadu_ps)
TB_TILE(tile_bf16, uint16_t, ldbf)

/* Rows in groups of 4 (3 columns at a time: 12 accumulators + 3 column registers + 1 row register), the row and
 * column remainders in smaller blocks. Same bits for every element whatever block computes it. */
#define TB_GEMM(NAME, T, TILE)                                                                                    \
    void NAME(int k, const T *w, int64_t w_row, int64_t r0, int64_t r1, const T *x, int64_t x_col, int n,         \
              float *out, int64_t out_col) {                                                                      \
        int64_t r = r0;                                                                                           \
        for (; r < r1; r += 4) {                                                                                  \
            const int rm = r1 - r >= 4 ? 4 : (int)(r1 - r);                                                       \
            const T *wr = w + r * w_row;                                                                          \
            int c = 0;                                                                                            \
            for (; c + 3 <= n; c += 3) {                                                                          \
                float *o = out + c * out_col + r;                                                                 \
                const T *xc = x + c * x_col;                                                                      \
                switch (rm) {                                                                                     \
                case 4: TILE(4, 3, k, wr, w_row, xc, x_col, o, out_col); break;                                   \
                case 3: TILE(3, 3, k, wr, w_row, xc, x_col, o, out_col); break;                                   \
                case 2: TILE(2, 3, k, wr, w_row, xc, x_col, o, out_col); break;                                   \
                default: TILE(1, 3, k, wr, w_row, xc, x_col, o, out_col); break;                                  \
                }                                                                                                 \
            }                                                                                                     \
            if (c < n) {                                                                                          \
                const int rn = n - c;                                                                             \
                float *o = out + c * out_col + r;                                                                 \
                const T *xc = x + c * x_col;                                                                      \
                for (int i = 0; i < rm; i++) {                                                                    \
                    if (rn == 2) TILE(1, 2, k, wr + i * w_row, w_row, xc, x_col, o + i, out_col);                 \
                    else TILE(1, 1, k, wr + i * w_row, w_row, xc, x_col, o + i, out_col);                         \
                }                                                                                                 \
            }                                                                                                     \
        }                                                                                                         \
    }

TB_GEMM(bk_gemm_f16_tb, uint16_t, tile_f16)
TB_GEMM(bk_gemm_f32_tb, float, tile_f32)
TB_GEMM(bk_gemm_bf16_tb, uint16_t, tile_bf16)
