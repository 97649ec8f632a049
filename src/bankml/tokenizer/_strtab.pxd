# Hash tables for the tokenizer's hot paths (no Python objects inside):
#   StrTable: byte strings <-> dense ids (token texts, BPE merge parts), open addressing, FNV-1a
#   U64Map:   uint64 key -> int64 value (BPE pair ranks, special-token trie edges)
from libc.stdint cimport uint8_t, uint64_t, int32_t, int64_t


cdef class StrTable:
    cdef uint8_t *blob            # all strings, concatenated
    cdef Py_ssize_t blob_len, blob_cap
    cdef int64_t *offs            # string i is blob[offs[i]:offs[i + 1]]
    cdef uint64_t *hashes         # hash of string i (kept for growing the slot array)
    cdef Py_ssize_t n, cap
    cdef int32_t *slots           # -1 = empty, else a string id
    cdef uint64_t mask

    cdef int32_t find(self, const uint8_t *s, Py_ssize_t n) noexcept nogil
    cdef int32_t add(self, const uint8_t *s, Py_ssize_t n) except -2
    cdef int _grow_slots(self) except -1
    cdef inline const uint8_t *text(self, int32_t i, Py_ssize_t *n) noexcept nogil:
        n[0] = self.offs[i + 1] - self.offs[i]
        return self.blob + self.offs[i]


cdef class U64Map:
    cdef uint64_t *keys           # EMPTY_KEY = empty
    cdef int64_t *vals
    cdef Py_ssize_t n
    cdef uint64_t mask

    cdef int64_t get(self, uint64_t key, int64_t missing) noexcept nogil
    cdef bint put_new(self, uint64_t key, int64_t val) except -1   # False when the key was there already
    cdef int _grow(self) except -1


cdef inline uint64_t fnv1a(const uint8_t *s, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = 14695981039346656037ULL
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ s[i]) * 1099511628211ULL
    return h


cdef inline uint64_t mix64(uint64_t x) noexcept nogil:
    # splitmix64 finaliser
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL
    return x ^ (x >> 31)
