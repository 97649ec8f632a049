/* The Bonsai weight types of ggml b11192, Q1_0 and Q2_0, against Q8_0 activations, in the float order llama.cpp
 * b11192 computes them on the AVX2 oracle build (ggml-cpu.c type_traits_cpu: vec_dot_type Q8_0, from_float
 * quantize_row_q8_0, one vec_dot per output; llamafile's sgemm has no case for either type and ggml-cpu's repack
 * takes Q1_0 only on ARM, so on x86 every MUL_MAT of these weights, whatever its column count, is one vec_dot
 * per output).
 *
 * Blocks (ggml-common.h):
 *   Q1_0: half d; uint8 qs[16]   (18 bytes, 128 elements): x_j = bit j of qs ? h(d) : -h(d), bit j in byte j/8
 *         at position j%8.
 *   Q2_0: half d; uint8 qs[16]   (18 bytes, 64 elements):  x_j = (c_j - 1) * h(d), c_j the two bits of byte j/4
 *         at position 2*(j%4).
 * The activation is quantize_row_q8_0 (x86): bk_quant_row_q8_0 in quants.h; a Q1_0 block meets 4 Q8_0 blocks,
 * a Q2_0 block 2.
 *
 * bk_dot_q1_0_q8_0 = ggml_vec_dot_q1_0_q8_0 (arch/x86/quants.c, the AVX2 branch): eight float lanes. For each
 * Q1_0 block b (in order), with L_{K,j} the exact integer sum of the signed products (+y or -y by the bit) over
 * elements 4j..4j+3 of its K-th Q8_0 block:
 *     B_j = fl(h(y_0.d) * L_{0,j});  B_j = fma(h(y_K.d), L_{K,j}, B_j) for K = 1, 2, 3;
 *     acc_j = fma(h(x_b.d), B_j, acc_j) (from +0);
 * result H(acc) = ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)).
 *
 * bk_dot_q2_0_q8_0 = ggml_vec_dot_q2_0_q8_0: x86 has no SIMD version, the generic C one runs, compiled with
 * -O3 -mfma in GNU C (so a*b+c contracts to fma). Scalar floats: for each Q2_0 block b (in order), with S_K the
 * exact integer sum of (c - 1) * y over its K-th Q8_0 block:
 *     s = +0; s = fma(h(y_K.d), (float)S_K, s) for K = 0, 1;  sum = fma(h(x_b.d), s, sum) (sum from +0).
 */
#ifndef BK_QUANTS_BONSAI_H
#define BK_QUANTS_BONSAI_H
#include <stddef.h>
#include <stdint.h>

#define BK_QK1_0 128
#define BK_QK2_0 64

typedef struct { uint16_t d; uint8_t qs[BK_QK1_0 / 8]; } bk_block_q1_0;
typedef struct { uint16_t d; uint8_t qs[BK_QK2_0 / 4]; } bk_block_q2_0;
_Static_assert(sizeof(bk_block_q1_0) == 18, "block_q1_0 is 18 bytes");
_Static_assert(sizeof(bk_block_q2_0) == 18, "block_q2_0 is 18 bytes");

/* One dot product of n elements (n a multiple of the weight's block): x the weight row, y the Q8_0 row. */
float bk_dot_q1_0_q8_0(int n, const void *x, const void *y);
float bk_dot_q2_0_q8_0(int n, const void *x, const void *y);

/* s[r] = dot(x + r*bx, y) for r < nr: the same bits as nr single calls. */
void bk_dot_q1_0_q8_0_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y);
void bk_dot_q2_0_q8_0_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y);

/* Dequantize one row (get_rows): ggml-base's dequantize_row_q1_0 / q2_0. */
void bk_dequant_row_q1_0(const void *x, float *y, int64_t k);
void bk_dequant_row_q2_0(const void *x, float *y, int64_t k);

#endif
