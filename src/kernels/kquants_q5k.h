/* The Q5_K dot product against Q8_K activations and the K-quant rows as floats (GET_ROWS of a K-quant token
 * embedding table), in llama.cpp b11192's float order on the AVX2 ("haswell") oracle build. Notation and the
 * Q8_K / Q4_K / Q6_K layouts are in kquants.h.
 *
 * Q5_K: half d; half dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]      176 bytes
 *     eight sub-blocks of 32 with a 6-bit scale sc[s] and min mn[s] (packed as Q4_K's); per 64 elements
 *     (c = 0..3) and b < 32:
 *       q[64c + b]      = (qs[32c + b] & 15) + 16 * bit 2c     of qh[b]
 *       q[64c + 32 + b] = (qs[32c + b] >> 4) + 16 * bit 2c + 1 of qh[b]
 *     x = h(d) * sc[s] * q - h(dmin) * mn[s]
 *
 * bk_dot_q5_K_q8_K = ggml_vec_dot_q5_K_q8_K (AVX2). Per super-block i, in order:
 *     d = fl(y.d * h(x.d)); dmin = -fl(y.d * h(x.dmin));
 *     summs = fma(dmin, (float)M, summs), M = sum over s of mn[s] * (bsums[2s] + bsums[2s+1]) (exact);
 *     eight int32 lanes, lane l = sum over the eight 32-element chunks s of
 *         sc[s] * sum_{b = 4l..4l+3} q(32s + b) * y.qs[32s + b]           (exact: q unsigned 0..31);
 *     acc_l = fma(d, (float)lane_l, acc_l).
 *     result = fl(H(acc) + summs), H as in kquants.h.
 *     ggml-cpu runs it once per output on x86: no repack for Q5_K there (only NEON), no tinyBLAS case.
 *
 * Dequantization (ggml-base's to_float, compiled without FMA: each operation rounds):
 *   bk_dequant_row_q4_K: per sub-block s, d1 = fl(h(d) * sc[s]), m1 = fl(h(dmin) * mn[s]); x = fl(fl(d1 * q) - m1)
 *   bk_dequant_row_q5_K: the same with the 5-bit q
 *   bk_dequant_row_q6_K: x = fl(fl(h(d) * scales[e / 16]) * (q - 32))
 */
#ifndef BK_KQUANTS_Q5K_H
#define BK_KQUANTS_Q5K_H
#include <stddef.h>
#include <stdint.h>

#include "kquants.h"

typedef struct {
    uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[BK_QK_K / 8]; uint8_t qs[BK_QK_K / 2];
} bk_block_q5_K;
_Static_assert(sizeof(bk_block_q5_K) == 176, "block_q5_K is 176 bytes");

/* One dot product of n elements (n % 256 == 0): x the Q5_K weight row, y the Q8_K activation row. */
float bk_dot_q5_K_q8_K(int n, const void *x, const void *y);

/* s[r] = dot(x + r*bx, y) for r < nr (same bits as nr calls). */
void bk_dot_q5_K_q8_K_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y);

/* nr Q5_K rows against nc Q8_K activation columns (by bytes apart): s[c*s_col + r] = dot(x + r*bx, y + c*by),
 * the same bits as the single dots; a row's decoded block is shared by four columns. */
void bk_gemm_q5_K_q8_K(int n, float *s, int64_t s_col, int nr, int nc, const void *x, size_t bx, const void *y,
                       size_t by);

/* k floats (k % 256 == 0) from k/256 blocks */
void bk_dequant_row_q4_K(const void *x, float *y, int64_t k);
void bk_dequant_row_q5_K(const void *x, float *y, int64_t k);
void bk_dequant_row_q6_K(const void *x, float *y, int64_t k);

#endif
