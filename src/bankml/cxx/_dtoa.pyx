# cython: language_level=3
"""The text nlohmann::json (b11192's vendor/nlohmann/json.hpp) writes for a double: Grisu2 digits (Loitsch's
algorithm as nlohmann's dtoa_impl runs it, which is not always the shortest round-trip text: about one float in
five hundred widened to double gets a 17th digit there), then nlohmann's layout.

    number_text(x) -> str          # json(x).dump() for a double x
    array_text(values) -> str      # "[a,b,...]" for a float64 array, each as number_text

How the digits are made (described from the algorithm, in this module's words):
- the double's value v and the neighbours' midpoints m- and m+ as (64-bit significand, binary exponent) pairs,
  v and m+ normalised to a set top bit, m- scaled to m+'s exponent; m- sits a quarter step below when v is a power
  of two above the smallest normal (the lower gap is half as wide);
- a cached power of ten c = 10^-k (79 entries, 10^-300 .. 10^324 in steps of 8, significands rounded to nearest)
  brings m+'s exponent into [-60, -32]; the three products with c are 64x64-bit products rounded half up to their
  top 64 bits; the interval is then narrowed by one unit at each end;
- digits of the integral part, then of the fraction, are emitted until the remainder fits the interval's width;
  the last digit is then lowered while that moves the text closer to v without leaving the interval.
The layout: "0.0" (or "-0.0") for zero, digits with ".0" when the value is an integer of at most 15 digits, a
decimal point inside for exponents up to 15, "0.000ddd" down to 1e-4, else d.ddde+NN with at least two exponent
digits. Not finite values are written "null" (dump's rule). Verified against nlohmann's own output by
testing/record_nljson_floats.py (tests/oracle/nljson/floats.json).
"""

from libc.stdint cimport int64_t, uint32_t, uint64_t
from libc.string cimport memcpy

import numpy as np

cdef struct diy:
    uint64_t f
    int e

cdef uint64_t[79] _pow_f
cdef int[79] _pow_e
cdef int[79] _pow_k


def _cached_powers():
    """(significand, binary exponent, decimal exponent) of 10^k, k = -300, -292, ..., 324: the significand has its
    top bit set and is rounded to nearest."""
    from fractions import Fraction
    out = []
    for i in range(79):
        k = -300 + 8 * i
        v = Fraction(10) ** k
        e = v.numerator.bit_length() - v.denominator.bit_length() - 64
        while v / Fraction(2) ** e >= 2 ** 64:
            e += 1
        while v / Fraction(2) ** e < 2 ** 63:
            e -= 1
        f = round(v / Fraction(2) ** e)
        if f == 2 ** 64:
            f //= 2
            e += 1
        out.append((f, e, k))
    return out


for _i, (_f, _e, _k) in enumerate(_cached_powers()):
    _pow_f[_i] = _f
    _pow_e[_i] = _e
    _pow_k[_i] = _k


cdef inline diy _mul(diy x, diy y) nogil:
    # the top 64 bits of the 128-bit product, rounded half up
    cdef uint64_t a = x.f & 0xFFFFFFFFu, b = x.f >> 32, c = y.f & 0xFFFFFFFFu, d = y.f >> 32
    cdef uint64_t lo_lo = a * c, lo_hi = a * d, hi_lo = b * c, hi_hi = b * d
    cdef uint64_t mid = (lo_lo >> 32) + (lo_hi & 0xFFFFFFFFu) + (hi_lo & 0xFFFFFFFFu) + (<uint64_t>1 << 31)
    cdef diy r
    r.f = hi_hi + (lo_hi >> 32) + (hi_lo >> 32) + (mid >> 32)
    r.e = x.e + y.e + 64
    return r


cdef inline diy _normalized(diy x) nogil:
    while (x.f >> 63) == 0:
        x.f <<= 1
        x.e -= 1
    return x


cdef inline int _largest_pow10(uint32_t n, uint32_t *p) nogil:
    """The digit count of n (n > 0) and 10^(count - 1)."""
    cdef uint32_t t = 1000000000u
    cdef int k = 10
    while k > 1 and n < t:
        t //= 10
        k -= 1
    p[0] = t
    return k


cdef inline void _round_weed(char *buf, int n, uint64_t dist, uint64_t delta, uint64_t rest,
                             uint64_t ten_k) nogil:
    # lower the last digit while the text gets closer to v and stays inside the interval
    while (rest < dist and delta - rest >= ten_k
           and (rest + ten_k < dist or dist - rest > rest + ten_k - dist)):
        buf[n - 1] -= 1
        rest += ten_k


