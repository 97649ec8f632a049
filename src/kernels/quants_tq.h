/* The ternary weight types of ggml b11192, TQ1_0 and TQ2_0, against Q8_K activations, in the float order llama.cpp
 * b11192 computes them on the AVX2 oracle build: ggml-cpu.c type_traits_cpu gives both vec_dot_type Q8_K
 * (quantize_row_q8_K = the reference encoder, kquants.h's bk_quant_row_q8_K) and one vec_dot per output;
 * llamafile's sgemm has no case for them and repack.cpp does not take them, so every MUL_MAT of these weights,
 * whatever its column count, is ggml_vec_dot_tq1_0_q8_K / ggml_vec_dot_tq2_0_q8_K (arch/x86/quants.c) per output.
 *
 * Blocks (ggml-common.h), QK_K = 256 elements; every element is a trit t in {0, 1, 2} standing for t - 1:
 *   TQ2_0: uint8 qs[64]; half d                       (66 bytes)
 *          element 128j + 32s + m (j < 2, s < 4, m < 32): t = (qs[32j + m] >> 2s) & 3
 *   TQ1_0: uint8 qs[48]; uint8 qh[4]; half d          (54 bytes), five trits a byte in base 3, most
 *          significant first, stored as ceil(v * 256 / 243): the s-th trit of byte q is T(q, s) =
 *          (((q * 3^s) mod 256) * 3) >> 8.
 *          element 32s + m (s < 5, m < 32): T(qs[m], s); element 160 + 16s + m (s < 5, m < 16): T(qs[32 + m], s);
 *          element 240 + 4s + j (s < 4, j < 4): T(qh[j], s).
 *   x = (t - 1) * h(d).
 *
 * Float order (fl() rounds to float32, h() widens a half, fma() one rounding, H(a) = ((a0 + a4) + (a2 + a6)) +
 * ((a1 + a5) + (a3 + a7))), the same for both types: per super-block i an exact int32 lane l (0..7)
 *     P_l = sum_{k < 8} sum_{b = 4l..4l+3} t(32k + b) * y.qs[32k + b]  -  y.bsums[2l]  -  y.bsums[2l + 1]
 * (ggml sums in 16-bit lanes, which never overflow here: |P_l| < 2^15), then
 *     d = fl(y.d * h(x.d));  acc_l = fma((float)P_l, d, acc_l)  (from +0; GCC contracts ggml's mul + add)
 * result H(acc). ggml decodes TQ1_0's trits with byte arithmetic (shift-and-add multiplies, a saturating
 * subtract and two rounding averages); that equals T(q, s) for each of the 256 byte values, which is how bankml
 * decodes them (in 16-bit lanes).
 */
#ifndef BK_QUANTS_TQ_H
#define BK_QUANTS_TQ_H
#include <stddef.h>
#include <stdint.h>

#include "kquants.h"

typedef struct { uint8_t qs[(BK_QK_K - 4 * BK_QK_K / 64) / 5]; uint8_t qh[BK_QK_K / 64]; uint16_t d; } bk_block_tq1_0;
typedef struct { uint8_t qs[BK_QK_K / 4]; uint16_t d; } bk_block_tq2_0;

_Static_assert(sizeof(bk_block_tq1_0) == 54, "block_tq1_0 is 54 bytes");
_Static_assert(sizeof(bk_block_tq2_0) == 66, "block_tq2_0 is 66 bytes");

/* One dot product of n elements (n % 256 == 0): x the weight row, y the Q8_K activation row. */
float bk_dot_tq1_0_q8_K(int n, const void *x, const void *y);
float bk_dot_tq2_0_q8_K(int n, const void *x, const void *y);

/* nr rows (bx bytes apart) against nc Q8_K activation columns (by bytes apart):
 * s[c*s_col + r] = dot(x + r*bx, y + c*by), the single dot's bits; a row's decoded super-block is shared by up to
 * four columns. */
void bk_gemm_tq1_0_q8_K(int n, float *s, int64_t s_col, int nr, int nc, const void *x, size_t bx, const void *y,
                        size_t by);
void bk_gemm_tq2_0_q8_K(int n, float *s, int64_t s_col, int nr, int nc, const void *x, size_t bx, const void *y,
                        size_t by);

/* GET_ROWS of a ternary table: one row of k elements (k % 256 == 0) as floats, y_j = fl((t_j - 1) * h(d)) (so 0 * d
 * keeps the sign of d: -0 for a negative scale), as ggml-base's dequantize_row_tq1_0 / tq2_0. */
void bk_dequant_row_tq1_0(const void *x, float *y, int64_t k);
void bk_dequant_row_tq2_0(const void *x, float *y, int64_t k);

#endif
