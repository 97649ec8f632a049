/* Q5_0 weights against Q8_0 activations and Q5_1 weights against Q8_1 activations, in llama.cpp b11192's float
 * order on the AVX2 oracle build.
 *
 * Block (ggml-common.h): half d; uint8 qh[4]; uint8 qs[16]  (22 bytes, 32 elements)
 *     q[i] = (qs[i] & 15) | bit i of qh << 4,  q[i + 16] = (qs[i] >> 4) | bit (i + 16) of qh << 4  (i < 16);
 *     x = (q - 16) * h(d).
 * The activation is quantize_row_q8_0 (x86): bk_quant_row_q8_0 in quants.h.
 *
 * bk_dot_q5_0_q8_0 = ggml_vec_dot_q5_0_q8_0 (AVX2): eight float lanes, per block in order
 *     acc_j = fma(fl(h(x.d) * h(y.d)), (float)L_j, acc_j) from +0, L_j the exact integer sum of the products
 *     (q - 16) * y.qs over elements 4j..4j+3; result = H(acc) = ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)).
 *     The same per element as tinyBLAS_Q0_AVX<block_q5_0, block_q8_0> (llamafile sgemm), which ggml runs for a
 *     node of 2 or more activation columns: the tile shapes change which thread computes an output, not its
 *     arithmetic (fl(dA*dB) broadcast, the same vpmaddubsw/vpmaddwd lanes, fma from 0, hsum), so one kernel
 *     gives the bits of both.
 *
 * Q5_1 block: half d; half m; uint8 qh[4]; uint8 qs[16]  (24 bytes, 32 elements)
 *     q as Q5_0's (0..31, unsigned); x = q * h(d) + h(m). The activation is quantize_row_q8_1 (bk_quant_row_q8_1).
 * bk_dot_q5_1_q8_1 = ggml_vec_dot_q5_1_q8_1 (AVX2), per block in order:
 *     summs = fma(h(x.m), h(y.s), summs); acc_j = fma((float)L_j, fl(h(x.d) * h(y.d)), acc_j), L_j the exact
 *     integer sum of q * y.qs over elements 4j..4j+3; result = fl(H(acc) + summs).
 *     ggml-cpu runs it once per output: llamafile's sgemm has no Q5_1 case (x86: Q8_0, Q4_0, Q5_0, IQ4_NL) and
 *     nothing repacks Q5_1.
 */
#ifndef BK_QUANTS_Q5_H
#define BK_QUANTS_Q5_H
#include <stddef.h>
#include <stdint.h>

typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[16]; } bk_block_q5_0;
_Static_assert(sizeof(bk_block_q5_0) == 22, "block_q5_0 is 22 bytes");

/* One dot product of n elements (n % 32 == 0): x the Q5_0 weight row, y the Q8_0 activation row. */
float bk_dot_q5_0_q8_0(int n, const void *x, const void *y);

/* s[r] = dot(x + r*bx, y) for r < nr (same bits as nr single calls; four rows share the activation loads). */
void bk_dot_q5_0_q8_0_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y);

/* nr weight rows against nc activation columns (Q8_0 rows by bytes apart): s[c*s_col + r] = dot(x + r*bx,
 * y + c*by). Same bits as the single dots (each output keeps its own accumulator and order); tiles of 2 rows x
 * 4 columns share the decoded weights and the activation loads. */
void bk_gemm_q5_0_q8_0(int n, float *s, int64_t s_col, int nr, int nc, const void *x, size_t bx, const void *y,
                       size_t by);

typedef struct { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[16]; } bk_block_q5_1;
_Static_assert(sizeof(bk_block_q5_1) == 24, "block_q5_1 is 24 bytes");

/* One dot product of n elements (n % 32 == 0): x the Q5_1 weight row, y the Q8_1 activation row. */
float bk_dot_q5_1_q8_1(int n, const void *x, const void *y);
/* s[r] = dot(x + r*bx, y) for r < nr (same bits as nr single calls). */
void bk_dot_q5_1_q8_1_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y);
/* nr rows against nc Q8_1 columns (by bytes apart): s[c*s_col + r] = dot(x + r*bx, y + c*by), same bits. */
void bk_gemm_q5_1_q8_1(int n, float *s, int64_t s_col, int nr, int nc, const void *x, size_t bx, const void *y,
                       size_t by);

#endif
