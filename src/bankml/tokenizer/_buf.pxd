# Growable C arrays for nogil code: push() returns -1 when memory runs out (the caller raises MemoryError
# once it holds the GIL again).
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport realloc, free


cdef struct I32Buf:
    int32_t *data
    Py_ssize_t n
    Py_ssize_t cap

cdef struct I64Buf:
    int64_t *data
    Py_ssize_t n
    Py_ssize_t cap

cdef struct ByteBuf:
    uint8_t *data
    Py_ssize_t n
    Py_ssize_t cap


cdef inline int grow(void **data, Py_ssize_t *cap, Py_ssize_t need, size_t elem, Py_ssize_t first) noexcept nogil:
    # make room for `need` elements of `elem` bytes (capacity doubles from `first`); -1 when out of memory
    cdef Py_ssize_t c = cap[0] if cap[0] else first
    cdef void *p
    if need <= cap[0]:
        return 0
    while c < need:
        c *= 2
    p = realloc(data[0], c * elem)
    if p == NULL:
        return -1
    data[0] = p
    cap[0] = c
    return 0

cdef inline int i32_reserve(I32Buf *b, Py_ssize_t need) noexcept nogil:
    return grow(<void **>&b.data, &b.cap, need, sizeof(int32_t), 16)

cdef inline int i32_push(I32Buf *b, int32_t v) noexcept nogil:
    if b.n == b.cap and i32_reserve(b, b.n + 1) < 0:
        return -1
    b.data[b.n] = v
    b.n += 1
    return 0

cdef inline int i64_reserve(I64Buf *b, Py_ssize_t need) noexcept nogil:
    return grow(<void **>&b.data, &b.cap, need, sizeof(int64_t), 16)

cdef inline int i64_push(I64Buf *b, int64_t v) noexcept nogil:
    if b.n == b.cap and i64_reserve(b, b.n + 1) < 0:
        return -1
    b.data[b.n] = v
    b.n += 1
    return 0

cdef inline int bytes_reserve(ByteBuf *b, Py_ssize_t need) noexcept nogil:
    return grow(<void **>&b.data, &b.cap, need, 1, 64)

cdef inline void i32_free(I32Buf *b) noexcept nogil:
    free(b.data)
    b.data = NULL
    b.n = b.cap = 0

cdef inline void i64_free(I64Buf *b) noexcept nogil:
    free(b.data)
    b.data = NULL
    b.n = b.cap = 0

cdef inline void bytes_free(ByteBuf *b) noexcept nogil:
    free(b.data)
    b.data = NULL
    b.n = b.cap = 0
