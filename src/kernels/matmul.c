/* MUL_MAT drivers; which kernel runs for which weight type and why is in matmul.h. */
#include "matmul.h"
#include "floatdot.h"
#include "fp16.h"
#include "kquants.h"
#include "kquants_q23.h"
#include "kquants_q5k.h"
#include "quants.h"
#include "quants_q5.h"
#include "quants_bonsai.h"
#include "quants_iq4.h"
#include "quants_tq.h"
#include "repack.h"
#include "rows8.h"

#include <string.h>

int bk_matmul_supported(int32_t wtype, int32_t k) {
    switch (wtype) {
    case BK_TYPE_F32: case BK_TYPE_F16: case BK_TYPE_BF16: return k > 0;
    case BK_TYPE_Q4_1: case BK_TYPE_Q8_0: case BK_TYPE_Q5_0: case BK_TYPE_Q5_1: case BK_TYPE_Q4_0:
    case BK_TYPE_IQ4_NL:
        return k > 0 && k % BK_QK == 0;
    case BK_TYPE_IQ4_XS: return k > 0 && k % BK_QK_K == 0;
    case BK_TYPE_Q2_K: case BK_TYPE_Q3_K: case BK_TYPE_Q4_K: case BK_TYPE_Q5_K: case BK_TYPE_Q6_K:
    case BK_TYPE_TQ1_0: case BK_TYPE_TQ2_0:
        return k > 0 && k % BK_QK_K == 0;
    case BK_TYPE_Q1_0: return k > 0 && k % BK_QK1_0 == 0;
    case BK_TYPE_Q2_0: return k > 0 && k % BK_QK2_0 == 0;
    default: return 0;
    }
}

int32_t bk_act_type(int32_t wtype) {
    switch (wtype) {
    case BK_TYPE_Q4_1: case BK_TYPE_Q5_1: return BK_TYPE_Q8_1;
    case BK_TYPE_Q8_0: case BK_TYPE_Q5_0: case BK_TYPE_Q1_0: case BK_TYPE_Q2_0: case BK_TYPE_Q4_0:
    case BK_TYPE_IQ4_NL:
        return BK_TYPE_Q8_0;
    case BK_TYPE_IQ4_XS: return BK_TYPE_Q8_K;
    case BK_TYPE_Q2_K: case BK_TYPE_Q3_K: case BK_TYPE_Q4_K: case BK_TYPE_Q5_K: case BK_TYPE_Q6_K:
    case BK_TYPE_TQ1_0: case BK_TYPE_TQ2_0:
        return BK_TYPE_Q8_K;
    case BK_TYPE_F16: return BK_TYPE_F16;
    case BK_TYPE_BF16: return BK_TYPE_BF16;
    default: return BK_TYPE_F32;
    }
}

size_t bk_act_row_bytes(int32_t act_type, int32_t k) {
    switch (act_type) {
    case BK_TYPE_Q8_1: return (size_t)(k / BK_QK) * sizeof(bk_block_q8_1);
    case BK_TYPE_Q8_0: return (size_t)(k / BK_QK) * sizeof(bk_block_q8_0);
    case BK_TYPE_Q8_K: return (size_t)(k / BK_QK_K) * sizeof(bk_block_q8_K);
    case BK_TYPE_F16: case BK_TYPE_BF16: return (size_t)k * 2;
    default: return (size_t)k * 4;
    }
}

void bk_act_prepare(int32_t act_type, const float *x, int32_t k, void *dst) {
    switch (act_type) {
    case BK_TYPE_Q8_1: bk_quant_row_q8_1(x, dst, k); break;
    case BK_TYPE_Q8_0: bk_quant_row_q8_0(x, dst, k); break;
    case BK_TYPE_Q8_K: bk_quant_row_q8_K(x, dst, k); break;
    case BK_TYPE_F16: bk_fp32_to_fp16_row(x, (uint16_t *)dst, k); break;
    case BK_TYPE_BF16: bk_fp32_to_bf16_row(x, (uint16_t *)dst, k); break;
    default: memcpy(dst, x, (size_t)k * sizeof(float)); break;
    }
}

int64_t bk_matmul_split(int64_t m, int ith, int nth) {
    if (ith >= nth) return m;
    return (m * ith / nth) & ~(int64_t)31;
}

