# src/kernels/fp16.h: IEEE half <-> float, bfloat16 <-> float.
from libc.stdint cimport int64_t, uint16_t

cdef extern from "fp16.h" nogil:
    void bk_fp16_to_fp32_row(const uint16_t *x, float *y, int64_t n)
    void bk_bf16_to_fp32_row(const uint16_t *x, float *y, int64_t n)
