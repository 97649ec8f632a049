# Declarations of the C kernels' matmul interface (src/kernels/matmul.h, rows8.h), shared by the Cython modules
# that call it (_forward.pyx, _kernels_shim.pyx). Extern declarations only: there is no _kernels module.
from libc.stdint cimport int32_t, int64_t

cdef extern from "matmul.h" nogil:
    ctypedef struct bk_matrix:
        const void *data
        int32_t type
        int32_t k
        int64_t m
        size_t row_bytes
        const void *x8
    int bk_matmul_supported(int32_t wtype, int32_t k)
    int32_t bk_act_type(int32_t wtype)
    size_t bk_act_row_bytes(int32_t act_type, int32_t k)
    void bk_act_prepare(int32_t act_type, const float *x, int32_t k, void *dst)
    void bk_matmul(const bk_matrix *W, const void *act, size_t act_col, int n, int n_node, int64_t r0, int64_t r1,
                   float *out, int64_t out_col, const float *res, int64_t res_col)

cdef extern from "rows8.h" nogil:
    size_t bk_x8_bytes(int32_t wtype, int64_t m, int32_t k)
    void bk_x8_pack(int32_t wtype, const void *w, size_t row_bytes, int32_t k, int64_t g0, int64_t g1, void *dst)
    int bk_x8_uses_vnni()
