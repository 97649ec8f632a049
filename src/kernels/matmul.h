/* MUL_MAT of a weight matrix by activation columns, with the kernel llama.cpp b11192 picks for each weight type
 * on the AVX2 oracle build (ggml-cpu.c `ggml_compute_forward_mul_mat`, llamafile/sgemm.cpp, type_traits_cpu):
 *
 *   weight  activation (vec_dot_type)       n = 1                    n >= 2
 *   Q4_1    Q8_1 (quantize_row_q8_1, x86)   ggml_vec_dot_q4_1_q8_1   the same vec_dot per output (sgemm has no
 *                                                                    Q4_1 case; repack does not take Q4_1)
 *   Q8_0    Q8_0 (quantize_row_q8_0, x86)   ggml_vec_dot_q8_0_q8_0   tinyBLAS_Q0_AVX: the same arithmetic per
 *                                                                    element (fl(dA*dB), fma into 8 lanes, hsum)
 *   F16     F16 (fp32_to_fp16, RNE)         ggml_vec_dot_f16         tinyBLAS<8> F16 order if m%4 == 0, k%8 == 0
 *   F32     F32                             ggml_vec_dot_f32         tinyBLAS<8> F32 order if m%4 == 0, k%8 == 0
 *   BF16    BF16 (fp32_to_bf16, RNE)        ggml_vec_dot_bf16        tinyBLAS<8> BF16 order if m%4 == 0, k%8 == 0
 * (float orders: quants.h and floatdot.h). Q8_0 is not repacked on x86 in b11192 (repack.cpp only takes it on
 * ARM / RISC-V), so the file layout is what the kernels read.
 *
 * Gemma 3's types (kquants.h, quants_q5.h, repack.h for the kernels and docs/kquants.md for the dispatch):
 *   Q5_0    Q8_0                            ggml_vec_dot_q5_0_q8_0   tinyBLAS_Q0_AVX: the same bits per output
 *   Q6_K    Q8_K (quantize_row_q8_K)        ggml_vec_dot_q6_K_q8_K per output
 *   Q4_K    Q8_K                            vec_dot, or with x8 set (the CPU_REPACK q4_K_8x8 layout, m % 8 ==
 *                                           0): gemv for n < 4, else gemm over the first n - n%4 columns and
 *                                           gemv for the rest; its activations are then laid out for the
 *                                           whole node by bk_act_prepare_q4_K_8x8 (not bk_act_prepare), and
 *                                           bk_matmul must get all n columns of the node, rows split by 8.
 *   Q2_K    Q8_K                            ggml_vec_dot_q2_K_q8_K per output (repacked only with AVX-512)
 *   Q3_K    Q8_K                            ggml_vec_dot_q3_K_q8_K per output (kquants_q23.h)
 *   Q4_0    Q8_0                            with x8 set (CPU_REPACK q4_0_8x8, m % 8 == 0): the repacked gemv /
 *                                           gemm (the same bits for any n, rows split by 8); else
 *                                           ggml_vec_dot_q4_0_q8_0 per output (tinyBLAS_Q0_AVX: the same bits)
 *
 * The 4-bit non-linear types (quants_iq4.h):
 *   IQ4_NL  Q8_0                            with x8 set (CPU_REPACK iq4_nl_8x8, m % 8 == 0): the repacked gemv /
 *                                           gemm (the same bits for any n); else n = 1: ggml_vec_dot_iq4_nl_q8_0,
 *                                           n >= 2: tinyBLAS_Q0_AVX per output (other bits)
 *   IQ4_XS  Q8_K                            n >= 8 and m % 8 == 0: ggml-cpu's IQ panel gemm (iqp.cpp); else
 *                                           ggml_vec_dot_iq4_xs_q8_K per output (no repack, no sgemm on x86)
 *
 * The Bonsai types (quants_bonsai.h): neither sgemm nor repack takes them on x86, so any n:
 *   Q1_0    Q8_0                            ggml_vec_dot_q1_0_q8_0 (AVX2) per output
 *   Q2_0    Q8_0                            ggml_vec_dot_q2_0_q8_0 (the generic C, fma-contracted) per output
 * The ternary types (quants_tq.h): no sgemm case, no repack, so any n:
 *   TQ1_0   Q8_K                            ggml_vec_dot_tq1_0_q8_K (AVX2) per output
 *   TQ2_0   Q8_K                            ggml_vec_dot_tq2_0_q8_K (AVX2) per output
 * `n` is the number of activation columns of the whole MUL_MAT node, which decides the kernel; a caller that
 * splits the columns must still pass the node's n as n_node.
 */
