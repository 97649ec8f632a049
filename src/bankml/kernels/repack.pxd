# src/kernels/repack.h: repacked Q4_K / Q4_0 weights (when llama.cpp's AVX2 build repacks) and their activations.
from libc.stdint cimport int64_t

cdef extern from "repack.h" nogil:
    int bk_repack_q4_K_takes(int64_t m, int k)
    int bk_repack_q4_0_takes(int64_t m, int k)
    void bk_quant_mat_q8_K_4x8(const float *x, int64_t x_row, void *y, int64_t k)
