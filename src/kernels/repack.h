/* Repacked Q4_K weights (llama.cpp b11192's CPU_REPACK buffer, ggml-cpu/repack.cpp, arch/x86/repack.cpp) and the
 * kernels that multiply them, in the float order of the AVX2 oracle build.
 *
 * When llama-server loads a Q4_K matrix whose row count (ggml ne[1]) is a multiple of 8, on an AVX2 CPU, it
 * puts it in the CPU_REPACK extra buffer (repacked "q4_K_8x8" at load) and every MUL_MAT with it runs
 * tensor_traits<block_q4_K, 8, 8, Q8_K>::forward_mul_mat instead of ggml_vec_dot_q4_K_q8_K. For a node of n
 * activation columns (tokens):
 *   - columns c < n - n % 4 (only when n >= 4): quantized four at a time by ggml_quantize_mat_q8_K_4x8 into
 *     block_q8_Kx4, multiplied by ggml_gemm_q4_K_8x8_q8_K;
 *   - the other n % 4 columns (all of them when n <= 3): quantized by quantize_row_q8_K (the reference, as
 *     bk_quant_row_q8_K) and multiplied by ggml_gemv_q4_K_8x8_q8_K.
 * Threads split the weight rows in chunks aligned to 8: no effect on any bit.
 *
 * Layouts:
 *   bk_block_q4_Kx8 (1152 bytes): eight Q4_K rows' super-block b interleaved: half d[8], half dmin[8],
 *     uint8 scales[96] = eight 12-byte groups, group s holding sub-block s's scale and min of the 8 rows in
 *     Q4_K's 6-bit packing (row j in place of sub-block j), uint8 qs[1024]: qs[64g + 8j + e] = row j's
 *     qs[8g + e] (g < 16, e < 8). A repacked matrix is m/8 groups of k/256 such blocks, group after group.
 *   bk_block_q8_Kx4 (1168 bytes): four activation rows' super-block: float d[4]; int8 qs[1024] with
 *     qs[32J + 8r + e] = row r's q[8J + e]; int16 bsums[64] with bsums[16t + 4r + u] = sum of row r's q over
 *     elements 64t + 16u .. 64t + 16u + 15.
 *
 * bk_quant_mat_q8_K_4x8 = ggml_quantize_mat_q8_K_4x8 (AVX2): per row and super-block, amax = max |x|;
 *     iscale = -127/amax if some element equals +amax, else 127/amax (0 if amax is 0); q = RNE(fl(x * iscale));
 *     d = fl(1 / iscale) (0 if amax is 0). Only the sign choice can differ from bk_quant_row_q8_K (when +amax
 *     and -amax both occur and -amax comes first), which negates both q and d: no product changes.
 *
 * Per output (weight row c, activation column t), with sc/mn the 6-bit scale and min of c's sub-blocks,
 * D = h(d_c), M = h(dmin_c), y = the activation's Q8_K data, S(s) = sum of y's q over sub-block s:
 * bk_gemv_q4_K_8x8_q8_K = ggml_gemv_q4_K_8x8_q8_K: per super-block b in order, exact integers
 *     I = sum_{s<8} sc[s] * dot32(q4 of sub-block s, y.qs), J = sum_{s<8} mn[s] * S(s);
 *     A = fma((float)I, fl(D * y.d), A); B = fma((float)J, fl(M * y.d), B), from +0; out = fl(A - B).
 * bk_gemm_q4_K_8x8_q8_K = ggml_gemm_q4_K_8x8_q8_K: the same, but one fma per PAIR of sub-blocks: per
 *     super-block b and p = 0..3 in order, I = sc[2p] dot32(2p) + sc[2p+1] dot32(2p+1),
 *     J = mn[2p] S(2p) + mn[2p+1] S(2p+1); A = fma((float)I, fl(D * y.d), A); B = fma((float)J, fl(M * y.d), B);
 *     out = fl(A - B). (So gemm and gemv give different bits for the same inputs.)
 */
#ifndef BK_REPACK_H
#define BK_REPACK_H
#include <stddef.h>
#include <stdint.h>

#include "kquants.h"

typedef struct { uint16_t d[8]; uint16_t dmin[8]; uint8_t scales[96]; uint8_t qs[1024]; } bk_block_q4_Kx8;
typedef struct { float d[4]; int8_t qs[4 * BK_QK_K]; int16_t bsums[64]; } bk_block_q8_Kx4;
_Static_assert(sizeof(bk_block_q4_Kx8) == 1152, "block_q4_Kx8 is 1152 bytes");
_Static_assert(sizeof(bk_block_q8_Kx4) == 1168, "block_q8_Kx4 is 1168 bytes");

/* 1 when llama-server b11192 repacks a Q4_K matrix of m rows of k (AVX2 CPU, default --repack). */
int bk_repack_q4_K_takes(int64_t m, int32_t k);

/* Repack m rows of k Q4_K values (src: the GGUF layout, m*k/256 blocks) into dst (the same number of bytes,
 * not overlapping src). Thread ith of nth does its share of the 8-row groups. Returns 0, or -1 when m % 8 or
 * k % 256 is not 0. */
