# cython: language_level=3
"""The tokenizer's compiled paths, mirroring llama.cpp b11192's src/llama-vocab.cpp:

- special-token partitioning (tokenizer_st_partition): the text is cut at every occurrence of a special token,
  the tokens taken one after the other in the order of the special-token cache (longest text first), each
  searched in the raw fragments left by the earlier ones, with the lstrip/rstrip attributes trimming the
  neighbouring whitespace;
- byte-level BPE (llm_tokenizer_bpe_session): pre-tokenizer steps (_pretok), then per word the lowest-rank
  merge first (ties: leftmost), symbols that are not tokens falling back to single-byte tokens;
- SentencePiece-style (llm_tokenizer_spm_session): spaces escaped to U+2581, the highest-score bigram that is a
  token merged first (ties: leftmost), symbols that are not tokens falling back to <0xXX> byte tokens;
- pieces (token_to_piece with the cache llama.cpp builds at load) and detokenize (llama_detokenize, with its
  clean-up of spaces).

All of it runs without the GIL on C arrays; the load-time work (what the attributes are, the special order,
the pieces) is done in Python by bankml.tokenizer.vocab and handed over here.
"""

from cpython.bytes cimport PyBytes_FromStringAndSize
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t, int32_t, int64_t
from libc.stdlib cimport malloc, calloc, realloc, free, qsort
from libc.string cimport memcpy, memcmp, memchr

import array

import numpy as np

from bankml.errors import TokenizerError

from bankml.tokenizer._buf cimport (I32Buf, I64Buf, ByteBuf, grow, i32_push, i32_reserve, i32_free, i64_push,
                                    i64_free, bytes_reserve, bytes_free)
from bankml.tokenizer._pretok cimport split_step
from bankml.tokenizer._strtab cimport StrTable, U64Map, fnv1a
from bankml.tokenizer._unicode cimport decode_utf8, encode_cpt, flags_table, utf8_len

cdef enum:
    ATTR_UNKNOWN = 1
    ATTR_UNUSED = 2
    ATTR_NORMAL = 4
    ATTR_CONTROL = 8
    ATTR_USER_DEFINED = 16
    ATTR_BYTE = 32
    ATTR_LSTRIP = 128
    ATTR_RSTRIP = 256

    KIND_BPE = 0
    KIND_SPM = 1

    MAX_STEPS = 8

    ERR_MEMORY = -1
    ERR_CODEPOINT = -2
    ERR_NO_BOS = -3
    ERR_NO_EOS = -4
    ERR_NO_BYTE_TOKEN = -5

KIND = {"bpe": KIND_BPE, "spm": KIND_SPM}


cdef extern from "string.h" nogil:
    const void *memmem(const void *haystack, size_t haystacklen, const void *needle, size_t needlelen)


cdef struct Frag:
    int64_t off
    int64_t len
    int32_t tok          # -1: raw text

cdef struct FragBuf:
    Frag *data
    Py_ssize_t n
    Py_ssize_t cap

cdef struct Sym:
    int64_t start
    int64_t n
    int32_t prev
    int32_t next
    int32_t sid          # BPE: string id of the symbol's text (-1: not a known string)

cdef struct HeapItem:
    uint64_t key         # smallest first
    int32_t left
    int32_t right
    int64_t size
    int32_t sid          # BPE: string id of the merged text

cdef struct Heap:
    HeapItem *data
    Py_ssize_t n
    Py_ssize_t cap


cdef struct WordCache:
    # the tokens of the words already seen in one fragment (a word is a pure function of its bytes)
    uint64_t *hashes       # per slot, 0 = empty
    int64_t *key_off       # per slot: the word's bytes in `keys`
    int64_t *tok_off       # per slot: its tokens in `toks`
    int32_t *key_len
    int32_t *tok_n
    Py_ssize_t mask
    Py_ssize_t n
    ByteBuf keys
    I32Buf toks

cdef enum:
    CACHE_MAX_WORD = 48     # longer words are rarely repeated


cdef int cache_init(WordCache *c, Py_ssize_t text_len) noexcept nogil:
    cdef Py_ssize_t slots = 64
    while slots < text_len // 4 and slots < 65536:
        slots <<= 1
    c.hashes = <uint64_t *>calloc(slots, sizeof(uint64_t))
    c.key_off = <int64_t *>malloc(slots * sizeof(int64_t))
    c.tok_off = <int64_t *>malloc(slots * sizeof(int64_t))
    c.key_len = <int32_t *>malloc(slots * sizeof(int32_t))
    c.tok_n = <int32_t *>malloc(slots * sizeof(int32_t))
    c.mask = slots - 1
    c.n = 0
    c.keys.data = NULL
    c.keys.n = c.keys.cap = 0
    c.toks.data = NULL
    c.toks.n = c.toks.cap = 0
    if c.hashes == NULL or c.key_off == NULL or c.tok_off == NULL or c.key_len == NULL or c.tok_n == NULL:
        return -1
    return 0


cdef void cache_free(WordCache *c) noexcept nogil:
    free(c.hashes)
    free(c.key_off)
    free(c.tok_off)
    free(c.key_len)
    free(c.tok_n)
    bytes_free(&c.keys)
    i32_free(&c.toks)


cdef Py_ssize_t cache_find(WordCache *c, const uint8_t *w, Py_ssize_t n, uint64_t h) noexcept nogil:
    # the slot holding word w, or the empty slot where it would go
    cdef Py_ssize_t j = h & c.mask
    while c.hashes[j]:
        if c.hashes[j] == h and c.key_len[j] == n and memcmp(c.keys.data + c.key_off[j], w, n) == 0:
            return j
        j = (j + 1) & c.mask
    return j


