/* Dot products of F16, BF16 and F32 weights, in the two float orders llama.cpp b11192 uses for them on an AVX2 + FMA +
 * F16C CPU (the "haswell" oracle build).
 *
 * Which order a MUL_MAT gets (ggml-cpu.c `ggml_compute_forward_mul_mat`, llamafile/sgemm.cpp):
 *   - one activation column (n = 1): ggml's vec_dot for every output (llamafile_sgemm refuses n < 2);
 *   - two or more columns: llamafile's tinyBLAS when m % 4 == 0 and k % 8 == 0 (m = output rows, k = inner
 *     length), else vec_dot again. For F16 weights the activation is first rounded to F16 (ggml_cpu_fp32_to_fp16,
 *     round to nearest even), for BF16 weights to BF16 (ggml_cpu_fp32_to_bf16, round to nearest even: fp16.h),
 *     for F32 weights it is used as it is. tinyBLAS's tile shapes (RM x RN, the job
 *     split) decide only which elements are computed together: each element has its own accumulator, so its
 *     bits do not depend on the tile it lands in.
 *
 * bk_dot_f16 = ggml_vec_dot_f16 (vec.cpp, GGML_F16_STEP 32, GGML_F16_EPR 8): four 8-lane accumulators, the one
 *     for j = 0..3 takes elements 32s + 8j + l in lane l: a_j = fma(h(x), h(y), a_j) from 0. Reduced as
 *     X = (a0 + a2) + (a1 + a3); t_l = X_l + X_(l+4); r = (t0 + t1) + (t2 + t3) (GGML_F32x8_REDUCE); the n % 32
 *     tail is added in double: r = (double)r + (double)fl(h(x_i) * h(y_i)), one element at a time; result (float)r.
 * bk_dot_f32 = ggml_vec_dot_f32: the same lanes and reduction on floats; the n % 32 tail in float as GCC 12
 *     vectorised `sumf += x[i]*y[i]` in the oracle build: while 8 or more remain, r = fl(r + fl(x_i * y_i)) one
 *     element at a time; then, if 4 or more remain, 4 more such; the last 0..3 contracted: r = fma(x_i, y_i, r).
 * bk_dot_bf16 = ggml_vec_dot_bf16 (vec.cpp, its AVX2 branch; GCC contracted its mul + add into vfmadd231ps, as
 *     the oracle's libggml-cpu.so shows): the lanes of bk_dot_f16 with b(v) = v << 16 (exact), a_j = fma(b(x),
 *     b(y), a_j) from 0, for the first n - n % 32 elements; reduced as X = (a0 + a2) + (a1 + a3);
 *     t_l = X_l + X_(l+4); r = (t0 + t2) + (t1 + t3) (not GGML_F32x8_REDUCE's pairing); then in double
 *     s = 0.0 + (double)r and s += (double)fl(b(x_i) * b(y_i)) for the tail, one element at a time; result (float)s.
 * tinyBLAS order (tinyBLAS<8, __m256, __m256, T, T, float>::gemm_bloc): one 8-lane accumulator per element,
 *     lane l takes elements 8s + l: c = fma(a, b, c) from 0 for s = 0 .. k/8 - 1; result
 *     H(c) = ((c0 + c4) + (c2 + c6)) + ((c1 + c5) + (c3 + c7)) (sgemm.cpp hsum).
 */
#ifndef BK_FLOATDOT_H
#define BK_FLOATDOT_H
#include <stddef.h>
#include <stdint.h>

/* One dot product of n elements in the vec_dot order. x is the weight row, y the activation row. */
float bk_dot_f16(int n, const uint16_t *x, const uint16_t *y);
float bk_dot_f32(int n, const float *x, const float *y);
float bk_dot_bf16(int n, const uint16_t *x, const uint16_t *y);

/* Whether tinyBLAS takes a MUL_MAT of m output rows, k inner elements and n activation columns. */
int bk_tinyblas_takes(int64_t m, int64_t k, int64_t n);

/* tinyBLAS order, a block of outputs: for rows r0 <= r < r1 and columns 0 <= c < n,
 *   out[c*out_col + r] = H(sum over k of W[r] * X[c])
 * W: weight rows at w + r*w_row (elements); X: activation columns at x + c*x_col (elements); k % 8 == 0.
 * F16 activations are the F16-rounded columns (bk_fp32_to_fp16_row), BF16 ones the BF16-rounded columns
 * (bk_fp32_to_bf16_row); the BF16 tinyBLAS<8, __m256, __m256, ggml_bf16_t, ...> differs from the F16 one only in
 * its load (b(v) = v << 16). Any (r0, r1) split gives the same bits. */
void bk_gemm_f16_tb(int k, const uint16_t *w, int64_t w_row, int64_t r0, int64_t r1, const uint16_t *x, int64_t x_col,
                    int n, float *out, int64_t out_col);
void bk_gemm_bf16_tb(int k, const uint16_t *w, int64_t w_row, int64_t r0, int64_t r1, const uint16_t *x,
                     int64_t x_col, int n, float *out, int64_t out_col);
void bk_gemm_f32_tb(int k, const float *w, int64_t w_row, int64_t r0, int64_t r1, const float *x, int64_t x_col,
                    int n, float *out, int64_t out_col);

#endif
