/* Q5_0 weights against Q8_0 activations, in llama.cpp b11192's float order on the AVX2 oracle build.
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

#endif
