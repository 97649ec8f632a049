# cython: language_level=3
"""float32 rows -> the block formats llama-quantize writes without an importance matrix (src/kernels/encode.c):
Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (and IQ4_NL, IQ4_XS: quants_iq4.c), by ggml_type number. Used by bankml.models.quantize.

    encode(ggml_type, x)   # x: C-contiguous float32[n_rows, n_per_row] -> uint8[n_rows, row_bytes]
    block_layout(ggml_type) -> (elements, bytes) per block, or None when this module does not encode the type
"""

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t

from bankml.kernels.encode cimport bk_encode, bk_encode_block_bytes, bk_encode_block_elems

cnp.import_array()


def block_layout(int gtype):
    cdef int64_t e = bk_encode_block_elems(gtype)
    return None if e == 0 else (int(e), int(bk_encode_block_bytes(gtype)))


def encode(int gtype, x):
    cdef cnp.ndarray[cnp.float32_t, ndim=2, mode="c"] a = np.ascontiguousarray(x, dtype=np.float32)
    cdef int64_t e = bk_encode_block_elems(gtype), b = bk_encode_block_bytes(gtype)
    cdef int64_t rows = a.shape[0], n = a.shape[1], total
    if e == 0:
        raise ValueError(f"ggml type {gtype} is not encoded here")
    if n % e:
        raise ValueError(f"{n} elements per row is not a multiple of the block ({e})")
    out = np.empty((rows, n // e * b), dtype=np.uint8)
    cdef cnp.ndarray[cnp.uint8_t, ndim=2, mode="c"] o = out
    total = rows * n
    cdef int rc
    if total:
        with nogil:
            rc = bk_encode(gtype, &a[0, 0], &o[0, 0], total)
        if rc:
            raise ValueError("encode failed")
    return out
