# src/kernels/quants.h: block formats, activation quantization and dequantization of rows.
from libc.stdint cimport int64_t

cdef extern from "quants.h" nogil:
    void bk_quant_row_q8_0(const float *x, void *y, int64_t k)
    void bk_dequant_row_q8_0(const void *x, float *y, int64_t k)
    void bk_dequant_row_q4_1(const void *x, float *y, int64_t k)
