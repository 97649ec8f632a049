/* RoPE, NORMAL mode (adjacent pairs) and NEOX mode (halves), as llama.cpp b11192 computes ROPE without scaling
 * (ggml-cpu/ops.cpp `ggml_compute_forward_rope_flt`, `ggml_rope_cache_init`, `rope_yarn`, `rotate_pairs`;
 * freq_scale 1, ext_factor 0, attn_factor 1, no frequency factors). NORMAL is llama's, NEOX qwen3's and
 * Gemma 3's (the graph's rope type).
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

/* NEOX: the same, but pair i (cos_i, sin_i) is the values i and i + n_rot/2 of the head (rotate_pairs with the
 * offset n_dims/2), with the same contraction:
 *     y[i] = fma(x[i], cos_i, -fl(x[i+h] * sin_i));   y[i+h] = fma(x[i], sin_i, fl(x[i+h] * cos_i)),  h = n_rot/2. */
void bk_rope_neox(float *x, int n_head, int64_t head_stride, int n_rot, const float *cache);

/* The K-cache shift (src/llama-kv-cache.cpp build_graph_shift / build_rope_shift, b11192): every cell
 * 0 .. n_cells-1 of one layer's K (cell i at k + i*cell_stride, n_head_kv heads of hd values) is rotated by
 * RoPE at position shift[i] (0 for a cell that did not move, and for an empty one: they go through the same
 * arithmetic), in the model's rope type (build_rope_shift passes hparams.rope_type): neox 0 pairs adjacent
 * values (llama), neox 1 the halves of the first n_rot values (qwen3). V is not touched. cache: float[n_rot]
 * scratch.
 * F16 (ggml_rope_ext_inplace on the F16 view, ggml-cpu/ops.cpp rotate_pairs<ggml_fp16_t>): per pair (a, b) =
 * (2i, 2i+1) or (i, i + n_rot/2)
 *     x0, x1 = f32(h_a), f32(h_b); h_a = f16(fma(x0, cos, -fl(x1*sin))); h_b = f16(fma(x0, sin, fl(x1*cos))),
 * the first n_rot values of each head, round to nearest even. */
void bk_rope_shift_f16(uint16_t *k, uint32_t n_cells, int64_t cell_stride, int n_head_kv, int hd, int n_rot,
                       int neox, float theta_scale, const int32_t *shift, float *cache);

/* Q8_0 (dequantize -> [Hadamard] -> RoPE -> [Hadamard] -> quantize): per cell the row of n_head_kv*hd values
 * is dequantized (dequantize_row_q8_0), rotated back by the Walsh-Hadamard transform of rot_k values when rot_k
 * > 0 (llama.cpp's attn_rot_k: the cache holds rotated K), roped as F32 (bk_rope_normal, or bk_rope_neox when
 * neox), rotated forward again
 * and requantized (quantize_row_q8_0, x86) in place: every cell's bits may change, even at shift 0. Needs
 * n_rot == hd (the view is then the whole row); returns -1 otherwise, 0 on success. row: float[n_head_kv*hd]. */
int bk_rope_shift_q8_0(uint8_t *k, uint32_t n_cells, int64_t cell_bytes, int n_head_kv, int hd, int n_rot,
                       int neox, int rot_k, float theta_scale, const int32_t *shift, float *row, float *cache);

#endif