int bk_repack_q4_K_8x8(const void *src, void *dst, int64_t m, int32_t k, int ith, int nth);

/* Four activation rows (x + r*x_row, r < 4, k floats each; k % 256 == 0) into k/256 block_q8_Kx4. */
void bk_quant_mat_q8_K_4x8(const float *x, int64_t x_row, void *y, int64_t k);

/* The activations of a MUL_MAT node of n columns with a repacked Q4_K weight, as ggml lays them out: column c
 * (x + c*x_col, k floats) lands in the slot dst + c*bk_act_row_bytes_q8_K(k); columns c < n - n % 4 are
 * written in groups of four slots as block_q8_Kx4 (the four rows' super-block b at group + b*1168), the
 * rest as Q8_K rows. Thread ith of nth quantizes its share; a barrier must follow before the matmul. */
size_t bk_act_row_bytes_q8_K(int32_t k);
void bk_act_prepare_q4_K_8x8(const float *x, int64_t x_col, int n, int32_t k, void *dst, int ith, int nth);

/* Weight rows r0 <= c < r1 (multiples of 8) of a repacked matrix w (k values a row) against activations:
 * gemv: one Q8_K row y, s[c] for c in [r0, r1);
 * gemm: n4 (a multiple of 4) columns as block_q8_Kx4 groups, y group after group; s[t*s_col + c]. */
void bk_gemv_q4_K_8x8_q8_K(int32_t k, float *s, const void *w, const void *y, int64_t r0, int64_t r1);
void bk_gemm_q4_K_8x8_q8_K(int32_t k, float *s, int64_t s_col, const void *w, const void *y, int n4,
                           int64_t r0, int64_t r1);

/* The whole node's share: out[t*out_col + c] for t < n, r0 <= c < r1 (multiples of 8), act as
 * bk_act_prepare_q4_K_8x8 wrote it for the same n: gemm for t < n - n % 4 when n >= 4, gemv for the rest. */
void bk_matmul_q4_K_8x8(const void *w, int32_t k, const void *act, int n, int64_t r0, int64_t r1, float *out,
                        int64_t out_col);

/* ---- Q4_0 (the derived Q4_0 SmolLM2 file): repacked "q4_0_8x8" when the row count is a multiple of 8 ----
 * bk_block_q4_0x8 (144 bytes): eight Q4_0 rows' block b: half d[8]; uint8 qs[128] with
 *     qs[64h + 8j + e] = row j's qs[8h + e] ^ 0x88 (h < 2, e < 8): each nibble holds q ^ 8, read as a signed
 *     4-bit value it is q - 8.
 * Activations: quantize_row_q8_0 (x86) for every column (ggml_quantize_mat_q8_0_4x8 for the groups of four
 * gives the same bytes, interleaved), so bk_quant_row_q8_0 rows serve here.
 * ggml_gemv_q4_0_8x8_q8_0 and ggml_gemm_q4_0_8x8_q8_0 (AVX2) compute every output alike: per block b in order,
 *     I = the exact integer dot of the 32 values (q - 8) * y.qs; A = fma((float)I, fl(h(d_c) * h(y.d)), A) from +0.
 * (Not vec_dot's eight lanes: a repacked Q4_0 matrix gives other bits than bk_dot_q4_0_q8_0.) No dependence on
 * the number of columns: gemm and gemv agree. */
typedef struct { uint16_t d[8]; uint8_t qs[128]; } bk_block_q4_0x8;
_Static_assert(sizeof(bk_block_q4_0x8) == 144, "block_q4_0x8 is 144 bytes");

/* 1 when llama-server b11192 repacks a Q4_0 matrix of m rows of k (AVX2 CPU). */
int bk_repack_q4_0_takes(int64_t m, int32_t k);

/* Repack m rows of k Q4_0 values (m % 8 == 0, k % 32 == 0) into dst (same size); thread ith of nth does its
 * share of the 8-row groups. Returns 0, or -1 for a shape that is not repacked. */
int bk_repack_q4_0_8x8(const void *src, void *dst, int64_t m, int32_t k, int ith, int nth);

/* The same interleave for any 18-byte block of a half d and 16 nibble bytes (Q4_0, IQ4_NL: repack.cpp's
 * make_block_q4_0x8 / make_block_iq4_nlx8), each qs byte xor `flip` (0x88 for Q4_0, 0 for IQ4_NL). */
int bk_repack_b32_8x8(const void *src, void *dst, int64_t m, int32_t k, uint8_t flip, int ith, int nth);

/* Weight rows r0 <= c < r1 (multiples of 8) of a repacked Q4_0 matrix against n Q8_0 activation columns
 * (column t at act + t*act_col bytes): out[t*out_col + c]. */
void bk_matmul_q4_0_8x8(const void *w, int32_t k, const void *act, size_t act_col, int n, int64_t r0, int64_t r1,
                        float *out, int64_t out_col);

#endif
