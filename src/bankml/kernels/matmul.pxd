# src/kernels/matmul.h: the weight matrix view and the MUL_MAT kernels (ggml's choice of kernel per weight type
# and column count; the float orders are in the header).
from libc.stdint cimport int32_t, int64_t

cdef extern from "matmul.h" nogil:
    ctypedef struct bk_matrix:
        const void *data
        int32_t type
        int32_t k
        int64_t m
        size_t row_bytes
        const void *x8
    int BK_TYPE_F32, BK_TYPE_F16, BK_TYPE_Q4_1, BK_TYPE_Q8_0, BK_TYPE_Q8_1, BK_TYPE_Q5_0, BK_TYPE_Q4_K, BK_TYPE_Q6_K
    int bk_matmul_supported(int32_t wtype, int32_t k)
    int32_t bk_act_type(int32_t wtype)
    size_t bk_act_row_bytes(int32_t act_type, int32_t k)
    void bk_act_prepare(int32_t act_type, const float *x, int32_t k, void *dst)
    int64_t bk_matmul_split(int64_t m, int ith, int nth)
    void bk_matmul(const bk_matrix *W, const void *act, size_t act_col, int n, int n_node, int64_t r0, int64_t r1,
                   float *out, int64_t out_col, const float *res, int64_t res_col)
