# src/kernels/norm.h: RMS norm times its weight.

cdef extern from "norm.h" nogil:
    void bk_rms_norm_mul_f32(int n, const float *x, const float *w, float eps, float *y)
