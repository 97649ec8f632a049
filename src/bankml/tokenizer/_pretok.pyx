# cython: language_level=3
"""Pre-tokenizer steps: the splits of llama.cpp b11192's unicode_regex_split for the regexes bankml supports.

Four steps are llama.cpp's hand-written matchers (unicode_regex_split_custom_gpt2 / _llama3 / _qwen2 /
_qwen35); their behaviour is reproduced here, quirks included: within a segment, a position past its end has
no codepoint and no flags; a space followed by the end of the segment is taken by the "punctuation" branch of
the LLAMA3 family; `\\s+(?!\\S)` leaves the last whitespace for the next word only when a codepoint follows.

The other steps are the regexes llama.cpp hands to std::regex. It runs them on a "collapsed" text in which
every codepoint >= 128 is replaced by one byte: 0x0B when it is whitespace, 0xD1 (number), 0xD2 (letter),
0xD3 (punctuation), 0xD4 (mark), 0xD5 (symbol) when its category flags are exactly that category, else 0xD0;
`\\p{X}` becomes that byte plus the ASCII members of X. The steps below test membership the same way.
Matches and the stretches between them both become segments.
"""

from libc.stdint cimport uint16_t, uint32_t, int64_t
import array

from bankml.tokenizer._buf cimport I64Buf, i64_push, i64_free
from bankml.tokenizer._unicode cimport (F_NUMBER, F_LETTER, F_MARK, F_PUNCT, F_WHITESPACE, F_CATEGORIES,
                                        NO_CPT, cpt_flags, to_lower, flags_table)


cdef struct Seg:
    const uint32_t *cpts
    const uint16_t *table
    Py_ssize_t ini
    Py_ssize_t end
    I64Buf *out
    Py_ssize_t prev      # where the pending piece starts
    int err


cdef inline uint32_t _cp(Seg *s, Py_ssize_t pos) noexcept nogil:
    return s.cpts[pos] if pos < s.end else NO_CPT


cdef inline uint16_t _fl(Seg *s, Py_ssize_t pos) noexcept nogil:
    return cpt_flags(s.table, s.cpts[pos]) if pos < s.end else 0


cdef inline void _cut(Seg *s, Py_ssize_t pos) noexcept nogil:
    # the piece [prev, pos) is done (nothing when empty)
    if pos > s.prev:
        if i64_push(s.out, pos - s.prev) < 0:
            s.err = 1
    s.prev = pos


cdef inline bint _is_rn(uint32_t c) noexcept nogil:
    return c == 13 or c == 10


cdef inline bint _contraction1(uint32_t c) noexcept nogil:
    return c == 115 or c == 116 or c == 109 or c == 100          # s t m d


cdef inline bint _contraction2(uint32_t c1, uint32_t c2) noexcept nogil:
    return (c2 == 101 and (c1 == 114 or c1 == 118)) or (c1 == 108 and c2 == 108)   # re ve ll


cdef Py_ssize_t _whitespace_tail(Seg *s, Py_ssize_t pos, bint newline_rule) noexcept nogil:
    # the whitespace alternatives shared by all fast paths: \s*[\r\n]+ (LLAMA3 family), \s+(?!\S), \s+;
    # returns the new position (pos + 1 when nothing matches: the codepoint stands alone)
    cdef Py_ssize_t n_ws = 0, last_rn = 0
    while _fl(s, pos + n_ws) & F_WHITESPACE:
        if newline_rule and _is_rn(_cp(s, pos + n_ws)):
            last_rn = pos + n_ws + 1
        n_ws += 1
    if last_rn > 0:
        return last_rn
    if n_ws > 1 and _cp(s, pos + n_ws) != NO_CPT:
        return pos + n_ws - 1
    if n_ws > 0:
        return pos + n_ws
    return pos + 1


