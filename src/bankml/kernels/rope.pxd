# src/kernels/rope.h: RoPE NORMAL and NEOX (its cos/sin cache and the rotations), the K-cache shift.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t

cdef extern from "rope.h" nogil:
    float bk_rope_theta_scale(float freq_base, int n_rot)
    void bk_rope_cache(int32_t pos, int n_rot, float theta_scale, float *cache)
    void bk_rope_normal(float *x, int n_head, int64_t head_stride, int n_rot, const float *cache)
    void bk_rope_neox(float *x, int n_head, int64_t head_stride, int n_rot, const float *cache)
    void bk_rope_shift_f16(uint16_t *k, uint32_t n_cells, int64_t cell_stride, int n_head_kv, int hd, int n_rot,
                           int neox, float theta_scale, const int32_t *shift, float *cache)
    int bk_rope_shift_q8_0(uint8_t *k, uint32_t n_cells, int64_t cell_bytes, int n_head_kv, int hd, int n_rot,
                           int neox, int rot_k, float theta_scale, const int32_t *shift, float *row, float *cache)
