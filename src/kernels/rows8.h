/* Q4_1 and Q8_0 weights regrouped by 8 rows (a copy made once at open), and their matmul kernels: the same bits
 * as ggml's vec_dot per output (quants.h), with the work of 8 rows in one register.
 *
 * ggml keeps, per output row, eight float lanes acc_j (lane j takes the integer sum I_j of elements 4j..4j+3 of
 * each block: acc_j = fma(dd, I_j, acc_j) block after block), and ends with H(acc) = ((a0+a4)+(a2+a6)) +
 * ((a1+a5)+(a3+a7)) (+ summs for Q4_1). Here register j holds lane j of 8 rows side by side: the 4-byte groups
 * j of the 8 rows are stored next to each other, so one vpdpbusd (or vpmaddubsw + vpmaddwd) against the
 * activation's group j broadcast gives I_j of all 8 rows at once; dd of the 8 rows is one multiply of their
 * widened scales by the activation's; summs of the 8 rows is one fma. H becomes vertical additions in the same
 * order. Every row's lanes see exactly ggml's operations in ggml's order: the layout changes, not the arithmetic.
 *
 * Layouts, per group of 8 rows g and block b (blocks of a group contiguous, groups contiguous):
 *   Q4_1x8 (160 bytes = 8 x 20): half d[8]; half m[8]; uint8 q[4][8][4]: q[c][r][i] = qs_r[4c + i], whose low
 *          nibbles are elements 4c+i (lane c) and high nibbles elements 16+4c+i (lane c+4)
 *   Q8_0x8 (272 bytes = 8 x 34): half d[8]; int8 q[8][8][4]: q[j][r][i] = qs_r[4j + i]; when the VNNI lanes
 *          run (bk_x8_uses_vnni), stored as the unsigned byte qs + 128, and vpdpbusd starts from
 *          -128 * (sum of the activation's 4 bytes): the same exact integer as ggml's sign trick
 * Rows past the last multiple of 8 stay in the file layout (the caller runs them with quants.h's dot products).
 */
#ifndef BK_ROWS8_H
#define BK_ROWS8_H
#include <stddef.h>
#include <stdint.h>

#define BK_X8_Q4_1_BLOCK 160
#define BK_X8_Q8_0_BLOCK 272

/* Bytes of the regrouped copy of the first m/8*8 rows of a matrix of m rows of k elements (wtype 3 or 8). */
size_t bk_x8_bytes(int32_t wtype, int64_t m, int32_t k);

/* Regroup row groups g0 <= g < g1 of w (rows of row_bytes) into dst (bk_x8_bytes). wtype: 3 (Q4_1), 8 (Q8_0). */
void bk_x8_pack(int32_t wtype, const void *w, size_t row_bytes, int32_t k, int64_t g0, int64_t g1, void *dst);

/* Which integer lanes run: 1 for vpdpbusd (AVX512-VNNI + VL), 0 for vpmaddubsw + vpmaddwd, chosen once per
 * process; BANKML_NO_VNNI=1 in the environment forces 0. Both give the same integers (simd_common.h). */
int bk_x8_uses_vnni(void);

/* out[c*out_col + r] = dot(row r, column c) for rows 8*g0 <= r < 8*g1 and columns c < n, from the regrouped
 * copy x8; act: columns of Q8_1 (Q4_1) or Q8_0 blocks, act_col bytes apart. */
void bk_x8_matmul(int32_t wtype, const void *x8, int32_t k, int64_t g0, int64_t g1, const void *act, size_t act_col,
                  int n, float *out, int64_t out_col);

#endif
