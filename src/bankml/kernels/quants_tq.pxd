# src/kernels/quants_tq.h: the ternary rows as floats (GET_ROWS of a TQ1_0 / TQ2_0 token embedding table).
from libc.stdint cimport int64_t

cdef extern from "quants_tq.h" nogil:
    void bk_dequant_row_tq1_0(const void *x, float *y, int64_t k)
    void bk_dequant_row_tq2_0(const void *x, float *y, int64_t k)