cdef void _gpt2(Seg *s) noexcept nogil:
    cdef Py_ssize_t pos = s.ini
    cdef uint32_t c, c1
    cdef uint16_t f, f2
    cdef bint space
    while pos < s.end:
        c = _cp(s, pos)
        f = _fl(s, pos)
        if c == 39 and pos + 1 < s.end:                      # '
            c1 = _cp(s, pos + 1)
            if _contraction1(c1):
                pos += 2
                _cut(s, pos)
                continue
            if pos + 2 < s.end and _contraction2(c1, _cp(s, pos + 2)):
                pos += 3
                _cut(s, pos)
                continue
        space = c == 32
        f2 = _fl(s, pos + 1) if space else f
        if f2 & F_LETTER:
            pos += space
            while _fl(s, pos) & F_LETTER:
                pos += 1
            _cut(s, pos)
            continue
        if f2 & F_NUMBER:
            pos += space
            while _fl(s, pos) & F_NUMBER:
                pos += 1
            _cut(s, pos)
            continue
        if not (f2 & (F_WHITESPACE | F_LETTER | F_NUMBER)) and f2:
            pos += space
            f2 = _fl(s, pos)
            while not (f2 & (F_WHITESPACE | F_LETTER | F_NUMBER)) and f2:
                pos += 1
                f2 = _fl(s, pos)
            _cut(s, pos)
            continue
        pos = _whitespace_tail(s, pos, False)
        _cut(s, pos)


cdef void _llama3_family(Seg *s, int digits, bint marks) noexcept nogil:
    # digits: longest run of \p{N} in one piece (3 for LLAMA3, 1 for QWEN2); marks: words take \p{M} too
    cdef Py_ssize_t pos = s.ini, ini
    cdef uint32_t c, c1
    cdef uint16_t f, f2, word = F_LETTER | (F_MARK if marks else 0)
    cdef uint16_t stop = F_WHITESPACE | word | F_NUMBER
    cdef bint space
    while pos < s.end:
        c = _cp(s, pos)
        f = _fl(s, pos)
        if c == 39 and pos + 1 < s.end:                      # (?i:'s|'t|'re|'ve|'m|'ll|'d)
            c1 = to_lower(_cp(s, pos + 1))
            if _contraction1(c1):
                pos += 2
                _cut(s, pos)
                continue
            if pos + 2 < s.end and _contraction2(c1, to_lower(_cp(s, pos + 2))):
                pos += 3
                _cut(s, pos)
                continue
        if not (_is_rn(c) or f & F_NUMBER):                  # [^\r\n\p{L}\p{N}]?\p{L}+
            if (f & word) or (_fl(s, pos + 1) & word):
                pos += 1
                while _fl(s, pos) & word:
                    pos += 1
                _cut(s, pos)
                continue
        if f & F_NUMBER:                                     # \p{N}{1,digits}
            ini = pos
            while _fl(s, pos) & F_NUMBER:
                pos += 1
                if pos - ini >= digits:
                    _cut(s, pos)
                    ini = pos
            _cut(s, pos)
            continue
        space = c == 32                                      # ' ?[^\s\p{L}\p{N}]+[\r\n]*'
        f2 = _fl(s, pos + 1) if space else f
        if not (f2 & stop) and f:
            pos += space
            f2 = _fl(s, pos)
            while not (f2 & stop) and f2:
                pos += 1
                f2 = _fl(s, pos)
            while _is_rn(_cp(s, pos)):
                pos += 1
            _cut(s, pos)
            continue
        pos = _whitespace_tail(s, pos, True)
        _cut(s, pos)


cdef inline bint _collapsed_number(const uint16_t *table, uint32_t c) noexcept nogil:
    cdef uint16_t f
    if c < 128:
        return 48 <= c <= 57
    f = cpt_flags(table, c)
    return not (f & F_WHITESPACE) and (f & F_CATEGORIES) == F_NUMBER


cdef inline bint _collapsed_punct(const uint16_t *table, uint32_t c) noexcept nogil:
    # [\p{P}\$\+<=>\^~\|]: \p{P} is 0xD3 plus !-#%-*,-/:-;?-@[-]_{}
    cdef uint16_t f
    if c < 128:
        return ((33 <= c <= 35) or (37 <= c <= 42) or (44 <= c <= 47) or (58 <= c <= 59) or (63 <= c <= 64)
                or (91 <= c <= 93) or c == 95 or c == 123 or c == 125
                or c == 36 or c == 43 or (60 <= c <= 62) or c == 94 or c == 126 or c == 124)
    f = cpt_flags(table, c)
    return not (f & F_WHITESPACE) and (f & F_CATEGORIES) == F_PUNCT


