# src/kernels/attention.h: flash attention over an F16 or Q8_0 KV cache and the Hadamard rotation.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t

cdef extern from "attention.h" nogil:
    int BK_ATTN_ONE_CHUNK, BK_ATTN_TILED, BK_ATTN_SPLIT_KV
    ctypedef struct bk_attn_f16_args:
        int32_t n_tokens, n_head, n_head_kv, dk, dv, n_kv
        float scale
        int32_t oracle_nth
        const float *q
        int64_t q_row, q_head
        const uint16_t *k
        int64_t k_cell, k_head
        const uint16_t *v
        int64_t v_cell, v_head
        const uint16_t *mask
        int64_t mask_row
        float *out
        int64_t out_row, out_head
        float *scratch
        int32_t multi_stream
        int32_t n_stream, stream
    int bk_attn_f16_path(int32_t n_tokens, int32_t n_kv, int32_t dv)
    int bk_attn_f16_path_streams(int32_t n_tokens, int32_t n_kv, int32_t dv, int32_t multi_stream)
    size_t bk_attn_f16_scratch_floats(int32_t n_head, int32_t dk, int32_t dv, int32_t oracle_nth, int32_t nth)
    int bk_attn_f16_check(const bk_attn_f16_args *a)
    void bk_attn_f16(const bk_attn_f16_args *a, int ith, int nth)
    void bk_attn_f16_reduce(const bk_attn_f16_args *a, int ith, int nth)
    void bk_attn_f16_serial(const bk_attn_f16_args *a)
    ctypedef struct bk_attn_q8_0_args:   # as the F16 args, K and V in bytes of Q8_0 blocks
        int32_t n_tokens, n_head, n_head_kv, dk, dv, n_kv
        float scale
        const float *q
        const uint8_t *k
        const uint8_t *v
        const uint16_t *mask
        float *out
        float *scratch
        int64_t q_row, q_head, k_cell, k_head, v_cell, v_head, mask_row, out_row, out_head
    void bk_hadamard_rows(float *x, int64_t n_rows, int n, int64_t row_stride, int ith, int nth)
    int bk_attn_rot_k_size(int32_t dk)
    size_t bk_attn_q8_0_scratch_floats(int32_t n_head, int32_t dk, int32_t dv, int32_t nth)
    int bk_attn_q8_0_check(const bk_attn_q8_0_args *a)
    void bk_attn_q8_0(const bk_attn_q8_0_args *a, int ith, int nth)