cdef inline int frag_push(FragBuf *b, int64_t off, int64_t length, int32_t tok) noexcept nogil:
    if b.n == b.cap and grow(<void **>&b.data, &b.cap, b.n + 1, sizeof(Frag), 16) < 0:
        return -1
    b.data[b.n].off = off
    b.data[b.n].len = length
    b.data[b.n].tok = tok
    b.n += 1
    return 0


cdef inline int heap_push(Heap *h, uint64_t key, int32_t left, int32_t right, int64_t size,
                          int32_t sid) noexcept nogil:
    cdef Py_ssize_t i, parent
    cdef HeapItem item
    if h.n == h.cap and grow(<void **>&h.data, &h.cap, h.n + 1, sizeof(HeapItem), 64) < 0:
        return -1
    item.key = key
    item.left = left
    item.right = right
    item.size = size
    item.sid = sid
    i = h.n
    h.n += 1
    while i > 0:
        parent = (i - 1) >> 1
        if h.data[parent].key <= key:
            break
        h.data[i] = h.data[parent]
        i = parent
    h.data[i] = item
    return 0


cdef inline HeapItem heap_pop(Heap *h) noexcept nogil:
    cdef HeapItem top = h.data[0], last
    cdef Py_ssize_t i = 0, child, n
    h.n -= 1
    n = h.n
    if n > 0:
        last = h.data[n]
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if child + 1 < n and h.data[child + 1].key < h.data[child].key:
                child += 1
            if h.data[child].key >= last.key:
                break
            h.data[i] = h.data[child]
            i = child
        h.data[i] = last
    return top


cdef inline bint c_isspace(uint8_t c) noexcept nogil:
    # isspace() in the "C" locale
    return c == 32 or (9 <= c <= 13)


cdef inline uint32_t float_order(float f) noexcept nogil:
    # an unsigned key that sorts as the float does (-0.0 counted as 0.0)
    cdef uint32_t u
    if f == 0:
        f = 0
    memcpy(&u, &f, 4)
    return ~u if u & 0x80000000U else u | 0x80000000U


cdef int cmp_u64(const void *a, const void *b) noexcept nogil:
    cdef uint64_t x = (<const uint64_t *>a)[0], y = (<const uint64_t *>b)[0]
    return (x > y) - (x < y)