/* out[c*out_col + r] for r0 <= r < r1, c < n, with the kernel for the weight type and n_node */
static void compute(const bk_matrix *W, const uint8_t *a, size_t act_col, int n, int n_node, int64_t r0, int64_t r1,
                    float *out, int64_t out_col) {
    const int k = W->k;
    const size_t rb = W->row_bytes;
    const uint8_t *w = (const uint8_t *)W->data;
    switch (W->type) {
    case BK_TYPE_Q5_0:
        bk_gemm_q5_0_q8_0(k, out + r0, out_col, (int)(r1 - r0), n, w + r0 * rb, rb, a, act_col);
        return;
    case BK_TYPE_Q6_K:
        bk_gemm_q6_K_q8_K(k, out + r0, out_col, (int)(r1 - r0), n, w + r0 * rb, rb, a, act_col);
        return;
    case BK_TYPE_Q2_K:  /* Q2_K / Q3_K: vec_dot per output on AVX2 (kquants_q23.h) */
        bk_gemm_q2_K_q8_K(k, out + r0, out_col, (int)(r1 - r0), n, w + r0 * rb, rb, a, act_col);
        return;
    case BK_TYPE_Q3_K:
        bk_gemm_q3_K_q8_K(k, out + r0, out_col, (int)(r1 - r0), n, w + r0 * rb, rb, a, act_col);
        return;
    case BK_TYPE_TQ1_0:  /* TQ1_0 / TQ2_0: vec_dot per output on AVX2 (quants_tq.h) */
        bk_gemm_tq1_0_q8_K(k, out + r0, out_col, (int)(r1 - r0), n, w + r0 * rb, rb, a, act_col);
        return;
    case BK_TYPE_TQ2_0:
        bk_gemm_tq2_0_q8_K(k, out + r0, out_col, (int)(r1 - r0), n, w + r0 * rb, rb, a, act_col);
        return;
    case BK_TYPE_Q5_K:
        bk_gemm_q5_K_q8_K(k, out + r0, out_col, (int)(r1 - r0), n, w + r0 * rb, rb, a, act_col);
        return;
    case BK_TYPE_Q5_1:
        bk_gemm_q5_1_q8_1(k, out + r0, out_col, (int)(r1 - r0), n, w + r0 * rb, rb, a, act_col);
        return;
    case BK_TYPE_Q4_K:
        if (W->x8) {  /* the node's activations as bk_act_prepare_q4_K_8x8 laid them out (n == n_node) */
            bk_matmul_q4_K_8x8(W->x8, k, a, n, r0, r1, out, out_col);
            return;
        }
        for (int c = 0; c < n; c++)
            bk_dot_q4_K_q8_K_rows(k, out + c * out_col + r0, (int)(r1 - r0), w + r0 * rb, rb, a + c * act_col);
        return;
    case BK_TYPE_Q4_0: case BK_TYPE_IQ4_NL: case BK_TYPE_IQ4_XS: {
        const int q40 = W->type == BK_TYPE_Q4_0;
        if (W->x8) {  /* q4_0_8x8 / iq4_nl_8x8: per-column Q8_0 activations, no dependence on n (repack.h) */
            (q40 ? bk_matmul_q4_0_8x8 : bk_matmul_iq4_nl_8x8)(W->x8, k, a, act_col, n, r0, r1, out, out_col);
            return;
        }
        /* IQ4_NL: vec_dot for one column, sgemm for more; IQ4_XS: the IQ panel gemm from 8 columns on 8k rows */
        float (*dot)(int, const void *, const void *) =
            q40 ? bk_dot_q4_0_q8_0
            : W->type == BK_TYPE_IQ4_XS ? (n_node >= 8 && W->m % 8 == 0 ? bk_dot_iq4_xs_q8_K_panel : bk_dot_iq4_xs_q8_K)
            : n_node < 2 ? bk_dot_iq4_nl_q8_0 : bk_dot_iq4_nl_q8_0_tb;
        for (int c = 0; c < n; c++)
            for (int64_t r = r0; r < r1; r++)
                out[c * out_col + r] = dot(k, w + r * rb, a + c * act_col);
        return;
    }
    }
    if (W->x8 && r0 % 8 == 0) {
        const int64_t m8 = W->m / 8 * 8, e = r1 < m8 ? r1 : m8;
        if (e > r0) {
            bk_x8_matmul(W->type, W->x8, k, r0 / 8, e / 8, a, act_col, n, out, out_col);
            r0 = e;
        }
        if (r0 >= r1) return;
    }
    switch (W->type) {
    case BK_TYPE_F16:
        if (bk_tinyblas_takes(W->m, k, n_node)) {
            bk_gemm_f16_tb(k, (const uint16_t *)w, (int64_t)(rb / 2), r0, r1, (const uint16_t *)a,
                           (int64_t)(act_col / 2), n, out, out_col);
            return;
        }
        break;
    case BK_TYPE_BF16:
        if (bk_tinyblas_takes(W->m, k, n_node)) {
            bk_gemm_bf16_tb(k, (const uint16_t *)w, (int64_t)(rb / 2), r0, r1, (const uint16_t *)a,
                            (int64_t)(act_col / 2), n, out, out_col);
            return;
        }
        break;
    case BK_TYPE_F32:
        if (bk_tinyblas_takes(W->m, k, n_node)) {
            bk_gemm_f32_tb(k, (const float *)w, (int64_t)(rb / 4), r0, r1, (const float *)a, (int64_t)(act_col / 4),
                           n, out, out_col);
            return;
        }
        break;
    }
    /* one vec_dot per output (Q4_1 / Q8_0 rows not regrouped: the same bits as the regrouped kernels) */
    for (int c = 0; c < n; c++) {
        const void *y = a + c * act_col;
        float *o = out + c * out_col;
        const uint8_t *wr = w + r0 * rb;
        const int nr = (int)(r1 - r0);
        switch (W->type) {
        case BK_TYPE_Q4_1: bk_dot_q4_1_q8_1_rows(k, o + r0, nr, wr, rb, y); break;
        case BK_TYPE_Q8_0: bk_dot_q8_0_q8_0_rows(k, o + r0, nr, wr, rb, y); break;
        case BK_TYPE_Q1_0: bk_dot_q1_0_q8_0_rows(k, o + r0, nr, wr, rb, y); break;
        case BK_TYPE_Q2_0: bk_dot_q2_0_q8_0_rows(k, o + r0, nr, wr, rb, y); break;
        case BK_TYPE_F16:
            for (int i = 0; i < nr; i++) o[r0 + i] = bk_dot_f16(k, (const uint16_t *)(wr + i * rb), (const uint16_t *)y);
            break;
        case BK_TYPE_BF16:
            for (int i = 0; i < nr; i++) o[r0 + i] = bk_dot_bf16(k, (const uint16_t *)(wr + i * rb), (const uint16_t *)y);
            break;
        default:
            for (int i = 0; i < nr; i++) o[r0 + i] = bk_dot_f32(k, (const float *)(wr + i * rb), (const float *)y);
            break;
        }
    }
}

