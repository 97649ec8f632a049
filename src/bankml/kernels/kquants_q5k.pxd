# src/kernels/kquants_q5k.h: the K-quant rows as floats (GET_ROWS of a K-quant token embedding table).
from libc.stdint cimport int64_t

cdef extern from "kquants_q5k.h" nogil:
    void bk_dequant_row_q4_K(const void *x, float *y, int64_t k)
    void bk_dequant_row_q5_K(const void *x, float *y, int64_t k)
    void bk_dequant_row_q6_K(const void *x, float *y, int64_t k)