cdef class Core:
    """Compiled state of one vocabulary. Built by bankml.tokenizer.vocab; use bankml.tokenizer.Tokenizer."""

    cdef int kind
    cdef Py_ssize_t n_vocab
    cdef StrTable strings              # token texts (id = token id), then BPE merge parts
    cdef const int32_t[::1] attrs
    cdef const float[::1] scores
    cdef object _keep                  # arrays the memoryviews point into
    # BPE
    cdef U64Map pairs                  # (sid_left << 32 | sid_right) -> rank | (sid_result + 1) << 32
    cdef int32_t char_sid[256]         # string id of the GPT-2 character of each byte
    cdef int32_t single_byte_tok[256]  # token whose text is that single byte
    cdef uint8_t enc[256][2]           # UTF-8 of the GPT-2 character of each byte
    cdef uint8_t enc_len[256]
    cdef int steps[MAX_STEPS]
    cdef int n_steps
    cdef bint ignore_merges
    # SPM
    cdef int32_t byte_tok[256]         # <0xXX> (or the byte itself) token of each byte
    cdef bint add_space_prefix
    # both
    cdef bint add_bos, add_eos, clean_spaces
    cdef int32_t bos, eos
    # special tokens: a byte trie over their texts
    cdef U64Map trie                   # (node << 8 | byte) -> child node
    cdef const int32_t[::1] node_tok   # token ending at a node, or -1
    cdef const int32_t[::1] special_rank   # position in the special-token cache, or -1
    cdef const int32_t[::1] special_order  # the cache: token ids
    cdef uint8_t first_byte[256]
    # pieces (special = true), as llama.cpp caches them
    cdef bytes piece_blob
    cdef const uint8_t *pblob          # into piece_blob
    # how many special-token occurrences _partition keeps before it searches token by token instead
    # (-1: 4 per byte of text + 65536); settable for tests
    cdef public Py_ssize_t occurrence_limit
    cdef const int64_t[::1] piece_offs

    def __init__(self, *, str kind, list texts, scores, list merges, list steps, bint ignore_merges):
        """The tokenizer tables. texts: token texts (bytes, distinct); scores: float32 per token (SPM);
        merges: BPE merges (bytes "left right", in rank order); steps: pre-tokenizer steps (_pretok).
        Until configure() is called there are no special tokens and every piece is empty."""
        cdef Py_ssize_t i, n = len(texts)
        cdef bytes t
        self.kind = KIND[kind]
        self.n_vocab = n
        self.occurrence_limit = -1
        sc = np.ascontiguousarray(scores, dtype=np.float32)
        if sc.shape[0] != n:
            raise ValueError("scores must have one entry per token")
        self.scores = sc
        self.strings = StrTable(n + len(merges))
        for i in range(n):
            t = texts[i]
            if self.strings.add(<const uint8_t *>t, len(t)) != i:
                raise ValueError(f"token {i} repeats the text of an earlier token")
        if len(steps) > MAX_STEPS:
            raise ValueError("too many pre-tokenizer steps")
        self.n_steps = len(steps)
        for i in range(self.n_steps):
            self.steps[i] = steps[i]
        self.ignore_merges = ignore_merges
        self.pairs = U64Map(len(merges) + 1)
        if self.kind == KIND_BPE:
            self._init_bpe(merges)
        else:
            self._init_spm()
        self._keep = sc
        self.configure(attrs=np.full(n, ATTR_NORMAL, dtype=np.int32), add_space_prefix=False, add_bos=False,
                       add_eos=False, clean_spaces=False, bos=-1, eos=-1, special_order=[], pieces=[b""] * n)

    def configure(self, *, attrs, bint add_space_prefix, bint add_bos, bint add_eos, bint clean_spaces, int bos,
                  int eos, list special_order, list pieces):
        """attrs: int32 attribute per token; special_order: the special-token cache (token ids in llama.cpp's
        order); pieces: the piece (bytes) of every token with special = true."""
        a = np.ascontiguousarray(attrs, dtype=np.int32).copy()
        if a.shape[0] != self.n_vocab:
            raise ValueError("attrs must have one entry per token")
        self.attrs = a
        self._keep_attrs = a
        self.add_space_prefix = add_space_prefix
        self.add_bos = add_bos
        self.add_eos = add_eos
        self.clean_spaces = clean_spaces
        self.bos = bos
        self.eos = eos
        self._init_specials(special_order)
        self._init_pieces(pieces)

    cdef object _keep_attrs

    cdef _init_bpe(self, list merges):
        # merge parts become strings too, so that a pair of symbols is looked up by two string ids; a merge is
        # "left right" split at its first space after the first byte (llama.cpp keeps ("", "") when there is
        # none, which no symbol can match)
        cdef Py_ssize_t i, n = len(merges), k, length
        cdef bytes m
        cdef const uint8_t *p
        cdef const uint8_t *sp
        cdef int32_t a, b, r
        cdef int64_t[::1] part_a = np.full(n, -1, dtype=np.int64)
        cdef int64_t[::1] part_b = np.full(n, -1, dtype=np.int64)
        cdef ByteBuf joined
        joined.data = NULL
        joined.n = joined.cap = 0
        for i in range(n):
            m = merges[i]
            p = <const uint8_t *>m
            length = len(m)
            sp = <const uint8_t *>memchr(p + 1, 32, length - 1) if length > 1 else NULL
            if sp == NULL:
                continue
            k = sp - p
            if k + 1 >= length:
                continue
            part_a[i] = self.strings.add(p, k)
            part_b[i] = self.strings.add(p + k + 1, length - k - 1)
        try:
            for i in range(n):
                if part_a[i] < 0:
                    continue
                m = merges[i]
                p = <const uint8_t *>m
                length = len(m)
                k = (<const uint8_t *>memchr(p + 1, 32, length - 1)) - p
                if bytes_reserve(&joined, length) < 0:
                    raise MemoryError()
                memcpy(joined.data, p, k)
                memcpy(joined.data + k, p + k + 1, length - k - 1)
                r = self.strings.find(joined.data, length - 1)
                self.pairs.put_new((<uint64_t>part_a[i] << 32) | <uint64_t>part_b[i], i | ((<int64_t>r + 1) << 32))
        finally:
            bytes_free(&joined)
        gpt2 = gpt2_byte_chars()
        cdef bytes ch, one
        for i in range(256):
            ch = gpt2[i].encode("utf-8")
            self.enc_len[i] = len(ch)
            for k in range(len(ch)):
                self.enc[i][k] = ch[k]
            self.char_sid[i] = self.strings.find(<const uint8_t *>ch, len(ch))
            one = bytes([i])
            r = self.strings.find(<const uint8_t *>one, 1)
            self.single_byte_tok[i] = r if r < self.n_vocab else -1

    cdef _init_spm(self):
        cdef int i
        cdef int32_t r
        cdef bytes name, one
        for i in range(256):
            name = b"<0x%02X>" % i
            r = self.strings.find(<const uint8_t *>name, len(name))
            if r < 0:
                one = bytes([i])
                r = self.strings.find(<const uint8_t *>one, 1)
            self.byte_tok[i] = r

    cdef _init_specials(self, list order):
        cdef Py_ssize_t i, j, n_nodes = 1
        cdef int32_t tok, node, child
        cdef bytes t
        cdef uint64_t key
        if len(order) >= (1 << 23):
            raise ValueError("too many special tokens")
        rank = np.full(self.n_vocab, -1, dtype=np.int32)
        node_tok = [-1]
        self.trie = U64Map(sum(len(self.token_text(x)) for x in order) + 1)
        for i in range(256):
            self.first_byte[i] = 0
        for i in range(len(order)):
            tok = order[i]
            rank[tok] = i
            t = self.token_text(tok)
            self.first_byte[t[0]] = 1
            node = 0
            for j in range(len(t)):
                key = (<uint64_t>node << 8) | t[j]
                child = <int32_t>self.trie.get(key, -1)
                if child < 0:
                    child = <int32_t>n_nodes
                    n_nodes += 1
                    node_tok.append(-1)
                    self.trie.put_new(key, child)
                node = child
            node_tok[node] = tok
        nt = np.asarray(node_tok, dtype=np.int32)
        so = np.asarray(order, dtype=np.int32)
        self.node_tok = nt
        self.special_rank = rank
        self.special_order = so
        self._keep_specials = (nt, rank, so)

    cdef object _keep_specials

    cdef _init_pieces(self, list pieces):
        if len(pieces) != self.n_vocab:
            raise ValueError("one piece per token")
        offs = np.zeros(self.n_vocab + 1, dtype=np.int64)
        np.cumsum([len(p) for p in pieces], out=offs[1:])
        self.piece_blob = b"".join(pieces)
        self.pblob = <const uint8_t *><const char *>self.piece_blob
        self.piece_offs = offs
        self._keep_pieces = offs

    cdef object _keep_pieces

    # ---- Python-facing ----

    @property
    def n_tokens(self):
        return self.n_vocab

    def text_id(self, bytes text):
        """The token whose text is `text` (llama_vocab's text_to_token), or -1."""
        cdef int32_t r = self.strings.find(<const uint8_t *>text, len(text))
        return r if r < self.n_vocab else -1

    def token_text(self, Py_ssize_t tok):
        if not 0 <= tok < self.n_vocab:
            raise IndexError(tok)
        cdef Py_ssize_t n
        cdef const uint8_t *p = self.strings.text(<int32_t>tok, &n)
        return PyBytes_FromStringAndSize(<const char *>p, n)

    def tokenize(self, const uint8_t[::1] text, bint add_special, bint parse_special):
        """Token ids of `text` (bytes), as llama_tokenize returns them."""
        cdef I32Buf out
        cdef int rc
        cdef Py_ssize_t n = text.shape[0]
        out.data = NULL
        out.n = out.cap = 0
        try:
            with nogil:
                rc = self._tokenize(&text[0] if n else NULL, n, add_special, parse_special, &out)
            _raise_for(rc)
            return _to_list(&out)
        finally:
            i32_free(&out)

    def piece(self, Py_ssize_t tok, bint special=True, int lstrip=0):
        """llama_token_to_piece(tok, lstrip, special) as bytes."""
        if not 0 <= tok < self.n_vocab:
            raise IndexError(tok)
        cdef int64_t a = self.piece_offs[tok], b = self.piece_offs[tok + 1]
        cdef const char *blob = self.piece_blob
        if not special and self.attrs[tok] & (ATTR_UNKNOWN | ATTR_CONTROL):
            return b""
        while lstrip > 0 and a < b and blob[a] == 32:
            a += 1
            lstrip -= 1
        return PyBytes_FromStringAndSize(blob + a, b - a)

    def detokenize(self, const int32_t[::1] ids, bint remove_special, bint unparse_special):
        """llama_detokenize: the pieces of `ids` joined, the first one without its leading space when the
        vocabulary adds a space prefix, then llama.cpp's clean-up of spaces when the vocabulary asks for it.
        Raises IndexError for an id outside the vocabulary."""
        cdef Py_ssize_t n = ids.shape[0], first = 0, i, bad = -1
        cdef bint remove_space = self.add_space_prefix
        cdef ByteBuf out
        cdef Py_ssize_t total
        out.data = NULL
        out.n = out.cap = 0
        if remove_special and self.add_bos and n > 0 and ids[0] == self.bos:
            remove_space = False
            first = 1
        if remove_special and self.add_eos and n > first and ids[n - 1] == self.eos:
            n -= 1
        try:
            with nogil:
                total = self._detokenize(&ids[first] if n > first else NULL, n - first, remove_space,
                                         unparse_special, &out, &bad)
            if bad >= 0:
                raise IndexError(f"token id {ids[first + bad]} is out of the vocabulary (0..{self.n_vocab - 1})")
            if total < 0:
                raise MemoryError()
            return PyBytes_FromStringAndSize(<const char *>out.data, total)
        finally:
            bytes_free(&out)

    def special_fragments(self, const uint8_t[::1] text, bint parse_special):
        """The partition of `text` into raw fragments (offset, length) and special tokens (token id):
        a list of (offset, length, token) with token -1 for raw text (for tests)."""
        cdef FragBuf frags
        cdef Py_ssize_t n = text.shape[0], i
        cdef int rc
        frags.data = NULL
        frags.n = frags.cap = 0
        try:
            with nogil:
                rc = self._partition(&text[0] if n else NULL, n, parse_special, &frags)
            _raise_for(rc)
            return [(frags.data[i].off, frags.data[i].len, frags.data[i].tok) for i in range(frags.n)]
        finally:
            free(frags.data)

    # ---- compiled paths ----

    cdef int _tokenize(self, const uint8_t *s, Py_ssize_t n, bint add_special, bint parse_special,
                       I32Buf *out) noexcept nogil:
        cdef FragBuf frags
        cdef Py_ssize_t i
        cdef int rc = 0
        cdef bint prev_special = True
        frags.data = NULL
        frags.n = frags.cap = 0
        if n > 0:
            rc = self._partition(s, n, parse_special, &frags)
        if rc == 0 and add_special and self.add_bos:
            if self.bos < 0:
                rc = ERR_NO_BOS
            else:
                rc = i32_push(out, self.bos)
        i = 0
        while rc == 0 and i < frags.n:
            if frags.data[i].tok >= 0:
                rc = i32_push(out, frags.data[i].tok)
                prev_special = True
            elif self.kind == KIND_BPE:
                rc = self._bpe_fragment(s + frags.data[i].off, frags.data[i].len, out)
            else:
                rc = self._spm_fragment(s + frags.data[i].off, frags.data[i].len,
                                        self.add_space_prefix and prev_special, out)
                prev_special = False
            i += 1
        if rc == 0 and add_special and self.add_eos:
            if self.eos < 0:
                rc = ERR_NO_EOS
            else:
                rc = i32_push(out, self.eos)
        free(frags.data)
        return rc

    cdef int _partition(self, const uint8_t *s, Py_ssize_t n, bint parse_special, FragBuf *frags) noexcept nogil:
        # Every occurrence of every special token that parse_special allows is found with the trie (rank << 40 |
        # position), sorted by rank then position; the tokens are then applied in rank order. When a text holds
        # too many occurrences to keep (a long run of newlines matches every newline token at every position),
        # only which tokens occur is kept, and each of them is searched for again in the fragments (memmem).
        cdef I64Buf occ
        cdef Py_ssize_t p, q, g, g_end, n_special = self.special_order.shape[0]
        cdef Py_ssize_t limit = 4 * n + 65536 if self.occurrence_limit < 0 else self.occurrence_limit
        cdef int64_t child, node
        cdef int32_t tok
        cdef int rc = 0
        cdef FragBuf cur, nxt, tmp
        cdef uint64_t rank
        cdef uint8_t *seen = NULL
        occ.data = NULL
        occ.n = occ.cap = 0
        cur.data = NULL
        cur.n = cur.cap = 0
        nxt.data = NULL
        nxt.n = nxt.cap = 0
        for p in range(n):
            if not self.first_byte[s[p]]:
                continue
            node = 0
            q = p
            while q < n:
                child = self.trie.get((<uint64_t>node << 8) | s[q], -1)
                if child < 0:
                    break
                node = child
                q += 1
                tok = self.node_tok[node]
                if tok < 0 or not (parse_special or not (self.attrs[tok] & (ATTR_CONTROL | ATTR_UNKNOWN))):
                    continue
                if seen != NULL:
                    seen[self.special_rank[tok]] = 1
                elif occ.n < limit:
                    if i64_push(&occ, (<int64_t>self.special_rank[tok] << 40) | p) < 0:
                        rc = ERR_MEMORY
                        break
                else:
                    seen = <uint8_t *>calloc(n_special, 1)
                    if seen == NULL:
                        rc = ERR_MEMORY
                        break
                    for g in range(occ.n):
                        seen[<uint64_t>occ.data[g] >> 40] = 1
                    seen[self.special_rank[tok]] = 1
                    i64_free(&occ)
            if rc:
                break
        if rc == 0:
            rc = frag_push(&cur, 0, n, -1)
        if rc == 0 and seen != NULL:
            for g in range(n_special):
                if rc:
                    break
                if seen[g]:
                    nxt.n = 0
                    rc = self._apply_special(s, self.special_order[g], &cur, &nxt, NULL, 0)
                    tmp = cur
                    cur = nxt
                    nxt = tmp
        elif rc == 0 and occ.n:
            qsort(occ.data, occ.n, sizeof(int64_t), cmp_u64)
            g = 0
            while g < occ.n and rc == 0:
                rank = <uint64_t>occ.data[g] >> 40
                g_end = g
                while g_end < occ.n and (<uint64_t>occ.data[g_end] >> 40) == rank:
                    g_end += 1
                nxt.n = 0
                rc = self._apply_special(s, self.special_order[rank], &cur, &nxt, occ.data + g, g_end - g)
                tmp = cur
                cur = nxt
                nxt = tmp
                g = g_end
        free(seen)
        i64_free(&occ)
        free(nxt.data)
        if rc:
            free(cur.data)
            return rc
        frags[0] = cur
        return 0

    cdef int _apply_special(self, const uint8_t *s, int32_t tok, FragBuf *cur, FragBuf *nxt, const int64_t *occ,
                            Py_ssize_t n_occ) noexcept nogil:
        # tokenizer_st_partition for one special token: each raw fragment of `cur` is cut at the token's leftmost
        # occurrences that lie inside it, one after the other; the result goes to `nxt`. The occurrences are
        # occ[0:n_occ] (rank << 40 | position, by position), or, with occ NULL, searched for with memmem.
        cdef Py_ssize_t j = 0, k, length
        cdef const uint8_t *text = self.strings.text(tok, &length)
        cdef bint lstrip = (self.attrs[tok] & ATTR_LSTRIP) != 0, rstrip = (self.attrs[tok] & ATTR_RSTRIP) != 0
        cdef int64_t pos, end, m, left, ro, rl
        cdef const void *hit
        cdef int rc = 0
        for k in range(cur.n):
            if rc:
                break
            if cur.data[k].tok >= 0:
                rc = frag_push(nxt, cur.data[k].off, cur.data[k].len, cur.data[k].tok)
                continue
            pos = cur.data[k].off
            end = pos + cur.data[k].len
            while rc == 0:
                if occ != NULL:
                    while j < n_occ and (occ[j] & 0xFFFFFFFFFFLL) < pos:
                        j += 1
                    m = (occ[j] & 0xFFFFFFFFFFLL) if j < n_occ else -1
                    if m >= 0 and m + length > end:
                        m = -1
                else:
                    hit = memmem(s + pos, end - pos, text, length)
                    m = (<const uint8_t *>hit - s) if hit != NULL else -1
                if m < 0:
                    rc = frag_push(nxt, pos, end - pos, -1)
                    break
                if m > pos:
                    left = m - pos
                    if lstrip:
                        while left > 0 and c_isspace(s[pos + left - 1]):
                            left -= 1
                    if left > 0:
                        rc = frag_push(nxt, pos, left, -1)
                if rc == 0:
                    rc = frag_push(nxt, 0, 0, tok)
                if m + length < end:
                    ro = m + length
                    rl = end - ro
                    if rstrip:
                        while rl > 0 and c_isspace(s[ro]):
                            ro += 1
                            rl -= 1
                    if rl > 0:
                        pos = ro
                        continue
                break
        return rc

    cdef int _bpe_fragment(self, const uint8_t *s, Py_ssize_t n, I32Buf *out) noexcept nogil:
        cdef uint32_t *cpts = <uint32_t *>malloc((n + 1) * sizeof(uint32_t))
        cdef I64Buf segs, segs2, tmp
        cdef ByteBuf word, scratch
        cdef Py_ssize_t nc, i, w, pos
        cdef int rc = 0, k, step
        cdef Sym *syms = NULL
        cdef Heap heap
        cdef Py_ssize_t syms_cap = 0, slot = 0, first
        cdef uint64_t h = 0
        cdef WordCache cache
        segs.data = segs2.data = NULL
        segs.n = segs.cap = segs2.n = segs2.cap = 0
        word.data = scratch.data = NULL
        word.n = word.cap = scratch.n = scratch.cap = 0
        heap.data = NULL
        heap.n = heap.cap = 0
        if cache_init(&cache, n) < 0 or cpts == NULL:
            free(cpts)
            cache_free(&cache)
            return ERR_MEMORY
        nc = decode_utf8(s, n, cpts)
        if i64_push(&segs, nc) < 0:
            rc = ERR_MEMORY
        for step in range(self.n_steps):
            if rc:
                break
            segs2.n = 0
            if split_step(self.steps[step], cpts, flags_table(), segs.data, segs.n, &segs2) < 0:
                rc = ERR_MEMORY
            tmp = segs
            segs = segs2
            segs2 = tmp
        pos = 0
        for w in range(segs.n):
            if rc:
                break
            # the word's bytes: its codepoints encoded again (invalid input already became U+FFFD)
            if bytes_reserve(&word, 4 * segs.data[w]) < 0:
                rc = ERR_MEMORY
                break
            word.n = 0
            for i in range(pos, pos + segs.data[w]):
                k = encode_cpt(cpts[i], word.data + word.n)
                if k < 0:
                    rc = ERR_CODEPOINT
                    break
                word.n += k
            pos += segs.data[w]
            if rc:
                break
            if word.n <= CACHE_MAX_WORD:
                h = fnv1a(word.data, word.n) | 1
                slot = cache_find(&cache, word.data, word.n, h)
                if cache.hashes[slot]:
                    if i32_reserve(out, out.n + cache.tok_n[slot]) < 0:
                        rc = ERR_MEMORY
                        break
                    memcpy(out.data + out.n, cache.toks.data + cache.tok_off[slot], cache.tok_n[slot] * sizeof(int32_t))
                    out.n += cache.tok_n[slot]
                    continue
            if word.n > syms_cap:
                free(syms)
                syms_cap = 2 * word.n
                syms = <Sym *>malloc(syms_cap * sizeof(Sym))
                if syms == NULL:
                    rc = ERR_MEMORY
                    break
            first = out.n
            rc = self._bpe_word(word.data, word.n, syms, &heap, &scratch, out)
            if rc == 0 and word.n <= CACHE_MAX_WORD and 2 * (cache.n + 1) <= cache.mask + 1:
                # remember the word's tokens
                if (bytes_reserve(&cache.keys, cache.keys.n + word.n) < 0
                        or i32_reserve(&cache.toks, cache.toks.n + (out.n - first)) < 0):
                    rc = ERR_MEMORY
                    break
                memcpy(cache.keys.data + cache.keys.n, word.data, word.n)
                memcpy(cache.toks.data + cache.toks.n, out.data + first, (out.n - first) * sizeof(int32_t))
                cache.hashes[slot] = h
                cache.key_off[slot] = cache.keys.n
                cache.key_len[slot] = <int32_t>word.n
                cache.tok_off[slot] = cache.toks.n
                cache.tok_n[slot] = <int32_t>(out.n - first)
                cache.keys.n += word.n
                cache.toks.n += out.n - first
                cache.n += 1
        free(cpts)
        free(syms)
        free(heap.data)
        cache_free(&cache)
        i64_free(&segs)
        i64_free(&segs2)
        bytes_free(&word)
        bytes_free(&scratch)
        return rc

    cdef int _add_pair(self, Sym *syms, Heap *heap, int32_t left, int32_t right) noexcept nogil:
        cdef int32_t a, b
        cdef int64_t v
        if left < 0 or right < 0:
            return 0
        a = syms[left].sid
        b = syms[right].sid
        if a < 0 or b < 0:
            return 0
        v = self.pairs.get((<uint64_t>a << 32) | <uint64_t>b, -1)
        if v < 0:
            return 0
        return heap_push(heap, ((v & 0xFFFFFFFFLL) << 32) | <uint64_t>left, left, right,
                         syms[left].n + syms[right].n, <int32_t>((v >> 32) - 1))

    cdef int _bpe_word(self, const uint8_t *b, Py_ssize_t m, Sym *syms, Heap *heap, ByteBuf *scratch,
                       I32Buf *out) noexcept nogil:
        cdef Py_ssize_t i, k, e
        cdef int32_t t, left, right
        cdef HeapItem it
        cdef uint8_t c
        if m == 0:
            return 0
        if self.ignore_merges:
            # a word that is a token as a whole is that token
            if bytes_reserve(scratch, 2 * m) < 0:
                return ERR_MEMORY
            e = 0
            for i in range(m):
                c = b[i]
                for k in range(self.enc_len[c]):
                    scratch.data[e] = self.enc[c][k]
                    e += 1
            t = self.strings.find(scratch.data, e)
            if 0 <= t < self.n_vocab:
                return i32_push(out, t)
        for i in range(m):
            syms[i].start = i
            syms[i].n = 1
            syms[i].prev = <int32_t>(i - 1)
            syms[i].next = <int32_t>(i + 1) if i + 1 < m else -1
            syms[i].sid = self.char_sid[b[i]]
        heap.n = 0
        for i in range(1, m):
            if self._add_pair(syms, heap, <int32_t>(i - 1), <int32_t>i) < 0:
                return ERR_MEMORY
        while heap.n:
            it = heap_pop(heap)
            left = it.left
            right = it.right
            if syms[left].n == 0 or syms[right].n == 0 or syms[left].n + syms[right].n != it.size:
                continue            # one side has changed since the pair was queued
            syms[left].n += syms[right].n
            syms[right].n = 0
            syms[left].sid = it.sid
            syms[left].next = syms[right].next
            if syms[right].next >= 0:
                syms[syms[right].next].prev = left
            if (self._add_pair(syms, heap, syms[left].prev, left) < 0
                    or self._add_pair(syms, heap, left, syms[left].next) < 0):
                return ERR_MEMORY
        for i in range(m):
            if syms[i].n == 0:
                continue
            t = syms[i].sid
            if 0 <= t < self.n_vocab:
                if i32_push(out, t) < 0:
                    return ERR_MEMORY
                continue
            # not a token: each byte of its GPT-2 text, where that single byte is a token
            for k in range(syms[i].start, syms[i].start + syms[i].n):
                c = b[k]
                for e in range(self.enc_len[c]):
                    t = self.single_byte_tok[self.enc[c][e]]
                    if t >= 0 and i32_push(out, t) < 0:
                        return ERR_MEMORY
        return 0

    cdef int _spm_fragment(self, const uint8_t *s, Py_ssize_t n, bint prefix_space, I32Buf *out) noexcept nogil:
        cdef ByteBuf text
        cdef Sym *syms
        cdef Heap heap
        cdef Py_ssize_t i, m, ns, length
        cdef int32_t t, left, right
        cdef HeapItem it
        cdef int rc = 0
        text.data = NULL
        text.n = text.cap = 0
        heap.data = NULL
        heap.n = heap.cap = 0
        # the text with every space escaped to U+2581 (and one in front when asked)
        if bytes_reserve(&text, 3 * (n + 1)) < 0:
            return ERR_MEMORY
        m = 0
        if prefix_space:
            text.data[0] = 0xE2
            text.data[1] = 0x96
            text.data[2] = 0x81
            m = 3
        for i in range(n):
            if s[i] == 32:
                text.data[m] = 0xE2
                text.data[m + 1] = 0x96
                text.data[m + 2] = 0x81
                m += 3
            else:
                text.data[m] = s[i]
                m += 1
        syms = <Sym *>malloc((m + 1) * sizeof(Sym))
        if syms == NULL:
            bytes_free(&text)
            return ERR_MEMORY
        # one symbol per character, as its lead byte announces it (cut short at the end)
        ns = 0
        i = 0
        while i < m:
            length = utf8_len(text.data[i])
            if length > m - i:
                length = m - i
            syms[ns].start = i
            syms[ns].n = length
            syms[ns].prev = <int32_t>(ns - 1)
            i += length
            syms[ns].next = <int32_t>(ns + 1) if i < m else -1
            ns += 1
        for i in range(1, ns):
            if self._spm_pair(text.data, syms, &heap, <int32_t>(i - 1), <int32_t>i) < 0:
                rc = ERR_MEMORY
                break
        while rc == 0 and heap.n:
            it = heap_pop(&heap)
            left = it.left
            right = it.right
            if syms[left].n == 0 or syms[right].n == 0 or syms[left].n + syms[right].n != it.size:
                continue
            syms[left].n += syms[right].n
            syms[right].n = 0
            syms[left].next = syms[right].next
            if syms[right].next >= 0:
                syms[syms[right].next].prev = left
            if (self._spm_pair(text.data, syms, &heap, syms[left].prev, left) < 0
                    or self._spm_pair(text.data, syms, &heap, left, syms[left].next) < 0):
                rc = ERR_MEMORY
        i = 0 if ns else -1
        while rc == 0 and i != -1:
            t = self.strings.find(text.data + syms[i].start, syms[i].n)
            if t >= 0:
                rc = i32_push(out, t)
            else:
                for length in range(syms[i].start, syms[i].start + syms[i].n):
                    t = self.byte_tok[text.data[length]]
                    if t < 0:
                        rc = ERR_NO_BYTE_TOKEN
                        break
                    if i32_push(out, t) < 0:
                        rc = ERR_MEMORY
                        break
            i = syms[i].next
        free(syms)
        free(heap.data)
        bytes_free(&text)
        return rc

    cdef int _spm_pair(self, const uint8_t *text, Sym *syms, Heap *heap, int32_t left,
                       int32_t right) noexcept nogil:
        cdef int32_t t
        cdef int64_t size
        if left < 0 or right < 0:
            return 0
        size = syms[left].n + syms[right].n
        t = self.strings.find(text + syms[left].start, size)
        if t < 0 or t >= self.n_vocab:
            return 0
        # highest score first, then leftmost
        return heap_push(heap, (<uint64_t>(0xFFFFFFFFU - float_order(self.scores[t])) << 32) | <uint64_t>left,
                         left, right, size, -1)

    cdef Py_ssize_t _detokenize(self, const int32_t *ids, Py_ssize_t n, bint remove_space, bint special,
                                ByteBuf *out, Py_ssize_t *bad) noexcept nogil:
        cdef Py_ssize_t i, total = 0, k, i1, t1, t2, t3
        cdef int64_t a, b
        cdef int32_t tok
        cdef const uint8_t *blob = self.pblob
        cdef uint8_t *x
        cdef uint8_t c, c1, c2
        for i in range(n):
            tok = ids[i]
            if tok < 0 or tok >= self.n_vocab:
                bad[0] = i
                return -1
            if not special and self.attrs[tok] & (ATTR_UNKNOWN | ATTR_CONTROL):
                remove_space = False
                continue
            a = self.piece_offs[tok]
            b = self.piece_offs[tok + 1]
            if remove_space and a < b and blob[a] == 32:
                a += 1
            remove_space = False
            if bytes_reserve(out, total + (b - a) + 1) < 0:
                return -1
            if b > a:
                memcpy(out.data + total, blob + a, b - a)
            total += b - a
        if not self.clean_spaces or total == 0:
            return total
        x = out.data
        # llama.cpp's clean-up, in place, in three passes (each reads the bytes the previous one left)
        # 1: " ?", " !", " .", " ,": drop the space
        t1 = 1
        for i in range(1, total):
            c = x[i]
            if x[i - 1] == 32 and (c == 63 or c == 33 or c == 46 or c == 44):
                t1 -= 1
            x[t1] = c
            t1 += 1
        # 2: " ' ": drop both spaces
        t2 = 1
        i = 1
        while i < t1:
            c = x[i]
            if c == 39 and i + 1 < t1 and x[i - 1] == 32 and x[i + 1] == 32:
                t2 -= 1
                i += 1
                x[i] = 0
            x[t2] = c
            t2 += 1
            i += 1
        # 3: " 's", " 'm", " 're", " 've": drop the space
        t3 = 1
        for i in range(1, t2):
            c = x[i]
            if x[i - 1] == 32 and c == 39 and i + 1 < t2:
                c1 = x[i + 1]
                if c1 == 115 or c1 == 109:
                    t3 -= 1
                elif c1 != 116 and c1 != 100 and i + 2 < t2:
                    c2 = x[i + 2]
                    if (c1 == 114 and c2 == 101) or (c1 == 118 and c2 == 101):
                        t3 -= 1
            x[t3] = c
            t3 += 1
        return t3


