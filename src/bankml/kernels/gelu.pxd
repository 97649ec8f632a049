# src/kernels/gelu.h: GELU (tanh form, ggml's F16 table lookup) and GEGLU.
from libc.stdint cimport uint16_t

cdef extern from "gelu.h" nogil:
    void bk_gelu_table_f16(uint16_t *out)
