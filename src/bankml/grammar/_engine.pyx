# cython: language_level=3
"""Compiled grammar engine: thin Cython holders over src/kernels/grammar.{h,c}.

`Vocab` owns the token pieces and their trie (built once per vocabulary and shared by every grammar);
`Engine` owns one grammar's rules and its memo tables (interned stacks and stack sets, steps, cached masks).
A grammar *state* is a plain triple (stack-set id, partial UTF-8 value, partial UTF-8 bytes remaining) owned
by the caller, so many `bankml.grammar.Grammar` objects can share one `Engine`. The C engine is not
thread-safe (its memo tables grow on use) and runs without the GIL, so every call takes the engine's lock.
"""

import threading

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t

from bankml.kernels.grammar cimport (BK_GR_EBADTOKEN, BK_GR_EDIVERGE, BK_GR_EEMPTY, BK_GR_EEOG, BK_GR_EMALFORMED,
                                     BK_GR_ENOMEM, bk_gr_accept_piece, bk_gr_accept_token, bk_gr_allow_eog,
                                     bk_gr_allowed, bk_gr_apply, bk_gr_dump_set, bk_gr_engine, bk_gr_engine_free,
                                     bk_gr_engine_new, bk_gr_get_stats, bk_gr_mask, bk_gr_partial, bk_gr_set_size,
                                     bk_gr_stats, bk_gr_vocab, bk_gr_vocab_free, bk_gr_vocab_n_trie_nodes,
                                     bk_gr_vocab_new)

from bankml.errors import GrammarError

cnp.import_array()


class GrammarEngineError(GrammarError):
    """An engine failure; `code` is the C error code (see grammar.h)."""

    def __init__(self, code, message):
        self.code = code
        super().__init__(message)


cdef object _error(int code, str what):
    if code == BK_GR_ENOMEM:
        return MemoryError(f"grammar engine: out of memory ({what})")
    if code == BK_GR_EDIVERGE:
        return GrammarEngineError(code, "the grammar's expansion does not terminate (a left recursion through rules "
                                 "that only derive the empty string indirectly); llama.cpp does not stop on it")
    if code == BK_GR_EEOG:
        return GrammarEngineError(code, "an end-of-generation token was accepted while the grammar is not complete")
    if code == BK_GR_EBADTOKEN:
        return GrammarEngineError(code, "token id outside the vocabulary")
    if code == BK_GR_EMALFORMED:
        return GrammarEngineError(code, "malformed grammar rules")
    return GrammarEngineError(code, f"grammar engine error {code} ({what})")


cdef class Vocab:
    """Token pieces (bytes), end-of-generation flags, and the trie of the pieces' code points."""
    cdef bk_gr_vocab *v
    cdef readonly int32_t n_vocab

    def __cinit__(self, pieces, eog_ids):
        cdef int32_t n = len(pieces)
        offsets = np.zeros(n + 1, dtype=np.int64)
        lens = np.fromiter((len(p) for p in pieces), dtype=np.int64, count=n)
        np.cumsum(lens, out=offsets[1:])
        blob = b"".join(pieces)
        eog = np.zeros(max(n, 1), dtype=np.uint8)
        for t in eog_ids:
            if 0 <= t < n:
                eog[t] = 1
        cdef const uint8_t[::1] blob_v = np.frombuffer(blob, dtype=np.uint8) if blob else np.zeros(1, np.uint8)
        cdef const int64_t[::1] off_v = offsets
        cdef const uint8_t[::1] eog_v = eog
        self.n_vocab = n
        with nogil:
            self.v = bk_gr_vocab_new(n, &blob_v[0], &off_v[0], &eog_v[0])
        if self.v == NULL:
            raise MemoryError("grammar vocabulary: out of memory")

    def __dealloc__(self):
        if self.v != NULL:
            bk_gr_vocab_free(self.v)
            self.v = NULL

    @property
    def n_trie_nodes(self):
        return bk_gr_vocab_n_trie_nodes(self.v)