cdef object _to_list(I32Buf *b):
    # slice by slice, the GIL let go between them: the list of a prompt of millions of tokens is not built in
    # one call that holds it (bankml-serve's event loop waits for it meanwhile)
    cdef Py_ssize_t i = 0, k, step = 1 << 16
    out = []
    while i < b.n:
        k = min(step, b.n - i)
        a = array.array("i")
        a.frombytes(PyBytes_FromStringAndSize(<const char *>(b.data + i), k * sizeof(int32_t)))
        out.extend(a.tolist())
        i += k
        if i < b.n:
            with nogil:
                _yield_gil()
    return out


cdef void _yield_gil() noexcept nogil:
    pass


cdef _raise_for(int rc):
    if rc == 0:
        return
    if rc == ERR_MEMORY:
        raise MemoryError()
    if rc == ERR_CODEPOINT:
        raise TokenizerError("invalid codepoint: the text decodes (llama.cpp's way) to a codepoint above "
                             "U+10FFFF, on which llama.cpp's BPE pre-tokenizer throws")
    if rc == ERR_NO_BOS:
        raise TokenizerError("the vocabulary asks for a BOS token (add_bos) but has none")
    if rc == ERR_NO_EOS:
        raise TokenizerError("the vocabulary asks for an EOS token (add_eos) but has none")
    if rc == ERR_NO_BYTE_TOKEN:
        raise TokenizerError("a byte has no <0xXX> token in this SentencePiece vocabulary "
                             "(llama.cpp's byte_to_token throws)")
    raise RuntimeError(f"tokenizer error {rc}")


