# src/kernels/encode.h: llama-quantize's reference encoders (float32 rows -> blocks).
from libc.stdint cimport int64_t, uint8_t

cdef extern from "encode.h" nogil:
    int64_t bk_encode_block_bytes(int type)
    int64_t bk_encode_block_elems(int type)
    int bk_encode(int type, const float *x, uint8_t *out, int64_t n)
