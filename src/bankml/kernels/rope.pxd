# src/kernels/rope.h: RoPE NORMAL (its cos/sin cache and the rotation).
from libc.stdint cimport int32_t, int64_t

cdef extern from "rope.h" nogil:
    float bk_rope_theta_scale(float freq_base, int n_rot)
    void bk_rope_cache(int32_t pos, int n_rot, float theta_scale, float *cache)
    void bk_rope_normal(float *x, int n_head, int64_t head_stride, int n_rot, const float *cache)