void bk_matmul(const bk_matrix *W, const void *act, size_t act_col, int n, int n_node, int64_t r0, int64_t r1,
               float *out, int64_t out_col, const float *res, int64_t res_col) {
    const uint8_t *a = (const uint8_t *)act;
    if (r1 <= r0 || n <= 0) return;
    if (!res) {
        compute(W, a, act_col, n, n_node, r0, r1, out, out_col);
        return;
    }
    /* with a residual (which may be out itself): blocks through a scratch tile, then one add each */
    enum { TR = 64, TC = 32 };
    float tmp[TR * TC];
    for (int64_t rc = r0; rc < r1; rc += TR) {
        const int64_t re = r1 - rc < TR ? r1 : rc + TR;
        for (int c0 = 0; c0 < n; c0 += TC) {
            const int nc = n - c0 < TC ? n - c0 : TC;
            compute(W, a + c0 * act_col, act_col, nc, n_node, rc, re, tmp - rc, TR);
            for (int c = 0; c < nc; c++) {
                float *o = out + (c0 + c) * out_col + rc;
                const float *s = tmp + c * TR, *rs = res + (c0 + c) * res_col + rc;
                for (int64_t i = 0; i < re - rc; i++) o[i] = s[i] + rs[i];
            }
        }
    }
}