#ifndef BK_MATMUL_H
#define BK_MATMUL_H
#include <stddef.h>
#include <stdint.h>

/* ggml type ids of the weight and activation types handled here */
enum bk_type {
    BK_TYPE_F32 = 0,
    BK_TYPE_F16 = 1,
    BK_TYPE_Q4_0 = 2,
    BK_TYPE_Q4_1 = 3,
    BK_TYPE_Q5_0 = 6,
    BK_TYPE_Q5_1 = 7,
    BK_TYPE_Q8_0 = 8,
    BK_TYPE_Q8_1 = 9,
    BK_TYPE_Q2_K = 10,
    BK_TYPE_Q3_K = 11,
    BK_TYPE_Q4_K = 12,
    BK_TYPE_Q5_K = 13,
    BK_TYPE_Q6_K = 14,
    BK_TYPE_Q8_K = 15,
    BK_TYPE_IQ4_NL = 20,
    BK_TYPE_IQ4_XS = 23,
    BK_TYPE_BF16 = 30,
    BK_TYPE_TQ1_0 = 34,
    BK_TYPE_TQ2_0 = 35,
    BK_TYPE_Q1_0 = 41,
    BK_TYPE_Q2_0 = 42,
};

typedef struct bk_matrix {
    const void *data;  /* m rows of k elements, row r at data + r*row_bytes (the GGUF layout, in the mmap) */
    int32_t type;      /* enum bk_type: F32, F16, Q4_1 or Q8_0 */
    int32_t k;         /* elements per row (ggml ne0): the inner length */
    int64_t m;         /* rows (ggml ne1): the outputs */
    size_t row_bytes;
    const void *x8;    /* NULL, or Q4_1 / Q8_0 rows 0 .. m/8*8-1 regrouped by 8 (rows8.h): same bits, faster;
                        * Q4_K: the whole matrix repacked as q4_K_8x8 (repack.h): llama-server's bits;
                        * Q4_0: the whole matrix repacked as q4_0_8x8 (repack.h), likewise;
                        * IQ4_NL: the whole matrix repacked as iq4_nl_8x8 (quants_iq4.h), likewise */
} bk_matrix;

/* 1 when the weight type is one of those above with k a multiple of its block size. */
int bk_matmul_supported(int32_t wtype, int32_t k);

/* The activation type a weight type's dot products take (ggml's vec_dot_type), and its row size in bytes. */
int32_t bk_act_type(int32_t wtype);
size_t bk_act_row_bytes(int32_t act_type, int32_t k);

/* One activation row x (float[k] IN) into dst (bk_act_row_bytes(act_type, k) bytes OUT), as ggml's from_float. */
void bk_act_prepare(int32_t act_type, const float *x, int32_t k, void *dst);

/* Row ranges given to threads start at multiples of 32 (regrouped rows stay whole; a share of a 32-element
 * quantization block never splits): rows
 * [bk_matmul_split(m, ith, nth), bk_matmul_split(m, ith + 1, nth)) are thread ith's share. */
int64_t bk_matmul_split(int64_t m, int ith, int nth);

/* Outputs r0 <= r < r1 of the columns c < n: out[c*out_col + r] = dot(W row r, act column c), plus
 * res[c*res_col + r] when res is not NULL (the residual ADD, one rounding after the dot; res may be out).
 * act: n columns of bk_act_row_bytes(bk_act_type(W->type), W->k) bytes each, act_col bytes apart.
 * n_node: the activation columns of the whole MUL_MAT (decides vec_dot or tinyBLAS for F16 / BF16 / F32). */
void bk_matmul(const bk_matrix *W, const void *act, size_t act_col, int n, int n_node, int64_t r0, int64_t r1,
               float *out, int64_t out_col, const float *res, int64_t res_col);

#endif
