/* K-quants (256-element super-blocks): the Q8_K activation format and the Q4_K and Q6_K dot products, in
 * llama.cpp b11192's float order as the AVX2 ("haswell") oracle build computes them
 * (ggml-cpu/arch/x86/quants.c, ggml-quants.c).
 *
 * Block layouts (ggml-common.h), QK_K = 256 elements a super-block:
 *   Q8_K: float d; int8 qs[256]; int16 bsums[16]          292 bytes  x = qs[i] * d; bsums[j] = sum qs[16j..16j+15]
 *   Q4_K: half d; half dmin; uint8 scales[12]; uint8 qs[128]   144 bytes
 *         eight sub-blocks of 32 with a 6-bit scale sc[s] and min mn[s] (packed in scales[], get_scale_min_k4);
 *         element 64c + b (b < 32) is qs[32c + b] & 15, element 64c + 32 + b is qs[32c + b] >> 4;
 *         x = h(d) * sc[s] * q - h(dmin) * mn[s]
 *   Q6_K: uint8 ql[128]; uint8 qh[64]; int8 scales[16]; half d    210 bytes
 *         sixteen sub-blocks of 16 with an int8 scale; per 128 elements (j = 0, 1) and l < 32:
 *         q[128j + l]      = (ql[64j + l] & 15)      | ((qh[32j + l] >> 0) & 3) << 4
 *         q[128j + 32 + l] = (ql[64j + 32 + l] & 15) | ((qh[32j + l] >> 2) & 3) << 4
 *         q[128j + 64 + l] = (ql[64j + l] >> 4)      | ((qh[32j + l] >> 4) & 3) << 4
 *         q[128j + 96 + l] = (ql[64j + 32 + l] >> 4) | ((qh[32j + l] >> 6) & 3) << 4
 *         x = h(d) * scales[e / 16] * (q - 32)
 *
 * Notation: fl() rounds to float32, h() widens a half (exact), fma() is one rounding; RNE = round half to even.
 *
 * bk_quant_row_q8_K   = quantize_row_q8_K (x86), which is quantize_row_q8_K_ref (ggml-base, no FMA). Per
 *     super-block: max = the first element with the largest |x| (sign kept); if max is 0: d = 0, qs = 0,
 *     bsums = 0 (ggml leaves bsums unwritten there; nothing reads them in a way that shows); else
 *     iscale = fl(-127 / max); q = min(127, RNE(fl(iscale * x))); d = fl(1 / iscale); bsums exact.
 *     (d is negative when max is positive: the quants carry the opposite sign.)
 *
 * bk_dot_q4_K_q8_K    = ggml_vec_dot_q4_K_q8_K (AVX2). Per super-block i, in order:
 *     d = fl(y.d * h(x.d)); dmin = -fl(y.d * h(x.dmin));
 *     eight int32 lanes, lane l = sum over c = 0..3 of  sc[2c] * sum_{b = 4l..4l+3} qlo(64c + b) * y.qs[64c + b]
 *                                                    + sc[2c+1] * sum_{b = 4l..4l+3} qhi(64c + 32 + b) * y.qs[64c + 32 + b]
 *     (exact integers); acc_l = fma(d, (float)lane_l, acc_l);
 *     four mins lanes, lane k = mn[2k] * S(2k) + mn[2k+1] * S(2k+1) with S(s) = bsums[2s] + bsums[2s+1];
 *     accm_k = fma(dmin, (float)lane_k, accm_k).
 *     result = fl(H(acc) + ((accm0 + accm2) + (accm1 + accm3))), H(a) = ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)).
 * bk_dot_q6_K_q8_K    = ggml_vec_dot_q6_K_q8_K (AVX2). Per super-block i, in order: d = fl(y.d * h(x.d));
 *     eight int32 lanes, lane l = sum over the eight 32-element chunks k (elements 32k..32k+31) of
 *         scales[2k + (l >= 4)] * sum_{b = 4l..4l+3} q(32k + b) * y.qs[32k + b]
 *       - 32 * (bsums[2l] * scales[2l] + bsums[2l+1] * scales[2l+1])                      (the -32 offset)
 *     (exact integers: q in 0..63 unsigned); acc_l = fma(d, (float)lane_l, acc_l). result = H(acc).
 *
 * Which of these llama-server runs for a weight is in docs/kquants.md: Q6_K always takes bk_dot_q6_K_q8_K (no
 * sgemm, no repack on x86); Q4_K with a multiple of 8 rows is repacked (repack.h) and never reaches
 * bk_dot_q4_K_q8_K, which covers the other Q4_K shapes.
 */
#ifndef BK_KQUANTS_H
#define BK_KQUANTS_H
#include <stddef.h>
#include <stdint.h>

#define BK_QK_K 256

typedef struct { float d; int8_t qs[BK_QK_K]; int16_t bsums[BK_QK_K / 16]; } bk_block_q8_K;
typedef struct { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[BK_QK_K / 2]; } bk_block_q4_K;
typedef struct { uint8_t ql[BK_QK_K / 2]; uint8_t qh[BK_QK_K / 4]; int8_t scales[BK_QK_K / 16]; uint16_t d; } bk_block_q6_K;

_Static_assert(sizeof(bk_block_q8_K) == 292, "block_q8_K is 292 bytes");
_Static_assert(sizeof(bk_block_q4_K) == 144, "block_q4_K is 144 bytes");
_Static_assert(sizeof(bk_block_q6_K) == 210, "block_q6_K is 210 bytes");

/* x: float[k] IN; y: k/256 Q8_K blocks OUT. k % 256 == 0. */
void bk_quant_row_q8_K(const float *x, void *y, int64_t k);

/* One dot product of n elements (n % 256 == 0): x the weight row, y the Q8_K activation row. */
float bk_dot_q4_K_q8_K(int n, const void *x, const void *y);
float bk_dot_q6_K_q8_K(int n, const void *x, const void *y);

/* Several weight rows against one activation row: s[r] = dot(x + r*bx, y) for r < nr (same bits as nr calls). */
void bk_dot_q4_K_q8_K_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y);
void bk_dot_q6_K_q8_K_rows(int n, float *s, int nr, const void *x, size_t bx, const void *y);

/* nr Q6_K rows against nc Q8_K activation columns (by bytes apart): s[c*s_col + r] = dot(x + r*bx, y + c*by),
 * the same bits as the single dots; a row's decoded block is shared by four columns. */
void bk_gemm_q6_K_q8_K(int n, float *s, int64_t s_col, int nr, int nc, const void *x, size_t bx, const void *y,
                       size_t by);

#endif
