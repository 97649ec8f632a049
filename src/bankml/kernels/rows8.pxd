# src/kernels/rows8.h: Q4_1 / Q8_0 matrices regrouped by 8 rows, and which integer lanes run them.
from libc.stdint cimport int32_t, int64_t

cdef extern from "rows8.h" nogil:
    size_t bk_x8_bytes(int32_t wtype, int64_t m, int32_t k)
    void bk_x8_pack(int32_t wtype, const void *w, size_t row_bytes, int32_t k, int64_t g0, int64_t g1, void *dst)
    int bk_x8_uses_vnni()
