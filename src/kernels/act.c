#include "act.h"
#include <math.h>

void bk_swiglu_f32(int64_t n, float *y, const float *g, const float *u) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(bk_v_silu(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    for (; i < n; i++) {
        const float s = g[i] / (1.0f + expf(-g[i]));
        y[i] = s * u[i];
    }
}

void bk_expf_f32(int64_t n, float *y, const float *x) {
    for (int64_t i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, bk_v_expf(_mm256_loadu_ps(x + i)));
}