def decode_gpt2(bytes text):
    """llama_decode_text: each codepoint of a byte-level BPE token text back to the byte it stands for; a
    codepoint outside the GPT-2 table becomes "[UNK_BYTE_0x" + its UTF-8 in hex + the whole text + "]".
    Returns None when the text holds a codepoint above U+10FFFF (llama.cpp throws while loading)."""
    cdef Py_ssize_t n = len(text), nc, i
    cdef const uint8_t *p = <const uint8_t *>text
    cdef uint32_t *cpts = <uint32_t *>malloc((n + 1) * sizeof(uint32_t))
    cdef uint32_t c
    cdef int b, k
    cdef uint8_t u[4]
    if cpts == NULL:
        raise MemoryError()
    out = bytearray()
    try:
        nc = decode_utf8(p, n, cpts)
        for i in range(nc):
            c = cpts[i]
            b = _GPT2_BYTE[c] if c < 324 else -1
            if b >= 0:
                out.append(b)
                continue
            k = encode_cpt(c, u)
            if k < 0:
                return None
            out += b"[UNK_BYTE_0x" + (<bytes>u[:k]).hex().encode() + text + b"]"
        return bytes(out)
    finally:
        free(cpts)


def pieces_for_cache(list texts, const int32_t[::1] attrs, bint unescape_spaces):
    """The piece of every token as llama.cpp caches it at load (token_to_piece with special = true):
    control, user-defined and unknown tokens are their text; normal tokens their text with U+2581 made a space
    (SPM, or BPE with escaped whitespace) or decoded from GPT-2 characters; byte tokens the byte strtol reads
    in "<0xXX>"; anything else is empty. Raises ValueError(i) for a token llama.cpp cannot load."""
    cdef Py_ssize_t i, n = len(texts)
    cdef int32_t a
    cdef bytes t
    cdef list out = [b""] * n
    for i in range(n):
        a = attrs[i]
        t = texts[i]
        if a & (ATTR_UNKNOWN | ATTR_CONTROL | ATTR_USER_DEFINED):
            out[i] = t
        elif a & ATTR_NORMAL:
            if unescape_spaces:
                out[i] = t.replace(b"\xe2\x96\x81", b" ")
            else:
                p = decode_gpt2(t)
                if p is None:
                    raise ValueError(i)
                out[i] = p
        elif a & ATTR_BYTE:
            if len(t) < 3:
                raise ValueError(i)
            out[i] = bytes([_strtol_hex2(t[3:5])])
    return out