cdef class Engine:
    """One grammar's compiled rules and memo tables, over a `Vocab`."""
    cdef bk_gr_engine *g
    cdef readonly Vocab vocab
    cdef readonly int32_t initial_set
    cdef object lock

    def __cinit__(self, elems, rule_start, int32_t root_rule, Vocab vocab):
        cdef const uint32_t[:, ::1] e = np.ascontiguousarray(elems, dtype=np.uint32).reshape(-1, 2)
        cdef const int32_t[::1] rs = np.ascontiguousarray(rule_start, dtype=np.int32)
        cdef int err = 0
        cdef int32_t initial = 0
        self.vocab = vocab
        self.lock = threading.Lock()
        if e.shape[0] == 0 or rs.shape[0] == 0 or not (0 <= root_rule < rs.shape[0]):
            raise GrammarError("empty grammar")
        with nogil:
            self.g = bk_gr_engine_new(&e[0, 0], <int32_t>e.shape[0], &rs[0], <int32_t>rs.shape[0], root_rule,
                                      vocab.v, &initial, &err)
        if self.g == NULL:
            raise _error(err, "building the initial stacks")
        self.initial_set = initial

    def __dealloc__(self):
        if self.g != NULL:
            bk_gr_engine_free(self.g)
            self.g = NULL

    def allow_eog(self, int32_t state_set):
        return bool(bk_gr_allow_eog(self.g, state_set))

    def set_size(self, int32_t state_set):
        return bk_gr_set_size(self.g, state_set)

    def accept_token(self, int32_t state_set, uint32_t pvalue, int32_t premain, int32_t token):
        """(set, pvalue, premain) after accepting `token`; raises GrammarEngineError(code=BK_GR_EEMPTY...) on refusal."""
        cdef bk_gr_partial p
        cdef int rc
        p.value = pvalue
        p.n_remain = premain
        with self.lock, nogil:
            rc = bk_gr_accept_token(self.g, &state_set, &p, token)
        if rc != 0:
            raise _error(rc, "accept")
        return state_set, p.value, p.n_remain

    def accept_piece(self, int32_t state_set, uint32_t pvalue, int32_t premain, int32_t token, bytes piece):
        cdef bk_gr_partial p
        cdef int rc
        cdef const uint8_t *data = piece
        cdef int64_t n = len(piece)
        p.value = pvalue
        p.n_remain = premain
        with self.lock, nogil:
            rc = bk_gr_accept_piece(self.g, &state_set, &p, token, data, n)
        if rc != 0:
            raise _error(rc, "accept")
        return state_set, p.value, p.n_remain

    def apply(self, int32_t state_set, uint32_t pvalue, int32_t premain, const int32_t[:] ids, float[:] logits):
        """llama_grammar_apply_impl: logits[i] = -inf for every candidate ids[i] the grammar rejects (in place).
        Strided views are fine (the fields of a structured candidate array)."""
        cdef bk_gr_partial p
        cdef int rc
        if ids.shape[0] != logits.shape[0]:
            raise ValueError("ids and logits differ in length")
        if ids.shape[0] == 0:
            return
        p.value = pvalue
        p.n_remain = premain
        with self.lock, nogil:
            rc = bk_gr_apply(self.g, state_set, p, &ids[0], ids.strides[0], &logits[0], logits.strides[0],
                             ids.shape[0])
        if rc != 0:
            raise _error(rc, "apply")

    def allowed(self, int32_t state_set, uint32_t pvalue, int32_t premain, int32_t token):
        cdef bk_gr_partial p
        cdef int rc
        p.value = pvalue
        p.n_remain = premain
        with self.lock, nogil:
            rc = bk_gr_allowed(self.g, state_set, p, token)
        if rc < 0:
            raise _error(rc, "allowed")
        return bool(rc)

    def mask(self, int32_t state_set, uint32_t pvalue, int32_t premain):
        """bool[n_vocab]: the tokens the state allows (a copy)."""
        cdef bk_gr_partial p
        cdef int err = 0
        cdef const uint64_t *m
        cdef int64_t n_words = (self.vocab.n_vocab + 63) // 64
        p.value = pvalue
        p.n_remain = premain
        words = np.empty(n_words, dtype=np.uint64)
        cdef uint64_t[::1] w = words
        cdef int64_t i
        with self.lock:
            with nogil:
                m = bk_gr_mask(self.g, state_set, p, &err)
            if m == NULL:
                raise _error(err, "mask")
            for i in range(n_words):
                w[i] = m[i]
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")
        return bits[: self.vocab.n_vocab].astype(bool)

    def stats(self):
        cdef bk_gr_stats s
        bk_gr_get_stats(self.g, &s)
        return dict(n_stacks=s.n_stacks, n_sets=s.n_sets, n_steps=s.n_steps, n_masks_computed=s.n_masks_computed,
                    n_mask_hits=s.n_mask_hits, n_token_checks=s.n_token_checks)

    def stacks(self, int32_t state_set):
        """The set's stacks as tuples of element indices, bottom to top (sorted), for tests."""
        with self.lock:
            return self._stacks(state_set)

    def _stacks(self, int32_t state_set):
        cdef int64_t need = bk_gr_dump_set(self.g, state_set, NULL, 0)
        if need < 0:
            need = -need
        buf = np.zeros(max(need, 1), dtype=np.int32)
        cdef int32_t[::1] b = buf
        bk_gr_dump_set(self.g, state_set, &b[0], need)
        out, i = [], 0
        while i < need:
            d = int(buf[i])
            out.append(tuple(int(x) for x in buf[i + 1:i + 1 + d]))
            i += 1 + d
        return sorted(out)
