# src/kernels/kquants.h: K-quants (Q8_K activations, Q4_K and Q6_K dot products).
from libc.stdint cimport int64_t

cdef extern from "kquants.h" nogil:
    void bk_quant_row_q8_K(const float *x, void *y, int64_t k)