cdef int _digits(double value, char *buf, int *dec_exp) nogil:
    """Grisu2 digits of a positive finite double into buf; returns their count, dec_exp the power of ten of the
    last digit."""
    cdef uint64_t bits
    memcpy(&bits, &value, 8)
    cdef uint64_t F = bits & ((<uint64_t>1 << 52) - 1)
    cdef int E = <int>(bits >> 52)
    cdef diy v, mp, mm
    if E == 0:
        v.f = F
        v.e = 1 - 1075
    else:
        v.f = F + (<uint64_t>1 << 52)
        v.e = E - 1075
    mp.f = 2 * v.f + 1
    mp.e = v.e - 1
    if F == 0 and E > 1:
        mm.f = 4 * v.f - 1
        mm.e = v.e - 2
    else:
        mm.f = 2 * v.f - 1
        mm.e = v.e - 1
    mp = _normalized(mp)
    mm.f <<= (mm.e - mp.e)
    mm.e = mp.e
    v = _normalized(v)
    # the cached power that brings m+'s exponent into [-60, -32]
    cdef int f = -60 - mp.e - 1
    cdef int prod = f * 78913
    # (f * 78913) / 2^18 with C's division (toward zero), plus one for a positive f: ceil(f * log10(2))
    cdef int k = (prod >> 18) if prod >= 0 else -((-prod) >> 18)
    if f > 0:
        k += 1
    cdef int idx = (300 + k + 7) // 8
    cdef diy c
    c.f = _pow_f[idx]
    c.e = _pow_e[idx]
    cdef diy w = _mul(v, c), w_minus = _mul(mm, c), w_plus = _mul(mp, c)
    cdef diy lo, hi
    lo.f = w_minus.f + 1
    lo.e = w_minus.e
    hi.f = w_plus.f - 1
    hi.e = w_plus.e
    dec_exp[0] = -_pow_k[idx]
    # digit generation
    cdef uint64_t delta = hi.f - lo.f
    cdef uint64_t dist = hi.f - w.f
    cdef int shift = -hi.e
    cdef uint64_t one = (<uint64_t>1) << shift
    cdef uint32_t p1 = <uint32_t>(hi.f >> shift)
    cdef uint64_t p2 = hi.f & (one - 1)
    cdef uint32_t pow10 = 0, d
    cdef int n = _largest_pow10(p1, &pow10)
    cdef int length = 0
    cdef uint64_t rest
    while n > 0:
        d = p1 // pow10
        p1 = p1 % pow10
        buf[length] = <char>(48 + d)
        length += 1
        n -= 1
        rest = ((<uint64_t>p1) << shift) + p2
        if rest <= delta:
            dec_exp[0] += n
            _round_weed(buf, length, dist, delta, rest, (<uint64_t>pow10) << shift)
            return length
        pow10 //= 10
    cdef int m = 0
    while True:
        p2 *= 10
        buf[length] = <char>(48 + (p2 >> shift))
        length += 1
        p2 &= one - 1
        m += 1
        delta *= 10
        dist *= 10
        if p2 <= delta:
            break
    dec_exp[0] -= m
    _round_weed(buf, length, dist, delta, p2, one)
    return length


cdef int _layout(double x, char *out) nogil:
    """nlohmann's to_chars + format_buffer for a finite double; returns the length written to out (>= 32 bytes)."""
    cdef int pos = 0, i, k, n, e, dec
    cdef char buf[32]
    if x < 0 or (x == 0 and (1.0 / x) < 0):
        out[0] = 45
        pos = 1
        x = -x
    if x == 0:
        out[pos] = 48
        out[pos + 1] = 46
        out[pos + 2] = 48
        return pos + 3
    k = _digits(x, buf, &dec)
    n = k + dec
    if k <= n and n <= 15:
        for i in range(k):
            out[pos + i] = buf[i]
        pos += k
        for i in range(n - k):
            out[pos] = 48
            pos += 1
        out[pos] = 46
        out[pos + 1] = 48
        return pos + 2
    if 0 < n and n <= 15:
        for i in range(n):
            out[pos + i] = buf[i]
        pos += n
        out[pos] = 46
        pos += 1
        for i in range(n, k):
            out[pos] = buf[i]
            pos += 1
        return pos
    if -4 < n and n <= 0:
        out[pos] = 48
        out[pos + 1] = 46
        pos += 2
        for i in range(-n):
            out[pos] = 48
            pos += 1
        for i in range(k):
            out[pos] = buf[i]
            pos += 1
        return pos
    out[pos] = buf[0]
    pos += 1
    if k > 1:
        out[pos] = 46
        pos += 1
        for i in range(1, k):
            out[pos] = buf[i]
            pos += 1
    out[pos] = 101
    pos += 1
    e = n - 1
    if e < 0:
        out[pos] = 45
        e = -e
    else:
        out[pos] = 43
    pos += 1
    if e >= 100:
        out[pos] = <char>(48 + e // 100)
        pos += 1
        e %= 100
    out[pos] = <char>(48 + e // 10)
    out[pos + 1] = <char>(48 + e % 10)
    return pos + 2


cdef inline bint _finite(double x) nogil:
    return x == x and x - x == 0


def number_text(double x) -> str:
    """json(x).dump() for a double x ("null" when it is not finite)."""
    cdef char out[40]
    if not _finite(x):
        return "null"
    cdef int n = _layout(x, out)
    return out[:n].decode("ascii")


def array_text(values) -> str:
    """The dump of a JSON array of these doubles: "[a,b,...]" without spaces."""
    cdef double[::1] v = np.ascontiguousarray(values, dtype=np.float64)
    cdef Py_ssize_t n = v.shape[0], i
    cdef bytearray out = bytearray(2 + n * 40)
    cdef char *p = out
    cdef Py_ssize_t pos = 0
    p[0] = 91
    pos = 1
    with nogil:
        for i in range(n):
            if i:
                p[pos] = 44
                pos += 1
            if _finite(v[i]):
                pos += _layout(v[i], p + pos)
            else:
                memcpy(p + pos, b"null", 4)
                pos += 4
    p[pos] = 93
    pos += 1
    return out[:pos].decode("ascii")
