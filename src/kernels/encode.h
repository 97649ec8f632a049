/* Reference encoders: float32 rows -> the block formats llama-quantize b11192 writes when it has no importance
 * matrix (ggml-base's quantize_row_*_ref, reached through ggml_quantize_chunk with quant_weights NULL).
 *
 * Used by `bankml quantize` (bankml.models.quantize) to write derived files byte for byte as llama-quantize does.
 * Every float operation keeps ggml-base's order and rounding: ggml-base is compiled without FMA contraction and
 * without fast-math, and so is this file (BANKML_FP_FLAGS); halves are rounded to nearest even.
 */
#ifndef BK_ENCODE_H
#define BK_ENCODE_H
#include <stdint.h>

/* the formats, by ggml_type number */
enum {
    BK_ENC_Q4_1 = 3, BK_ENC_Q5_0 = 6, BK_ENC_Q5_1 = 7,
    BK_ENC_Q2_K = 10, BK_ENC_Q3_K = 11, BK_ENC_Q4_K = 12, BK_ENC_Q5_K = 13, BK_ENC_Q6_K = 14,
    BK_ENC_IQ4_NL = 20, BK_ENC_IQ4_XS = 23,  /* quants_iq4.c */
};

/* Bytes of one encoded block and elements per block of `type`, or 0 for a type this file does not encode. */
int64_t bk_encode_block_bytes(int type);
int64_t bk_encode_block_elems(int type);

/* Encode n elements of x (n a multiple of the block) into out (n / elems * bytes bytes). Returns 0, or -1 for a
 * type this file does not encode or an n that is not a multiple of the block. */
int bk_encode(int type, const float *x, uint8_t *out, int64_t n);

/* float -> half as ggml-base's GGML_FP32_TO_FP16 (round to nearest even, NaN -> 0x7e00), for other encoders */
uint16_t bk_encode_to_half(float f);

#endif
