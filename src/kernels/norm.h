/* RMS norm with its weight, as llama.cpp b11192 computes RMS_NORM + MUL (ggml-cpu/ops.cpp
 * `ggml_compute_forward_rms_norm_f32`, fused with the MUL by `ggml_cpu_try_fuse_ops` or not: the same bits).
 *
 * Per row of n floats, in order:
 *     sum = 0 (double); sum += (double)fl(x_i * x_i) for i = 0 .. n-1, one element at a time;
 *     mean = (float)(sum / (double)n);  scale = fl(1 / sqrtf(fl(mean + eps)));
 *     y_i = fl(fl(x_i * scale) * w_i).
 * The double sum is a chain: no reassociation, no FMA.
 */
#ifndef BK_NORM_H
#define BK_NORM_H
#include <stdint.h>

/* x: float[n] IN; w: float[n] IN (the norm weight); y: float[n] OUT (may alias x). */
void bk_rms_norm_mul_f32(int n, const float *x, const float *w, float eps, float *y);

/* Rows ith, ith+nth, ... of n_rows rows (row strides in floats). */
void bk_rms_norm_mul_rows(int n, int64_t n_rows, const float *x, int64_t x_row, const float *w, float eps, float *y,
                          int64_t y_row, int ith, int nth);

#endif
