/* Q2_K and Q3_K weights against Q8_K activations (kquants.h), in the float order of llama.cpp b11192's AVX2
 * ("haswell") ggml_vec_dot_q2_K_q8_K and ggml_vec_dot_q3_K_q8_K (ggml-cpu/arch/x86/quants.c).
 *
 * Block layouts (ggml-common.h), QK_K = 256 elements a super-block, sixteen sub-blocks of 16 elements:
 *   Q2_K: uint8 scales[16]; uint8 qs[64]; half d; half dmin              84 bytes
 *         sub-block s: scale sc[s] = scales[s] & 15, min mn[s] = scales[s] >> 4;
 *         element 128j + 32t + l (j < 2, t < 4, l < 32): q = (qs[32j + l] >> 2t) & 3 (0..3);
 *         x = h(d) * sc[s] * q - h(dmin) * mn[s]
 *   Q3_K: uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; half d       110 bytes
 *         element 128j + 32t + l: q = ((qs[32j + l] >> 2t) & 3) - (bit 4j + t of hmask[l] clear ? 4 : 0)
 *         (-4..3); six-bit scales packed in 12 bytes, signed by -32:
 *         sc[s] = ((s < 8 ? scales[s] & 15 : scales[s - 8] >> 4) | ((scales[8 + s % 4] >> 2(s / 4)) & 3) << 4) - 32;
 *         x = h(d) * sc[s] * q
 *
 * Notation as in kquants.h: fl() rounds to float32, h() widens a half, fma() one rounding,
 * H(a) = ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
 *
 * Both sum a super-block in eight exact int32 lanes, lane l (0..7) over the eight 32-element chunks k:
 *     P_l = sum_k sc[2k + (l >= 4)] * sum_{b = 4l..4l+3} q(32k + b) * y.qs[32k + b]
 * bk_dot_q2_K_q8_K = ggml_vec_dot_q2_K_q8_K (AVX2). One float accumulator of eight lanes; per super-block i,
 *     in order: d = fl(y.d * h(x.d)); dmin = fl(-y.d * h(x.dmin));
 *     M_l = mn[2l] * y.bsums[2l] + mn[2l+1] * y.bsums[2l+1]  (exact);
 *     acc_l = fma(dmin, (float)M_l, acc_l); then acc_l = fma(d, (float)P_l, acc_l).  result = H(acc).
 * bk_dot_q3_K_q8_K = ggml_vec_dot_q3_K_q8_K (AVX2). Per super-block i: d = fl(y.d * h(x.d));
 *     acc_l = fma(d, (float)P_l, acc_l).  result = H(acc).
 *
 * On the haswell build llama-server runs these per output for every column count: repack.cpp repacks Q2_K
 * only with AVX-512 (q2_K_8x8) and Q3_K never on x86, and llamafile's sgemm has no K-quant case
 * (docs/kquants.md).
 */
#ifndef BK_KQUANTS_Q23_H
#define BK_KQUANTS_Q23_H
#include <stddef.h>
#include <stdint.h>

#include "kquants.h"

typedef struct { uint8_t scales[BK_QK_K / 16]; uint8_t qs[BK_QK_K / 4]; uint16_t d; uint16_t dmin; } bk_block_q2_K;
typedef struct { uint8_t hmask[BK_QK_K / 8]; uint8_t qs[BK_QK_K / 4]; uint8_t scales[12]; uint16_t d; } bk_block_q3_K;

_Static_assert(sizeof(bk_block_q2_K) == 84, "block_q2_K is 84 bytes");
_Static_assert(sizeof(bk_block_q3_K) == 110, "block_q3_K is 110 bytes");

/* One dot product of n elements (n % 256 == 0): x the weight row, y the Q8_K activation row. */
float bk_dot_q2_K_q8_K(int n, const void *x, const void *y);
float bk_dot_q3_K_q8_K(int n, const void *x, const void *y);

/* Several weight rows against one activation row: s[r] = dot(x + r*bx, y) for r < nr. */
void bk_dot_q2_K_q8_K_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y);
void bk_dot_q3_K_q8_K_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y);

/* nr rows against nc Q8_K activation columns (by bytes apart): s[c*s_col + r] = dot(x + r*bx, y + c*by), the
 * same bits as the single dots; a row's decoded super-block is shared by up to four columns. */
void bk_gemm_q2_K_q8_K(int n, float *s, int64_t s_col, int nr, int nc, const void *x, size_t bx, const void *y,
                       size_t by);
void bk_gemm_q3_K_q8_K(int n, float *s, int64_t s_col, int nr, int nc, const void *x, size_t bx, const void *y,
                       size_t by);

#endif