cdef int _strtol_hex2(bytes s):
    # (char) strtol(s, NULL, 16) on the two characters after "<0x" (a "0x" prefix cannot fit in two)
    cdef Py_ssize_t i = 0, n = len(s)
    cdef long val = 0
    cdef bint neg = False
    cdef unsigned char c
    while i < n and s[i] in b" \t\n\v\f\r":
        i += 1
    if i < n and (s[i] == 43 or s[i] == 45):
        neg = s[i] == 45
        i += 1
    while i < n:
        c = s[i]
        if 48 <= c <= 57:
            val = val * 16 + (c - 48)
        elif 65 <= c <= 70:
            val = val * 16 + (c - 55)
        elif 97 <= c <= 102:
            val = val * 16 + (c - 87)
        else:
            break
        i += 1
    return (-val if neg else val) & 0xFF


cdef int _GPT2_BYTE[324]


def _init_gpt2_table():
    cdef int i
    for i in range(324):
        _GPT2_BYTE[i] = -1
    for i, ch in enumerate(gpt2_byte_chars()):
        _GPT2_BYTE[ord(ch)] = i


def gpt2_byte_chars():
    """The GPT-2 byte-to-character table: printable Latin-1 bytes are themselves, the others are U+0100 on."""
    chars = [""] * 256
    n = 0
    for b in range(256):
        if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF:
            chars[b] = chr(b)
    for b in range(256):
        if not chars[b]:
            chars[b] = chr(256 + n)
            n += 1
    return chars


_init_gpt2_table()
