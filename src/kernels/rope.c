/* RoPE NORMAL; the float order is in rope.h. */
#define _GNU_SOURCE
#include "rope.h"

#include <math.h>

float bk_rope_theta_scale(float freq_base, int n_rot) { return powf(freq_base, -2.0f / n_rot); }

void bk_rope_cache(int32_t pos, int n_rot, float theta_scale, float *cache) {
    float theta = (float)pos;
    for (int i = 0; i < n_rot; i += 2) {
        float s, c;
        sincosf(theta, &s, &c);
        cache[i] = c;
        cache[i + 1] = s;
        theta *= theta_scale;
    }
}

void bk_rope_normal(float *x, int n_head, int64_t head_stride, int n_rot, const float *cache) {
    for (int h = 0; h < n_head; h++) {
        float *p = x + h * head_stride;
        for (int i = 0; i < n_rot; i += 2) {
            const float c = cache[i], s = cache[i + 1];
            const float x0 = p[i], x1 = p[i + 1];
            p[i] = fmaf(x0, c, -(x1 * s));
            p[i + 1] = fmaf(x0, s, x1 * c);
        }
    }
}
