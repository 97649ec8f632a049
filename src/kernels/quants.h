/* Block formats, activation quantization and integer dot products, in llama.cpp b11192's float order
 * (ggml-cpu/arch/x86/quants.c as the "haswell" build compiles it: AVX2 + FMA, no VNNI, GCC contraction on).
 *
 * Block layouts (ggml-common.h), 32 elements a block:
 *   Q8_0: half d; int8 qs[32]                      34 bytes   x = qs[i] * d
 *   Q8_1: half d; half s; int8 qs[32]              36 bytes   s = d * sum(qs), used by Q4_1 dots
 *   Q4_1: half d; half m; uint8 qs[16]             20 bytes   x[i] = (qs[i] & 15) * d + m,  x[i+16] = (qs[i] >> 4) * d + m
 *   Q4_0: half d; uint8 qs[16]                     18 bytes   x[i] = ((qs[i] & 15) - 8) * d, x[i+16] = ((qs[i] >> 4) - 8) * d
 *
 * Notation below: fl() rounds to float32, f16() rounds to half (nearest even), h() widens a half (exact),
 * fma() is one rounding.
 *
 * bk_quant_row_q8_0   = quantize_row_q8_0 (x86), NOT quantize_row_q8_0_ref. Per block:
 *     amax = max |x|;  d = fl(amax / 127);  id = amax != 0 ? fl(127 / amax) : 0;
 *     q = round-half-even(fl(x * id));  stored d = f16(d).
 * bk_quant_row_q8_1   = quantize_row_q8_1 (x86): the same q and d, plus s = f16(fl(d * (float)sum(q)))
 *     computed with the unrounded float d.
 *
 * Dot products (one weight row x against one activation row y, n elements, n % 32 == 0). Eight float lanes;
 * lane j of a block is the exact integer sum of the products of elements 4j..4j+3 (vpmaddubsw + vpmaddwd:
 * no saturation is possible with these value ranges).
 * bk_dot_q4_1_q8_1    = ggml_vec_dot_q4_1_q8_1: per block in order, dd = fl(h(x.d) * h(y.d));
 *     acc_j = fma(dd, lane_j, acc_j); summs = fma(h(x.m), h(y.s), summs) (GCC contracts `summs += a*b`);
 *     result = fl(H(acc) + summs).
 * bk_dot_q8_0_q8_0    = ggml_vec_dot_q8_0_q8_0 (and tinyBLAS_Q0_AVX's per-element arithmetic, which is the
 *     same): per block acc_j = fma(fl(h(x.d) * h(y.d)), lane_j, acc_j); result = H(acc).
 * bk_dot_q4_0_q8_0    = ggml_vec_dot_q4_0_q8_0: as Q8_0 with x = nibble - 8. (b11192 repacks Q4_0 weights
 *     into 8x8 interleaved blocks on AVX2 and runs other kernels for them: this dot alone does not make a
 *     Q4_0 model bit-exact; the engine refuses Q4_0 weights.)
 * H(a) = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))   (hsum_float_8).
 */
#ifndef BK_QUANTS_H
#define BK_QUANTS_H
#include <stdint.h>
#include <stddef.h>

#define BK_QK 32

typedef struct { uint16_t d; int8_t qs[BK_QK]; } bk_block_q8_0;
typedef struct { uint16_t d; uint16_t s; int8_t qs[BK_QK]; } bk_block_q8_1;
typedef struct { uint16_t d; uint16_t m; uint8_t qs[BK_QK / 2]; } bk_block_q4_1;
typedef struct { uint16_t d; uint8_t qs[BK_QK / 2]; } bk_block_q4_0;

_Static_assert(sizeof(bk_block_q8_0) == 34, "block_q8_0 is 34 bytes");
_Static_assert(sizeof(bk_block_q8_1) == 36, "block_q8_1 is 36 bytes");
_Static_assert(sizeof(bk_block_q4_1) == 20, "block_q4_1 is 20 bytes");
_Static_assert(sizeof(bk_block_q4_0) == 18, "block_q4_0 is 18 bytes");

/* x: float[k] IN; y: k/32 blocks OUT. k % 32 == 0. */
void bk_quant_row_q8_0(const float *x, void *y, int64_t k);
void bk_quant_row_q8_1(const float *x, void *y, int64_t k);

/* One dot product of n elements (n % 32 == 0); x is the weight row, y the quantized activation row. */
float bk_dot_q4_1_q8_1(int n, const void *x, const void *y);
float bk_dot_q8_0_q8_0(int n, const void *x, const void *y);
float bk_dot_q4_0_q8_0(int n, const void *x, const void *y);

/* Several weight rows against one activation row: s[r] = dot(x + r*bx, y) for r < nr. Same bits as nr
 * single calls; the rows share the activation loads. */
void bk_dot_q4_1_q8_1_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y);
void bk_dot_q8_0_q8_0_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y);

/* Dequantize one row (get_rows of token embeddings): ggml-base's dequantize_row_* (built without FMA):
 * Q8_0: fl(q * h(d)) (exact); Q4_1: fl(fl(q * h(d)) + h(m)). */
void bk_dequant_row_q8_0(const void *x, float *y, int64_t k);
void bk_dequant_row_q4_1(const void *x, float *y, int64_t k);
void bk_dequant_row_q4_0(const void *x, float *y, int64_t k);

#endif
