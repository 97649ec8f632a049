/* RMS norm + weight; the float order is in norm.h. */
#include "norm.h"

#include <immintrin.h>
#include <math.h>

void bk_rms_norm_mul_f32(int n, const float *x, const float *w, float eps, float *y) {
    double sum = 0.0;
    int i = 0;
    /* the squares in groups of 8 (each one rounding), the double additions one after another as ggml does */
    for (; i + 8 <= n; i += 8) {
        float sq[8];
        const __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_ps(sq, _mm256_mul_ps(v, v));
        for (int j = 0; j < 8; j++) sum += (double)sq[j];
    }
    for (; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    const __m256 vs = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
    for (; i < n; i++) y[i] = (x[i] * scale) * w[i];
}

void bk_rms_norm_mul_rows(int n, int64_t n_rows, const float *x, int64_t x_row, const float *w, float eps, float *y,
                          int64_t y_row, int ith, int nth) {
    for (int64_t r = ith; r < n_rows; r += nth) bk_rms_norm_mul_f32(n, x + r * x_row, w, eps, y + r * y_row);
}
