# cython: language_level=3
"""Unicode tables and UTF-8 conversion with llama.cpp b11192's semantics (src/unicode.cpp).

Owns: the per-codepoint flag table (categories \\p{N} \\p{L} ... plus whitespace/lower/upper/NFD bits) that
llama.cpp builds from its unicode-data tables, `unicode_tolower`, and its UTF-8 decoder: a byte that does not
start a complete sequence becomes U+FFFD and the decoder moves on by one byte; overlong forms and encoded
surrogates decode to their (invalid) codepoints; 4-byte forms up to 0x1FFFFF are accepted. The encoder refuses
codepoints above 0x10FFFF (llama.cpp throws "invalid codepoint").
"""

from libc.stdint cimport uint8_t, uint16_t, uint32_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
import struct

cdef uint16_t *_flags = NULL
cdef uint32_t *_lower = NULL      # pairs (cpt, lower), sorted by cpt
cdef Py_ssize_t _n_lower = 0

MAX_CODEPOINTS = 0x110000


def load_tables(bytes data):
    """Install the tables from unicode_tables.bin (see testing/gen_unicode_tables.py for the layout)."""
    global _flags, _lower, _n_lower
    if data[:4] != b"BKUT" or struct.unpack_from("<I", data, 4)[0] != 1:
        raise ValueError("unicode_tables.bin: bad magic or version")
    cdef Py_ssize_t pos = 8, i, n_runs, n_lower
    n_runs = struct.unpack_from("<I", data, pos)[0]
    pos += 4
    starts = struct.unpack_from(f"<{n_runs}I", data, pos)
    pos += 4 * n_runs
    run_flags = struct.unpack_from(f"<{n_runs}H", data, pos)
    pos += 2 * n_runs
    n_lower = struct.unpack_from("<I", data, pos)[0]
    pos += 4
    pairs = struct.unpack_from(f"<{2 * n_lower}I", data, pos)
    if pos + 8 * n_lower != len(data) or starts[0] != 0:
        raise ValueError("unicode_tables.bin: inconsistent sizes")
    cdef uint16_t *flags = <uint16_t *>malloc(MAX_CODEPOINTS * sizeof(uint16_t))
    cdef uint32_t *lower = <uint32_t *>malloc((2 * n_lower + 1) * sizeof(uint32_t))
    if flags == NULL or lower == NULL:
        free(flags)
        free(lower)
        raise MemoryError()
    cdef uint32_t a, b, c
    cdef uint16_t f
    for i in range(n_runs):
        a = starts[i]
        b = starts[i + 1] if i + 1 < n_runs else MAX_CODEPOINTS
        f = run_flags[i]
        for c in range(a, b):
            flags[c] = f
    for i in range(2 * n_lower):
        lower[i] = pairs[i]
    free(_flags)
    free(_lower)
    _flags = flags
    _lower = lower
    _n_lower = n_lower


def tables_loaded():
    return _flags != NULL


cdef const uint16_t *flags_table() noexcept nogil:
    return _flags


cdef uint32_t to_lower(uint32_t cpt) noexcept nogil:
    # binary search in the sorted (cpt, lower) pairs; codepoints without a mapping are their own lowercase
    cdef Py_ssize_t lo = 0, hi = _n_lower, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if _lower[2 * mid] < cpt:
            lo = mid + 1
        else:
            hi = mid
    if lo < _n_lower and _lower[2 * lo] == cpt:
        return _lower[2 * lo + 1]
    return cpt


cdef inline bint _cont(uint8_t b) noexcept nogil:
    return (b & 0xC0) == 0x80


cdef Py_ssize_t decode_utf8(const uint8_t *s, Py_ssize_t n, uint32_t *out) noexcept nogil:
    # out must hold n codepoints; returns how many were written
    cdef Py_ssize_t i = 0, k = 0
    cdef uint8_t b
    while i < n:
        b = s[i]
        if b < 0x80:
            out[k] = b
            i += 1
        elif (b & 0x40) == 0:
            out[k] = REPLACEMENT
            i += 1
        elif (b & 0x20) == 0:
            if i + 1 < n and _cont(s[i + 1]):
                out[k] = ((b & 0x1F) << 6) | (s[i + 1] & 0x3F)
                i += 2
            else:
                out[k] = REPLACEMENT
                i += 1
        elif (b & 0x10) == 0:
            if i + 2 < n and _cont(s[i + 1]) and _cont(s[i + 2]):
                out[k] = ((b & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F)
                i += 3
            else:
                out[k] = REPLACEMENT
                i += 1
        elif (b & 0x08) == 0:
            if i + 3 < n and _cont(s[i + 1]) and _cont(s[i + 2]) and _cont(s[i + 3]):
                out[k] = (((b & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6)
                          | (s[i + 3] & 0x3F))
                i += 4
            else:
                out[k] = REPLACEMENT
                i += 1
        else:
            out[k] = REPLACEMENT
            i += 1
        k += 1
    return k


cdef int encode_cpt(uint32_t cpt, uint8_t *out) noexcept nogil:
    # bytes written (1..4), or -1 for a codepoint above 0x10FFFF
    if cpt <= 0x7F:
        out[0] = <uint8_t>cpt
        return 1
    if cpt <= 0x7FF:
        out[0] = 0xC0 | ((cpt >> 6) & 0x1F)
        out[1] = 0x80 | (cpt & 0x3F)
        return 2
    if cpt <= 0xFFFF:
        out[0] = 0xE0 | ((cpt >> 12) & 0x0F)
        out[1] = 0x80 | ((cpt >> 6) & 0x3F)
        out[2] = 0x80 | (cpt & 0x3F)
        return 3
    if cpt <= 0x10FFFF:
        out[0] = 0xF0 | ((cpt >> 18) & 0x07)
        out[1] = 0x80 | ((cpt >> 12) & 0x3F)
        out[2] = 0x80 | ((cpt >> 6) & 0x3F)
        out[3] = 0x80 | (cpt & 0x3F)
        return 4
    return -1


# --- Python views, for tests and for the load-time code ---

def cpt_flags_of(uint32_t cpt):
    """The 16-bit flags llama.cpp gives a codepoint."""
    return cpt_flags(_flags, cpt)


def tolower(uint32_t cpt):
    return to_lower(cpt)


def codepoints(const uint8_t[::1] data):
    """Decode bytes as llama.cpp's unicode_cpts_from_utf8 does."""
    cdef Py_ssize_t n = data.shape[0], k
    cdef uint32_t *out = <uint32_t *>malloc((n + 1) * sizeof(uint32_t))
    if out == NULL:
        raise MemoryError()
    try:
        with nogil:
            k = decode_utf8(&data[0] if n else NULL, n, out)
        return [out[i] for i in range(k)]
    finally:
        free(out)
