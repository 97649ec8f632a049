/* GELU / GEGLU through ggml's F16 table; the float order is in gelu.h. */
#include "gelu.h"
#include "fp16.h"

#include <immintrin.h>
#include <math.h>
#include <pthread.h>

/* h(T[i]) as floats, so that the vector path gathers 32-bit values directly */
static float table_f32[1 << 16];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static float gelu_ref(float x) {
    const float t = fmaf(0.044715f * x, x, 1.0f);
    return (0.5f * x) * (1.0f + tanhf((0.79788456080286535587989211986876f * x) * t));
}

static void build_table(void) {
    for (int i = 0; i < (1 << 16); i++) {
        const float x = bk_h2f((uint16_t)i);
        /* a NaN input gives ggml's table the default quiet NaN with the input's sign (its payload is lost) */
        table_f32[i] = isnan(x) ? bk_h2f((uint16_t)((i & 0x8000) | 0x7E00)) : bk_h2f(bk_f2h(gelu_ref(x)));
    }
}

static inline void ensure_table(void) { pthread_once(&table_once, build_table); }

void bk_gelu_table_f16(uint16_t *out) {
    ensure_table();
    for (int i = 0; i < (1 << 16); i++) out[i] = bk_f2h(table_f32[i]);
}

/* h(T[f16(x)]) for 8 lanes, and the masks of the two clamps */
static inline __m256 lookup8(__m256 x) {
    const __m256i idx = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    return _mm256_i32gather_ps(table_f32, idx, 4);
}

static inline float lookup1(float x) { return table_f32[bk_f2h(x)]; }

void bk_geglu_f32(int64_t n, float *y, const float *x, const float *g) {
    ensure_table();
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 vx = _mm256_loadu_ps(x + i), vg = _mm256_loadu_ps(g + i);
        __m256 r = _mm256_mul_ps(lookup8(vx), vg);
        r = _mm256_blendv_ps(r, _mm256_mul_ps(vx, vg), _mm256_cmp_ps(vx, hi, _CMP_GE_OQ));
        r = _mm256_andnot_ps(_mm256_cmp_ps(vx, lo, _CMP_LE_OQ), r);
        _mm256_storeu_ps(y + i, r);
    }
    for (; i < n; i++) y[i] = x[i] <= -10.0f ? 0.0f : x[i] >= 10.0f ? x[i] * g[i] : lookup1(x[i]) * g[i];
}

void bk_gelu_f32(int64_t n, float *y, const float *x) {
    ensure_table();
    const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 vx = _mm256_loadu_ps(x + i);
        __m256 r = _mm256_blendv_ps(lookup8(vx), vx, _mm256_cmp_ps(vx, hi, _CMP_GE_OQ));
        r = _mm256_andnot_ps(_mm256_cmp_ps(vx, lo, _CMP_LE_OQ), r);
        _mm256_storeu_ps(y + i, r);
    }
    for (; i < n; i++) y[i] = x[i] <= -10.0f ? 0.0f : x[i] >= 10.0f ? x[i] : lookup1(x[i]);
}
