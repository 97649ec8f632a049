# cython: language_level=3
"""Open-addressing hash tables over C memory, for the tokenizer's compiled paths.

StrTable maps byte strings to dense ids 0..n-1 in insertion order (the token table inserts the vocabulary
first, so a token's string id is its token id). U64Map maps 64-bit keys to 64-bit values, keeping the first
value put for a key (as std::unordered_map::emplace does for llama.cpp's BPE ranks).
"""

from libc.stdint cimport uint8_t, uint64_t, int32_t, int64_t
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memcpy, memcmp, memset

cdef uint64_t EMPTY_KEY = 0xFFFFFFFFFFFFFFFFULL


cdef class StrTable:

    def __cinit__(self, Py_ssize_t expected=1024):
        cdef Py_ssize_t nslots = 16
        while nslots < 2 * expected:
            nslots <<= 1
        self.cap = max(expected, 16)
        self.blob_cap = max(16 * self.cap, 256)
        self.blob = <uint8_t *>malloc(self.blob_cap)
        self.offs = <int64_t *>malloc((self.cap + 1) * sizeof(int64_t))
        self.hashes = <uint64_t *>malloc(self.cap * sizeof(uint64_t))
        self.slots = <int32_t *>malloc(nslots * sizeof(int32_t))
        if not (self.blob and self.offs and self.hashes and self.slots):
            raise MemoryError()
        memset(self.slots, 0xFF, nslots * sizeof(int32_t))
        self.mask = nslots - 1
        self.n = 0
        self.blob_len = 0
        self.offs[0] = 0

    def __dealloc__(self):
        free(self.blob)
        free(self.offs)
        free(self.hashes)
        free(self.slots)

    def __len__(self):
        return self.n

    cdef int32_t find(self, const uint8_t *s, Py_ssize_t n) noexcept nogil:
        cdef uint64_t h = fnv1a(s, n)
        cdef uint64_t j = h & self.mask
        cdef int32_t i
        while True:
            i = self.slots[j]
            if i < 0:
                return -1
            if (self.hashes[i] == h and self.offs[i + 1] - self.offs[i] == n
                    and memcmp(self.blob + self.offs[i], s, n) == 0):
                return i
            j = (j + 1) & self.mask

    cdef int _grow_slots(self) except -1:
        cdef uint64_t nslots = (self.mask + 1) * 2
        cdef int32_t *slots = <int32_t *>malloc(nslots * sizeof(int32_t))
        if slots == NULL:
            raise MemoryError()
        memset(slots, 0xFF, nslots * sizeof(int32_t))
        cdef Py_ssize_t i
        cdef uint64_t j, mask = nslots - 1
        for i in range(self.n):
            j = self.hashes[i] & mask
            while slots[j] >= 0:
                j = (j + 1) & mask
            slots[j] = <int32_t>i
        free(self.slots)
        self.slots = slots
        self.mask = mask
        return 0

    cdef int32_t add(self, const uint8_t *s, Py_ssize_t n) except -2:
        # the id of s, adding it when absent
        cdef int32_t found = self.find(s, n)
        if found >= 0:
            return found
        if self.n >= 0x7FFFFFFF:
            raise OverflowError("too many strings")
        cdef void *p
        if self.n + 1 > self.cap:
            self.cap *= 2
            p = realloc(self.offs, (self.cap + 1) * sizeof(int64_t))
            if p == NULL:
                raise MemoryError()
            self.offs = <int64_t *>p
            p = realloc(self.hashes, self.cap * sizeof(uint64_t))
            if p == NULL:
                raise MemoryError()
            self.hashes = <uint64_t *>p
        if self.blob_len + n > self.blob_cap:
            while self.blob_len + n > self.blob_cap:
                self.blob_cap *= 2
            p = realloc(self.blob, self.blob_cap)
            if p == NULL:
                raise MemoryError()
            self.blob = <uint8_t *>p
        if 2 * (self.n + 1) > <Py_ssize_t>(self.mask + 1):
            self._grow_slots()
        cdef int32_t i = <int32_t>self.n
        if n:
            memcpy(self.blob + self.blob_len, s, n)
        self.blob_len += n
        self.offs[i + 1] = self.blob_len
        self.hashes[i] = fnv1a(s, n)
        cdef uint64_t j = self.hashes[i] & self.mask
        while self.slots[j] >= 0:
            j = (j + 1) & self.mask
        self.slots[j] = i
        self.n += 1
        return i

    # Python access (load time and tests)
    def add_bytes(self, const uint8_t[::1] s):
        return self.add(&s[0] if s.shape[0] else NULL, s.shape[0])

    def find_bytes(self, const uint8_t[::1] s):
        return self.find(&s[0] if s.shape[0] else NULL, s.shape[0])

    def get(self, Py_ssize_t i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        cdef Py_ssize_t n
        cdef const uint8_t *p = self.text(<int32_t>i, &n)
        return p[:n]


cdef class U64Map:

    def __cinit__(self, Py_ssize_t expected=1024):
        cdef Py_ssize_t nslots = 16
        while nslots < 2 * expected:
            nslots <<= 1
        self.keys = <uint64_t *>malloc(nslots * sizeof(uint64_t))
        self.vals = <int64_t *>malloc(nslots * sizeof(int64_t))
        if not (self.keys and self.vals):
            raise MemoryError()
        memset(self.keys, 0xFF, nslots * sizeof(uint64_t))
        self.mask = nslots - 1
        self.n = 0

    def __dealloc__(self):
        free(self.keys)
        free(self.vals)

    def __len__(self):
        return self.n

    cdef int64_t get(self, uint64_t key, int64_t missing) noexcept nogil:
        cdef uint64_t j = mix64(key) & self.mask
        while True:
            if self.keys[j] == key:
                return self.vals[j]
            if self.keys[j] == EMPTY_KEY:
                return missing
            j = (j + 1) & self.mask

    cdef int _grow(self) except -1:
        cdef uint64_t nslots = (self.mask + 1) * 2, mask = nslots - 1, j, i, k
        cdef uint64_t *keys = <uint64_t *>malloc(nslots * sizeof(uint64_t))
        cdef int64_t *vals = <int64_t *>malloc(nslots * sizeof(int64_t))
        if keys == NULL or vals == NULL:
            free(keys)
            free(vals)
            raise MemoryError()
        memset(keys, 0xFF, nslots * sizeof(uint64_t))
        for i in range(self.mask + 1):
            k = self.keys[i]
            if k != EMPTY_KEY:
                j = mix64(k) & mask
                while keys[j] != EMPTY_KEY:
                    j = (j + 1) & mask
                keys[j] = k
                vals[j] = self.vals[i]
        free(self.keys)
        free(self.vals)
        self.keys = keys
        self.vals = vals
        self.mask = mask
        return 0

    cdef bint put_new(self, uint64_t key, int64_t val) except -1:
        if key == EMPTY_KEY:
            raise ValueError("reserved key")
        if 2 * (self.n + 1) > <Py_ssize_t>(self.mask + 1):
            self._grow()
        cdef uint64_t j = mix64(key) & self.mask
        while self.keys[j] != EMPTY_KEY:
            if self.keys[j] == key:
                return False
            j = (j + 1) & self.mask
        self.keys[j] = key
        self.vals[j] = val
        self.n += 1
        return True

    def put(self, uint64_t key, int64_t val):
        return self.put_new(key, val)

    def lookup(self, uint64_t key, int64_t missing=-1):
        return self.get(key, missing)
