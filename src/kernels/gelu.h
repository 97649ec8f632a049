/* GELU (tanh form) and GEGLU as llama.cpp b11192's CPU backend computes them on F32 (ggml-cpu/vec.h with
 * GGML_GELU_FP16 defined, which it is in b11192: a table lookup of the F16-rounded input).
 *
 * Gemma 3's feed-forward (src/models/gemma3.cpp: build_ffn(..., LLM_FFN_GELU, LLM_FFN_PAR)) is
 * ggml_geglu_split(gate, up): GGML_OP_GLU / GGML_GLU_OP_GEGLU, ggml_vec_geglu_f32(n, y, x = gate, g = up).
 *
 * The table (ggml_cpu_init): T[i] = f16(G(h(i))) for every half bit pattern i, with
 *     G(x) = fl(fl(0.5 * x) * fl(1 + tanhf(fl(fl(0x1.988454p-1 * x) * fma(fl(0.044715 * x), x, 1)))))
 * (GCC contracts `1.0f + GELU_COEF_A*x*x` into one fma; tanhf is glibc's libm; f16() rounds to nearest even);
 * a NaN input i gives the quiet NaN (i & 0x8000) | 0x7E00 (checked on all 65536 entries of the oracle's table).
 * bk_geglu_f32:  y = x <= -10 ? +0 : x >= 10 ? fl(x * g) : fl(h(T[f16(x)]) * g)
 * bk_gelu_f32:   y = x <= -10 ? +0 : x >= 10 ? x       : h(T[f16(x)])            (ggml_vec_gelu_f32, GGML_OP_GELU)
 * Element by element: any thread split gives the same bits (ggml splits rows: ceil(nr/nth) per thread).
 */
#ifndef BK_GELU_H
#define BK_GELU_H
#include <stdint.h>

/* y = gelu(x) * g over n floats (y may alias x or g). */
void bk_geglu_f32(int64_t n, float *y, const float *x, const float *g);

/* y = gelu(x) over n floats (y may alias x). */
void bk_gelu_f32(int64_t n, float *y, const float *x);

/* The 65536-entry F16 table T (built once, on first use; thread-safe), copied into out (tests). */
void bk_gelu_table_f16(uint16_t *out);

#endif
