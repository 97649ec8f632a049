/* The two 4-bit non-linear weight types, IQ4_NL and IQ4_XS: their encoders (as llama-quantize b11192 writes them
 * without an importance matrix), their decoders (GET_ROWS) and their MUL_MAT kernels on the AVX2 oracle build.
 *
 * The sixteen levels (ggml-common.h kvalues_iq4nl), an int8 table, ascending:
 *     K = -127 -104 -83 -65 -49 -35 -22 -10 1 13 25 38 53 69 89 113
 *
 * IQ4_NL block (18 bytes, 32 elements): half d; uint8 qs[16]; element i < 16 is K[qs[i] & 15] * h(d), element
 *     i + 16 is K[qs[i] >> 4] * h(d) (dequantize_row_iq4_nl: fl(h(d) * K)).
 * IQ4_XS block (136 bytes, 256 elements): half d; uint16 scales_h; uint8 scales_l[4]; uint8 qs[128]; sub-block
 *     s < 8 (32 elements, qs + 16s laid out as IQ4_NL's) has the 6-bit scale ls = (nibble s of scales_l, low
 *     first) | (bits 2s, 2s+1 of scales_h) << 4 and dl = fl(h(d) * (ls - 32)); x = fl(dl * K).
 *
 * Encoding (ggml-quants.c quantize_iq4_nl / quantize_iq4_xs, reached from ggml_quantize_chunk with no importance
 * matrix: quantize_row_iq4_nl_impl with 7 tries), per 32-element block, float32, no FMA, sums in element order:
 *     weights w = x * x; the first element of largest |x| is `max` (a block under 1e-15 gets scale 0); the start
 *     scale is fl(-max / -127) and levels are picked by the nearest level to fl(x / scale) (bisection; a tie goes
 *     up, NaN to the top level); with q = K[level]: Sqx = sum fl(fl(w q) x), Sqq = sum fl(fl(w q) q),
 *     d = Sqq > 0 ? Sqx / Sqq : 0, best = d Sqx; then for t = -7..7 the levels for the inverse scale
 *     fl((t - 127) / max) replace d when Sqq > 0 and fl(Sqx Sqx) > fl(best Sqq) (d = Sqx / Sqq, best = d Sqx).
 *     IQ4_NL stores h(d) and re-picks every level for fl(x * (d ? 1/d : 0)).
 *     IQ4_XS: D = fl(-m / 32) with m the first block scale of largest |d|, stored h(D); each block's
 *     l = clamp(round-half-even(fl(d_b * (D ? 1/D : 0))), -32, 31), dl = fl(D * l), levels re-picked for
 *     fl(x * (dl ? 1/dl : 0)), ls = l + 32.
 *
 * MUL_MAT (ggml-cpu b11192, AVX2, no AVX-512):
 *   IQ4_NL, activation Q8_0 (quantize_row_q8_0). A matrix whose row count is a multiple of 8 is repacked at load
 *     (CPU_REPACK iq4_nl_8x8, repack.cpp: the first choice for IQ4_NL on an AVX2 CPU); llama-server then runs
 *     ggml_gemv_iq4_nl_8x8_q8_0 / ggml_gemm_iq4_nl_8x8_q8_0, the Q4_0 8x8 kernels with the K table in place of
 *     the signed-nibble table: per output, per block b in order, I = the exact integer sum of K * y.qs,
 *     A = fma((float)I, fl(h(d_row) * h(y.d)), A) from +0, no horizontal sum, for any column count.
 *     Other row counts, a node of 2 or more columns: llamafile's sgemm takes IQ4_NL (tinyBLAS_Q0_AVX): eight
 *     float lanes per output, lane j = fma(fl(h(x.d) * h(y.d)), (float)(exact sum of elements 4j..4j+3), lane j)
 *     per block in order, then hsum_float_8. One column (sgemm declines n < 2): ggml_vec_dot_iq4_nl_q8_0, the
 *     same lanes in two accumulators, even blocks and odd blocks (pairs of blocks while two remain), summed
 *     lane by lane, then hsum_float_8; a last odd block adds fma(fl(h(y.d) * h(x.d)), (float)(its exact integer
 *     sum), s) in C (fma-contracted, as the build compiles it).
 *   IQ4_XS, activation Q8_K (quantize_row_q8_K): neither repack nor sgemm takes it on x86.
 *     A node of 8 or more columns on a matrix of a multiple of 8 rows runs ggml-cpu's IQ panel gemm (iqp.cpp:
 *     8 rows decoded to int8 levels and 16-element sub-block scales, an integer gemm against the Q8_K
 *     columns): per output, per super-block in order, I = the exact integer sum of (ls - 32) * K * y.qs over its
 *     256 elements, A = fma((float)I, fl(h(x.d) * y.d), A) from +0, no horizontal sum (bk_dot_iq4_xs_q8_K_panel).
 *     Otherwise ggml_vec_dot_iq4_xs_q8_K per output: per super-block in order, eight int32 lanes, lane j = the
 *     exact sum over the 8 sub-blocks of (ls - 32) * (sum of K * y.qs over elements 4j..4j+3 of the
 *     sub-block), then acc_j = fma(fl(h(x.d) * y.d), (float)lane_j, acc_j) from +0; result hsum_float_8(acc).
 */
