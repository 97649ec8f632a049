/* RoPE, NORMAL mode (adjacent pairs), as llama.cpp b11192 computes ROPE for the llama graph without scaling
 * (ggml-cpu/ops.cpp `ggml_compute_forward_rope_flt`, `ggml_rope_cache_init`, `rope_yarn`, `rotate_pairs`;
 * freq_scale 1, ext_factor 0, attn_factor 1, no frequency factors).
 *
 * theta_scale = powf(freq_base, -2.0f / n_rot) (libm), computed once.
 * Cache for position p: theta_0 = (float)p; theta_(i+1) = fl(theta_i * theta_scale) (cumulative, one rounding a
 *     step); cos_i = cosf(theta_i), sin_i = sinf(theta_i) (libm; the scalings by 1 are exact).
 * Rotation of pair i of a head (GCC contracts ggml's `x0*cos - x1*sin` and `x0*sin + x1*cos` as):
 *     y[2i]   = fma(x0, cos_i, -fl(x1 * sin_i));   y[2i+1] = fma(x0, sin_i, fl(x1 * cos_i)).
 * Dimensions from n_rot to the head size are copied unchanged.
 */
#ifndef BK_ROPE_H
#define BK_ROPE_H
#include <stdint.h>

float bk_rope_theta_scale(float freq_base, int n_rot);

/* cache: float[n_rot] OUT, (cos_i, sin_i) pairs for i < n_rot/2. */
void bk_rope_cache(int32_t pos, int n_rot, float theta_scale, float *cache);

/* In place on n_head heads of head_dim floats at x + h*head_stride, with one position's cache. */
void bk_rope_normal(float *x, int n_head, int64_t head_stride, int n_rot, const float *cache);

#endif
