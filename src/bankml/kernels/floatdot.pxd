# src/kernels/floatdot.h: F16 / F32 dot products (vec_dot or tinyBLAS, and which one ggml takes).
from libc.stdint cimport int64_t

cdef extern from "floatdot.h" nogil:
    int bk_tinyblas_takes(int64_t m, int64_t k, int64_t n)