#ifndef BK_QUANTS_IQ4_H
#define BK_QUANTS_IQ4_H
#include <stddef.h>
#include <stdint.h>

typedef struct { uint16_t d; uint8_t qs[16]; } bk_block_iq4_nl;
_Static_assert(sizeof(bk_block_iq4_nl) == 18, "block_iq4_nl is 18 bytes");
typedef struct { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; } bk_block_iq4_xs;
_Static_assert(sizeof(bk_block_iq4_xs) == 136, "block_iq4_xs is 136 bytes");

/* Encode one block: 32 floats into an IQ4_NL block / 256 floats into an IQ4_XS block (bytes OUT). */
void bk_iq4_encode_nl(const float *x, uint8_t *out);
void bk_iq4_encode_xs(const float *x, uint8_t *out);

/* k elements (k % 32 / k % 256 == 0) of a row decoded into y (float[k] OUT). */
void bk_dequant_row_iq4_nl(const void *x, float *y, int64_t k);
void bk_dequant_row_iq4_xs(const void *x, float *y, int64_t k);

/* One IQ4_NL row of n elements against one Q8_0 row: ggml_vec_dot_iq4_nl_q8_0's order (a node of one column) and
 * tinyBLAS_Q0_AVX's (sgemm: a node of two or more). */
float bk_dot_iq4_nl_q8_0(int n, const void *x, const void *y);
float bk_dot_iq4_nl_q8_0_tb(int n, const void *x, const void *y);

/* One IQ4_XS row of n elements (n % 256 == 0) against one Q8_K row: ggml_vec_dot_iq4_xs_q8_K's order, and the IQ
 * panel gemm's (a node of 8 or more columns, m % 8 == 0). */
float bk_dot_iq4_xs_q8_K(int n, const void *x, const void *y);
float bk_dot_iq4_xs_q8_K_panel(int n, const void *x, const void *y);

/* 1 when llama-server b11192 repacks an IQ4_NL matrix of m rows of k (AVX2 CPU): m % 8 == 0, k % 32 == 0. */
int bk_repack_iq4_nl_takes(int64_t m, int32_t k);

/* Repack m rows of k IQ4_NL values into dst (same size) as iq4_nl_8x8: repack.h's Q4_0 layout, nibbles kept as
 * they are; thread ith of nth does its share of the 8-row groups. Returns 0, or -1 for a shape not repacked. */
int bk_repack_iq4_nl_8x8(const void *src, void *dst, int64_t m, int32_t k, int ith, int nth);

/* Weight rows r0 <= c < r1 (multiples of 8) of a repacked IQ4_NL matrix against n Q8_0 activation columns
 * (column t at act + t*act_col bytes): out[t*out_col + c]. */
void bk_matmul_iq4_nl_8x8(const void *w, int32_t k, const void *act, size_t act_col, int n, int64_t r0, int64_t r1,
                          float *out, int64_t out_col);

#endif