cdef inline bint _in_class(const uint16_t *table, int which, uint32_t c) noexcept nogil:
    return _collapsed_number(table, c) if which == 0 else _collapsed_punct(table, c)


cdef void _class_split(Seg *s, int which, bint runs) noexcept nogil:
    # matches of a one-codepoint class (each alone, or maximal runs) and the stretches between them
    cdef Py_ssize_t pos = s.ini
    while pos < s.end:
        if _in_class(s.table, which, s.cpts[pos]):
            _cut(s, pos)
            pos += 1
            while runs and pos < s.end and _in_class(s.table, which, s.cpts[pos]):
                pos += 1
            _cut(s, pos)
        else:
            pos += 1
    _cut(s, s.end)


cdef inline bint _ascii_digit(uint32_t c) noexcept nogil:
    return 48 <= c <= 57


cdef void _ascii_digits3(Seg *s) noexcept nogil:
    # [0-9][0-9][0-9], matched left to right without overlap
    cdef Py_ssize_t pos = s.ini
    while pos + 3 <= s.end:
        if _ascii_digit(s.cpts[pos]) and _ascii_digit(s.cpts[pos + 1]) and _ascii_digit(s.cpts[pos + 2]):
            _cut(s, pos)
            pos += 3
            _cut(s, pos)
        else:
            pos += 1
    _cut(s, s.end)


cdef int split_step(int step, const uint32_t *cpts, const uint16_t *table, const int64_t *seg_in,
                    Py_ssize_t n_in, I64Buf *seg_out) noexcept nogil:
    # returns 0, or -1 when memory ran out
    cdef Seg s
    cdef Py_ssize_t i, start = 0
    s.cpts = cpts
    s.table = table
    s.out = seg_out
    s.err = 0
    for i in range(n_in):
        s.ini = start
        s.end = start + seg_in[i]
        s.prev = start
        start = s.end
        if step == STEP_GPT2:
            _gpt2(&s)
        elif step == STEP_LLAMA3:
            _llama3_family(&s, 3, False)
        elif step == STEP_QWEN2:
            _llama3_family(&s, 1, False)
        elif step == STEP_QWEN35:
            _llama3_family(&s, 1, True)
        elif step == STEP_EACH_NUMBER:
            _class_split(&s, 0, False)
        elif step == STEP_RUN_NUMBER:
            _class_split(&s, 0, True)
        elif step == STEP_RUN_PUNCT:
            _class_split(&s, 1, True)
        elif step == STEP_ASCII_DIGITS3:
            _ascii_digits3(&s)
        else:
            return -2
        if s.err:
            return -1
    return 0


def split(int step, cpts, segments=None):
    """Python view for tests: the segments (lengths) that one step makes of the codepoints `cpts`."""
    if flags_table() == NULL:
        raise RuntimeError("unicode tables are not loaded (import bankml.tokenizer first)")
    a = array.array("I", cpts)
    segs = array.array("q", [len(a)] if segments is None else segments)
    if sum(segs) != len(a):
        raise ValueError("segments must add up to the number of codepoints")
    cdef const uint32_t[::1] cv = a
    cdef const int64_t[::1] sv = segs
    cdef Py_ssize_t n = cv.shape[0], i
    cdef I64Buf out
    out.data = NULL
    out.n = 0
    out.cap = 0
    cdef int rc
    try:
        rc = split_step(step, &cv[0] if n else NULL, flags_table(), &sv[0] if sv.shape[0] else NULL,
                        sv.shape[0], &out)
        if rc == -2:
            raise ValueError(f"unknown pre-tokenizer step {step}")
        if rc < 0:
            raise MemoryError()
        return [out.data[i] for i in range(out.n)]
    finally:
        i64_free(&out)


# the step numbers, for Python
STEPS = {"gpt2": STEP_GPT2, "llama3": STEP_LLAMA3, "qwen2": STEP_QWEN2, "qwen35": STEP_QWEN35,
         "each_number": STEP_EACH_NUMBER, "run_number": STEP_RUN_NUMBER, "run_punct": STEP_RUN_PUNCT,
         "ascii_digits3": STEP_ASCII_DIGITS3}
