# cython: language_level=3
"""Two orders that llama.cpp b11192's vocabulary loader inherits from the C++ standard library (libstdc++ of
GCC 12, the oracle's build), reproduced so that bankml makes the same choices:

- `unordered_map_order(keys)`: the iteration order of a `std::unordered_map<std::string, int>` filled by
  `map[keys[i]] = i` for i = 0..n-1 (llama.cpp's token_to_id). The loader walks that map and keeps the *first*
  token whose text names the end-of-turn / FIM tokens, so with two candidates (e.g. "<|im_end|>" and
  "<|endoftext|>") the map's order decides. std::hash<std::string> is libstdc++'s _Hash_bytes (a 64-bit
  Murmur variant, seed 0xc70f6907); buckets are hash % bucket_count; a node goes to the front of its
  bucket's run, or to the front of the whole list when its bucket is empty; a rehash rebuilds the list the
  same way. The bucket counts come from the growth schedule measured on libstdc++ (testing/cxx_probe.cpp).
- `std_sort(items, key)`: std::sort (introsort: median-of-three quicksort down to runs of 16, heapsort past
  2*log2(n) levels, then insertion sort) with the comparator "key(a) > key(b)", which is not stable: the
  order of the special-token cache for equal lengths.
"""

from libc.stdint cimport uint8_t, uint64_t, int64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

# (element count reached by an insertion, bucket count rehashed to before that insertion): libstdc++'s
# _Prime_rehash_policy for single insertions into a default-constructed map (max load factor 1)
GROWTH = (
    (1, 13), (14, 29), (30, 59), (60, 127), (128, 257), (258, 541), (542, 1109), (1110, 2357),
    (2358, 5087), (5088, 10273), (10274, 20753), (20754, 42043), (42044, 85229), (85230, 172933),
    (172934, 351061), (351062, 712697), (712698, 1447153), (1447154, 2938679), (2938680, 5967347),
    (5967348, 12117689), (12117690, 24607243),
)

cdef uint64_t MUL = 0xc6a4a7935bd1e995ULL


cdef inline uint64_t _shift_mix(uint64_t v) noexcept nogil:
    return v ^ (v >> 47)


cdef uint64_t hash_bytes(const uint8_t *p, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = 0xc70f6907ULL ^ (<uint64_t>n * MUL), d
    cdef Py_ssize_t i, aligned = n & ~(<Py_ssize_t>7)
    for i in range(0, aligned, 8):
        memcpy(&d, p + i, 8)
        h ^= _shift_mix(d * MUL) * MUL
        h *= MUL
    if n & 7:
        d = 0
        i = n - 1
        while i >= aligned:
            d = (d << 8) + p[i]
            i -= 1
        h ^= d
        h *= MUL
    h = _shift_mix(h) * MUL
    return _shift_mix(h)


def std_hash(bytes key):
    """std::hash<std::string>{}(key) of libstdc++ (64-bit)."""
    return hash_bytes(<const uint8_t *>key, len(key))


def unordered_map_order(list keys):
    """Indices of `keys` (distinct bytes) in the iteration order of the std::unordered_map built by
    map[keys[i]] = i."""
    cdef Py_ssize_t n = len(keys), i, p, q, before, bbegin, size
    if n == 0:
        return []
    if n >= GROWTH[len(GROWTH) - 1][0]:
        raise ValueError(f"{n} keys: past the measured growth schedule")
    cdef uint64_t *hs = <uint64_t *>malloc(n * sizeof(uint64_t))
    cdef int64_t *nxt = <int64_t *>malloc(n * sizeof(int64_t))
    cdef int64_t *buckets = NULL
    cdef int64_t *newb
    cdef uint64_t nb = 1, b
    cdef int64_t head = -1
    cdef int64_t NONE = -3, BB = -2         # empty bucket; "the node before the list" (_M_before_begin)
    cdef Py_ssize_t g = 0
    cdef bytes k
    if hs == NULL or nxt == NULL:
        free(hs)
        free(nxt)
        raise MemoryError()
    try:
        for i in range(n):
            k = keys[i]
            hs[i] = hash_bytes(<const uint8_t *>k, len(k))
        buckets = <int64_t *>malloc(sizeof(int64_t))
        buckets[0] = NONE
        for i in range(n):
            size = i + 1
            if g < len(GROWTH) and size == GROWTH[g][0]:
                nb = GROWTH[g][1]
                g += 1
                newb = <int64_t *>malloc(nb * sizeof(int64_t))
                if newb == NULL:
                    raise MemoryError()
                for q in range(<Py_ssize_t>nb):
                    newb[q] = NONE
                p = head
                head = -1
                bbegin = 0
                while p != -1:
                    q = nxt[p]
                    b = hs[p] % nb
                    if newb[b] == NONE:
                        nxt[p] = head
                        head = p
                        newb[b] = BB
                        if nxt[p] != -1:
                            newb[bbegin] = p
                        bbegin = b
                    else:
                        before = newb[b]
                        if before == BB:
                            nxt[p] = head
                            head = p
                        else:
                            nxt[p] = nxt[before]
                            nxt[before] = p
                    p = q
                free(buckets)
                buckets = newb
            b = hs[i] % nb
            if buckets[b] != NONE:
                before = buckets[b]
                if before == BB:
                    nxt[i] = head
                    head = i
                else:
                    nxt[i] = nxt[before]
                    nxt[before] = i
            else:
                nxt[i] = head
                head = i
                if nxt[i] != -1:
                    buckets[hs[nxt[i]] % nb] = i
                buckets[b] = BB
        out = []
        p = head
        while p != -1:
            out.append(p)
            p = nxt[p]
        return out
    finally:
        free(hs)
        free(nxt)
        free(buckets)


# --- std::sort with comparator key(a) > key(b) ---

def std_sort(list items, key):
    """Sort `items` in place as libstdc++'s std::sort does with `comp(a, b) = key(a) > key(b)`."""
    cdef list k = [key(x) for x in items]
    cdef Py_ssize_t n = len(items)
    if n > 1:
        _introsort_loop(items, k, 0, n, 2 * _lg(n))
        _final_insertion_sort(items, k, 0, n)
    return items


cdef Py_ssize_t _lg(Py_ssize_t n):
    return n.bit_length() - 1


cdef inline bint _comp(list k, Py_ssize_t a, Py_ssize_t b):
    return k[a] > k[b]


cdef inline void _swap(list it, list k, Py_ssize_t a, Py_ssize_t b):
    it[a], it[b] = it[b], it[a]
    k[a], k[b] = k[b], k[a]


cdef void _move_median_to_first(list it, list k, Py_ssize_t result, Py_ssize_t a, Py_ssize_t b, Py_ssize_t c):
    if _comp(k, a, b):
        if _comp(k, b, c):
            _swap(it, k, result, b)
        elif _comp(k, a, c):
            _swap(it, k, result, c)
        else:
            _swap(it, k, result, a)
    elif _comp(k, a, c):
        _swap(it, k, result, a)
    elif _comp(k, b, c):
        _swap(it, k, result, c)
    else:
        _swap(it, k, result, b)


cdef Py_ssize_t _unguarded_partition(list it, list k, Py_ssize_t first, Py_ssize_t last, Py_ssize_t pivot):
    while True:
        while _comp(k, first, pivot):
            first += 1
        last -= 1
        while _comp(k, pivot, last):
            last -= 1
        if not first < last:
            return first
        _swap(it, k, first, last)
        first += 1


cdef void _introsort_loop(list it, list k, Py_ssize_t first, Py_ssize_t last, Py_ssize_t depth):
    cdef Py_ssize_t cut, mid
    while last - first > 16:
        if depth == 0:
            _heap_select(it, k, first, last, last)
            _sort_heap(it, k, first, last)
            return
        depth -= 1
        mid = first + (last - first) // 2
        _move_median_to_first(it, k, first, first + 1, mid, last - 1)
        cut = _unguarded_partition(it, k, first + 1, last, first)
        _introsort_loop(it, k, cut, last, depth)
        last = cut


cdef void _unguarded_linear_insert(list it, list k, Py_ssize_t last):
    val, vk = it[last], k[last]
    cdef Py_ssize_t nxt = last - 1
    while vk > k[nxt]:
        it[last], k[last] = it[nxt], k[nxt]
        last = nxt
        nxt -= 1
    it[last], k[last] = val, vk


cdef void _insertion_sort(list it, list k, Py_ssize_t first, Py_ssize_t last):
    cdef Py_ssize_t i, j
    if first == last:
        return
    for i in range(first + 1, last):
        if _comp(k, i, first):
            val, vk = it[i], k[i]
            for j in range(i, first, -1):
                it[j], k[j] = it[j - 1], k[j - 1]
            it[first], k[first] = val, vk
        else:
            _unguarded_linear_insert(it, k, i)


cdef void _final_insertion_sort(list it, list k, Py_ssize_t first, Py_ssize_t last):
    cdef Py_ssize_t i
    if last - first > 16:
        _insertion_sort(it, k, first, first + 16)
        for i in range(first + 16, last):
            _unguarded_linear_insert(it, k, i)
    else:
        _insertion_sort(it, k, first, last)


# heap helpers (positions relative to `first`)

cdef void _push_heap(list it, list k, Py_ssize_t first, Py_ssize_t hole, Py_ssize_t top, object val, object vk):
    cdef Py_ssize_t parent = (hole - 1) // 2
    while hole > top and k[first + parent] > vk:
        it[first + hole], k[first + hole] = it[first + parent], k[first + parent]
        hole = parent
        parent = (hole - 1) // 2
    it[first + hole], k[first + hole] = val, vk


cdef void _adjust_heap(list it, list k, Py_ssize_t first, Py_ssize_t hole, Py_ssize_t length, object val,
                       object vk):
    cdef Py_ssize_t top = hole, second = hole
    while second < (length - 1) // 2:
        second = 2 * (second + 1)
        if k[first + second] > k[first + second - 1]:
            second -= 1
        it[first + hole], k[first + hole] = it[first + second], k[first + second]
        hole = second
    if (length & 1) == 0 and second == (length - 2) // 2:
        second = 2 * (second + 1)
        it[first + hole], k[first + hole] = it[first + second - 1], k[first + second - 1]
        hole = second - 1
    _push_heap(it, k, first, hole, top, val, vk)


cdef void _pop_heap(list it, list k, Py_ssize_t first, Py_ssize_t last, Py_ssize_t result):
    val, vk = it[result], k[result]
    it[result], k[result] = it[first], k[first]
    _adjust_heap(it, k, first, 0, last - first, val, vk)


cdef void _make_heap(list it, list k, Py_ssize_t first, Py_ssize_t last):
    cdef Py_ssize_t length = last - first, parent
    if length < 2:
        return
    parent = (length - 2) // 2
    while True:
        _adjust_heap(it, k, first, parent, length, it[first + parent], k[first + parent])
        if parent == 0:
            return
        parent -= 1


cdef void _heap_select(list it, list k, Py_ssize_t first, Py_ssize_t middle, Py_ssize_t last):
    cdef Py_ssize_t i
    _make_heap(it, k, first, middle)
    for i in range(middle, last):
        if _comp(k, i, first):
            _pop_heap(it, k, first, middle, i)


cdef void _sort_heap(list it, list k, Py_ssize_t first, Py_ssize_t last):
    while last - first > 1:
        last -= 1
        _pop_heap(it, k, first, last, last)
