"""bankml.tokenizer against llama.cpp b11192: replays of tests/oracle/tokenizer/ (recorded by
testing/record_tokenizer.py from llama-server and libllama), the libstdc++ orders the loader depends on, and
unit tests of the pieces (Unicode tables, pre-tokenizer steps, refusals) on small synthetic vocabularies."""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from bankml.errors import InvalidToken, TokenizerError, UnsupportedTokenizer
from bankml.models.gguf import GGUFHeader, ValueType, parse_header, read_header_file
from bankml.cxx import _stl as _cxx
from bankml.tokenizer import ATTR_CONTROL, ATTR_NORMAL, Tokenizer, _pretok, _unicode, to_bytes
from bankml.tokenizer._core import gpt2_byte_chars
from tokenizer_oracle import cxx_keys, cxx_lengths, dec_bytes, pieces_sha, synthetic_gguf

RECORDS = Path(__file__).parent / "oracle" / "tokenizer"
VOCABS = sorted(p.name[: -len(".json.gz")] for p in RECORDS.glob("*.json.gz"))
SERVED = ["smollm2", "gemma3"]   # recorded through llama-server too


@functools.lru_cache(maxsize=2)
def record(name: str) -> dict:
    with gzip.open(RECORDS / f"{name}.json.gz") as fh:
        return json.loads(fh.read())


dec = dec_bytes


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# one vocabulary at a time: tests are grouped by this module-scoped parameter
@pytest.fixture(scope="module", params=VOCABS)
def vocab(request, sdist_vocab):
    # (name, record, the GGUF's bytes digest, Tokenizer)
    name = request.param
    rec = record(name)
    kind, fname = rec["source"].split(":", 1)
    if kind == "synthetic":
        data = synthetic_gguf(read_header_file(request.getfixturevalue("smollm2_path")), fname)
        return name, rec, hashlib.sha256(data).hexdigest(), Tokenizer.from_gguf(parse_header(data, len(data)))
    path = request.getfixturevalue(f"{fname}_path") if kind == "model" else sdist_vocab(fname)
    return name, rec, sha256_file(path), Tokenizer.from_file(path)


def mismatches(pairs, limit=5):
    bad = [(what, got, want) for what, got, want in pairs if got != want]
    return bad[:limit], len(bad)


@pytest.mark.slow
@pytest.mark.oracle
class TestRecords:
    def test_gguf_is_the_recorded_file(self, vocab):
        name, rec, digest, tok = vocab
        assert digest == rec["gguf_sha256"]

    def test_vocabulary_facts(self, vocab):
        name, rec, digest, tok = vocab
        f = rec["facts"]
        assert tok.n_vocab == f["n_vocab"]
        ids = {k: getattr(tok, f"{k}_id") for k in f["ids"]}
        assert {k: -1 if v is None else v for k, v in ids.items()} == f["ids"]
        assert sorted(tok.eog_ids) == f["eog"]
        assert all(tok.is_eog(t) for t in f["eog"])
        assert (tok.add_bos, tok.add_eos, tok.add_sep) == (f["add_bos"], f["add_eos"], f["add_sep"])
        values, counts = np.unique(tok.attrs, return_counts=True)
        assert {str(v): int(c) for v, c in zip(values, counts)} == f["attr_counts"]
        assert hashlib.sha256(tok.attrs.astype("<i4").tobytes()).hexdigest() == f["attrs_sha256"]

    @pytest.mark.parametrize("special", [True, False], ids=["special", "nospecial"])
    def test_every_piece(self, vocab, special):
        name, rec, digest, tok = vocab
        h = hashlib.sha256()
        for p in tok.pieces(special):
            h.update(len(p).to_bytes(4, "little") + p)
        key = "pieces_sha256" if special else "pieces_nospecial_sha256"
        assert h.hexdigest() == rec["facts"][key]

    def test_llama_tokenize(self, vocab):
        name, rec, digest, tok = vocab
        pairs = []
        for r in rec["lib"]:
            t = dec(r["t"])
            pairs.append((("ids", t), tok.tokenize(t, add_special=False, parse_special=True), r["ids"]))
            pairs.append((("nosp", t), tok.tokenize(t, add_special=False, parse_special=False),
                          r.get("nosp", r["ids"])))
            pairs.append((("add", t), tok.tokenize(t, add_special=True, parse_special=True), r.get("add", r["ids"])))
        bad, n = mismatches(pairs)
        assert n == 0, f"{n} of {len(pairs)} differ, e.g. {bad}"
        assert len(pairs) == 3 * len(rec["lib"]) > 0

    def test_llama_detokenize(self, vocab):
        name, rec, digest, tok = vocab
        pairs = []
        for r in rec["lib"]:
            if "detok" not in r:
                continue
            ids = r.get("add", r["ids"])
            got = [tok.detokenize(ids, remove_special=rs, unparse_special=us) for rs in (False, True)
                   for us in (True, False)]
            pairs.append((("detok", r["t"]), got, [dec(x) for x in r["detok"]]))
        bad, n = mismatches(pairs)
        assert n == 0, f"{n} of {len(pairs)} differ, e.g. {bad}"
        assert pairs


@pytest.fixture(scope="module", params=SERVED)
def served_vocab(request):
    name = request.param
    return name, record(name), Tokenizer.from_file(request.getfixturevalue(f"{name}_path"))


@pytest.mark.slow
@pytest.mark.oracle
def test_llama_server(served_vocab):
    # /tokenize (with pieces, without parse_special, with add_special) and /detokenize as llama-server answered
    from bankml.server.api.tokenize import detokenize_body, tokenize_body
    name, rec, tok = served_vocab
    pairs = []
    for r in rec["server"]:
        t = r["t"]
        body = tokenize_body(tok, {"content": t, "with_pieces": True})["tokens"]
        pairs.append((("ids", t), [x["id"] for x in body], r["ids"]))
        if "pieces" in r:
            pairs.append((("pieces", t), body, r["pieces"]))
        else:
            pairs.append((("pieces", t), pieces_sha(body), r["pieces_sha256"]))
        pairs.append((("nosp", t), tokenize_body(tok, {"content": t, "parse_special": False})["tokens"],
                      r.get("nosp", r["ids"])))
        pairs.append((("add", t), tokenize_body(tok, {"content": t, "add_special": True})["tokens"],
                      r.get("add", r["ids"])))
        pairs.append((("detok", t), detokenize_body(tok, {"tokens": r["ids"]})["content"], r["detok"]))
    bad, n = mismatches(pairs)
    assert n == 0, f"{n} of {len(pairs)} differ, e.g. {bad}"
    assert len(pairs) == 5 * len(rec["server"]) > 0


@pytest.mark.slow
@pytest.mark.oracle
def test_partition_by_search_gives_the_same_tokens(served_vocab):
    # past a number of special-token occurrences, the partition searches token by token instead of keeping
    # every occurrence; forced from the first occurrence, it must still give llama-server's tokens
    name, rec, tok = served_vocab
    tok._core.occurrence_limit = 0
    try:
        for r in rec["server"]:
            assert tok.tokenize(r["t"]) == r["ids"]
            assert tok.tokenize(r["t"], parse_special=False) == r.get("nosp", r["ids"])
    finally:
        tok._core.occurrence_limit = -1


# ---- libstdc++ orders (testing/cxx_probe.cpp) ----

CXX = json.loads((RECORDS / "cxx.json").read_text())


def test_unordered_map_growth_is_the_measured_one():
    recorded = [tuple(x) for x in CXX["growth"]]
    assert list(_cxx.GROWTH) == recorded[: len(_cxx.GROWTH)]


@pytest.mark.parametrize("case", CXX["map"], ids=lambda c: f"n{c['n']}")
def test_unordered_map_order(case):
    order = _cxx.unordered_map_order(cxx_keys(case["seed"], case["n"]))
    if case["order"] is not None:
        assert order == case["order"]
    assert hashlib.sha256(json.dumps(order).encode()).hexdigest() == case["order_sha256"]


@pytest.mark.parametrize("case", CXX["sort"], ids=lambda c: f"n{c['n']}-top{c['top']}")
def test_std_sort_order(case):
    lens = cxx_lengths(case["seed"], case["n"], case["top"])
    order = _cxx.std_sort(list(range(case["n"])), lambda i: lens[i])
    assert sorted(order) == list(range(case["n"]))
    assert hashlib.sha256(json.dumps(order).encode()).hexdigest() == case["order_sha256"]


# ---- Unicode tables and decoding ----

@pytest.mark.parametrize("cpt, flags", [
    (ord("a"), 0x0004 | 0x0200), (ord("Z"), 0x0004 | 0x0400), (ord("7"), 0x0002), (ord(" "), 0x0008 | 0x0100),
    (ord("\n"), 0x0080 | 0x0100), (0x0301, 0x0010), (ord("!"), 0x0020), (ord("$"), 0x0040),
    (0x0663, 0x0002), (0x3000, 0x0008 | 0x0100), (0x4E00, 0x0004), (0x110000, 0x0001), (0xFFFFFFFF, 0x0001),
], ids=hex)
def test_codepoint_flags(cpt, flags):
    # categories as llama.cpp's unicode-data.cpp gives them (plus its whitespace/lower/upper bits)
    assert _unicode.cpt_flags_of(cpt) & 0x07FF == flags


def test_tolower():
    assert _unicode.tolower(ord("S")) == ord("s")
    assert _unicode.tolower(ord("s")) == ord("s")
    assert _unicode.tolower(0x0130) == ord("i")      # İ
    assert _unicode.tolower(0x1F600) == 0x1F600


@pytest.mark.parametrize("data, cpts", [
    (b"a\xc3\xa9", [0x61, 0xE9]),
    (b"\xe2\x82(", [0xFFFD, 0xFFFD, 0x28]),             # a cut sequence: one U+FFFD per byte
    (b"\xc0\x80", [0]),                                 # overlong form decoded
    (b"\xed\xa0\x80", [0xD800]),                        # encoded surrogate decoded
    (b"\xf7\xbf\xbf\xbf", [0x1FFFFF]),                  # past U+10FFFF decoded
    (b"\xf8\x88\x80\x80\x80", [0xFFFD] * 5),
    (b"\xf0\x9f\x98", [0xFFFD, 0xFFFD, 0xFFFD]),
], ids=repr)
def test_llama_utf8_decoding(data, cpts):
    assert _unicode.codepoints(data) == cpts


# ---- pre-tokenizer steps ----

def pieces(step: str, text: str) -> list[str]:
    lens = _pretok.split(_pretok.STEPS[step], [ord(c) for c in text])
    out, i = [], 0
    for n in lens:
        out.append(text[i:i + n])
        i += n
    assert i == len(text)
    return out


@pytest.mark.parametrize("step, text, want", [
    ("gpt2", "Hello world's  123 !!", ["Hello", " world", "'s", " ", " 123", " !!"]),
    ("gpt2", "a  \n b", ["a", "  \n", " b"]),
    ("gpt2", "x ", ["x", " "]),
    ("gpt2", "I'M", ["I", "'", "M"]),                         # contractions are case-sensitive in gpt2
    ("llama3", "I'M 12345", ["I", "'M", " ", "123", "45"]),
    ("llama3", "a\n\n  b", ["a", "\n\n", " ", " b"]),
    ("llama3", "!!\n\nx", ["!!\n\n", "x"]),
    ("qwen2", "x 12", ["x", " ", "1", "2"]),
    ("qwen35", "e\u0301te", ["e\u0301te"]),
    ("each_number", "ab12c٣", ["ab", "1", "2", "c", "٣"]),
    ("run_number", "ab12c٣", ["ab", "12", "c", "٣"]),
    ("run_punct", "a,.;b$x`", ["a", ",.;", "b", "$", "x`"]),
    ("ascii_digits3", "1234567٣٣٣", ["123", "456", "7٣٣٣"]),
], ids=lambda x: x if isinstance(x, str) else None)
def test_pretokenizer_step(step, text, want):
    assert pieces(step, text) == want


def test_pretokenizer_keeps_given_segments():
    # a step never joins across the segments an earlier step made
    lens = _pretok.split(_pretok.STEPS["gpt2"], [ord(c) for c in "abcdef"], [2, 4])
    assert lens == [2, 4]


# ---- small synthetic vocabularies ----

def header(meta: dict) -> GGUFHeader:
    """A GGUF header holding only the given keys: name -> value (str/bool/int) or (ValueType, value)."""
    md, vt, at = {}, {}, {}
    for k, v in meta.items():
        if isinstance(v, tuple):
            t, v = v
        elif isinstance(v, bool):
            t = ValueType.BOOL
        elif isinstance(v, str):
            t = ValueType.STRING
        elif isinstance(v, int):
            t = ValueType.UINT32
        elif isinstance(v, list):
            t = ValueType.ARRAY
            at[k] = ValueType.STRING
        elif isinstance(v, np.ndarray):
            t = ValueType.ARRAY
            at[k] = {np.dtype(np.int32): ValueType.INT32, np.dtype(np.float32): ValueType.FLOAT32}[v.dtype]
        else:
            raise TypeError(k)
        md[k], vt[k] = v, t
    return GGUFHeader(3, md, vt, at, {}, 32, 0, 0)


BYTES = gpt2_byte_chars()


def bpe_meta(pre="gpt-2", extra_tokens=(), merges=("h e", "l l", "he ll", "hell o", "Ġ w")) -> dict:
    tokens = list(BYTES) + ["he", "ll", "hell", "hello", "Ġw"] + list(extra_tokens)
    types = np.ones(len(tokens), dtype=np.int32)
    for i, t in enumerate(tokens):
        if t.startswith("<|"):
            types[i] = 3
    return {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": pre, "tokenizer.ggml.tokens": tokens,
            "tokenizer.ggml.token_type": types, "tokenizer.ggml.merges": list(merges)}


def test_synthetic_bpe():
    tok = Tokenizer.from_gguf(header(bpe_meta(extra_tokens=["<|end|>"])))
    ids = tok.tokenize("hello world<|end|>")
    texts = [tok.token_text(i) for i in ids]
    assert texts == [b"hello", b"\xc4\xa0w", b"o", b"r", b"l", b"d", b"<|end|>"]
    assert tok.detokenize(ids) == b"hello world<|end|>"
    assert tok.detokenize(ids, unparse_special=False) == b"hello world"
    assert tok.is_control(ids[-1]) and tok.is_eog(ids[-1])
    assert tok.tokenize("<|end|>", parse_special=False) != [ids[-1]]


def test_synthetic_bpe_ignore_merges():
    # llama3-style pre-tokenizers take a word that is a token as a whole, whatever the merges say
    tok = Tokenizer.from_gguf(header(bpe_meta(pre="llama-bpe", merges=("h e",))))
    assert [tok.token_text(i) for i in tok.tokenize("hello")] == [b"hello"]
    assert tok.add_bos is True


def test_synthetic_spm():
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁", "▁a", "b", "▁ab", "a"]
    types = np.array([2, 3, 3] + [6] * 256 + [1] * 5, dtype=np.int32)
    scores = np.zeros(len(tokens), dtype=np.float32)
    scores[tokens.index("▁ab")] = -1.0
    scores[tokens.index("▁a")] = -2.0
    tok = Tokenizer.from_gguf(header({"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
                                      "tokenizer.ggml.token_type": types, "tokenizer.ggml.scores": scores}))
    ids = tok.tokenize("ab c", add_special=True)
    assert [tok.token_text(i) for i in ids] == [b"<s>", "▁ab".encode(), "▁".encode(), b"<0x63>"]
    assert tok.detokenize(ids, remove_special=True) == b" ab c"      # BOS removed: the space stays
    assert tok.detokenize(ids) == b"<s> ab c"
    assert tok.detokenize(ids[1:]) == b"ab c"                         # first piece loses its space
    assert tok.token_to_piece(ids[-1]) == b"c"
    assert tok.tokenize("", add_special=True) == [tok.bos_id]


@pytest.mark.parametrize("change, error, match", [
    ({"tokenizer.ggml.model": None}, TokenizerError, "tokenizer.ggml.model"),
    ({"tokenizer.ggml.model": "nonsense"}, TokenizerError, "'nonsense' is not a tokenizer"),
    ({"tokenizer.ggml.model": "bert"}, UnsupportedTokenizer, "tokenizer model 'bert'"),
    ({"tokenizer.ggml.pre": "no-such-pre"}, TokenizerError, "'no-such-pre' is not a pre-tokenizer"),
    ({"tokenizer.ggml.pre": "deepseek-llm"}, UnsupportedTokenizer, "pre-tokenizer 'deepseek-llm'"),
    ({"tokenizer.ggml.merges": None}, TokenizerError, "tokenizer.ggml.merges is missing"),
    ({"tokenizer.ggml.tokens": None}, TokenizerError, "tokenizer.ggml.tokens is missing"),
    ({"tokenizer.ggml.add_bos_token": (ValueType.UINT32, 1)}, TokenizerError, "stored as uint32; llama.cpp reads it as bool"),
    ({"tokenizer.ggml.bos_token_id": (ValueType.INT32, 1)}, TokenizerError, "stored as int32; llama.cpp reads it as uint32"),
    ({"tokenizer.ggml.token_type": np.ones(3, dtype=np.int32)}, TokenizerError, "token_type has 3 entries"),
    ({"tokenizer.ggml.scores": np.ones(3, dtype=np.float32)}, TokenizerError, "scores has 3 entries"),
    ({"tokenizer.ggml.tokens": list(BYTES) + ["a"]}, TokenizerError, "twice"),
], ids=lambda x: x if isinstance(x, str) else None)
def test_refusals(change, error, match):
    meta = bpe_meta()
    if change.get("tokenizer.ggml.tokens") is not None:
        meta["tokenizer.ggml.token_type"] = np.ones(len(change["tokenizer.ggml.tokens"]), dtype=np.int32)
    for k, v in change.items():
        if v is None:
            meta.pop(k, None)
        else:
            meta[k] = v
    with pytest.raises(error, match=match):
        Tokenizer.from_gguf(header(meta))


def test_special_ids_out_of_range_are_ignored():
    meta = bpe_meta()
    meta["tokenizer.ggml.eos_token_id"] = 10 ** 6
    tok = Tokenizer.from_gguf(header(meta))
    assert tok.eos_id == 11                # an id past the vocabulary keeps the default
    assert any("is past the vocabulary; 11 stays" in w for w in tok.vocab.warnings)


def test_bad_token_ids():
    tok = Tokenizer.from_gguf(header(bpe_meta()))
    n = tok.n_vocab
    with pytest.raises(InvalidToken, match=f"token id {n} is out of the vocabulary"):
        tok.token_to_piece(n)
    with pytest.raises(InvalidToken, match="token id -1 is out"):
        tok.detokenize([1, -1])
    with pytest.raises(InvalidToken, match="token id 99999999999 is out"):
        tok.join_pieces([99999999999])
    with pytest.raises(TypeError, match="integers"):
        tok.token_to_piece("3")
    with pytest.raises(InvalidToken, match="token id 1180591620717411303424 is out"):
        tok.detokenize([2 ** 70])
    for bad in ([1.5], [[1]], [True], ["a"]):
        with pytest.raises(TypeError, match="flat sequence of integers"):
            tok.detokenize(bad)
    assert tok.detokenize([]) == b"" and tok.join_pieces(()) == b""


def test_codepoint_past_unicode_is_refused_by_bpe():
    # llama.cpp's pre-tokenizer re-encodes codepoints and throws "invalid codepoint" above U+10FFFF
    tok = Tokenizer.from_gguf(header(bpe_meta()))
    with pytest.raises(TokenizerError, match="invalid codepoint"):
        tok.tokenize(b"a\xf7\xbf\xbf\xbfb")
    assert tok.tokenize(b"a\xffb") == tok.tokenize("a\ufffdb")   # invalid bytes are U+FFFD


def test_text_to_bytes():
    assert to_bytes("é") == b"\xc3\xa9"
    assert to_bytes("\udcff") == b"\xff"                       # surrogate escape (bankml.models.gguf's convention)
    assert to_bytes("\ud800") == b"\xed\xa0\x80"              # any other lone surrogate: its UTF-8 form
    assert to_bytes(bytearray(b"x")) == b"x"
    with pytest.raises(TypeError, match="str or bytes"):
        to_bytes(5)


def test_attributes_of_named_tokens():
    # "<|end|>" ends generation and is made CONTROL even when the GGUF says NORMAL
    meta = bpe_meta(extra_tokens=["<|end|>", "<|unused_x|>"])
    meta["tokenizer.ggml.token_type"] = np.ones(len(meta["tokenizer.ggml.tokens"]), dtype=np.int32)
    tok = Tokenizer.from_gguf(header(meta))
    end = tok.tokenize("<|end|>", parse_special=False)
    end_id = meta["tokenizer.ggml.tokens"].index("<|end|>")
    assert tok.token_attr(end_id) == ATTR_NORMAL | ATTR_CONTROL
    assert tok.eot_id == end_id and tok.is_eog(end_id)
    assert end != [end_id]


def test_many_special_occurrences():
    # a long run that every newline token matches at every position: the partition does not keep them all
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + ["\n" * k for k in range(1, 32)]
    types = np.array([2, 3, 3] + [6] * 256 + [4] * 31, dtype=np.int32)
    tok = Tokenizer.from_gguf(header({"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": tokens,
                                      "tokenizer.ggml.token_type": types, "tokenizer.ggml.add_space_prefix": False}))
    n = 200_000
    ids = tok.tokenize("\n" * n)
    assert ids == [tokens.index("\n" * 31)] * (n // 31) + [tokens.index("\n" * (n % 31))]
    tok._core.occurrence_limit = 0
    assert tok.tokenize("\n" * n) == ids


def test_concurrent_tokenize_matches_sequential():
    tok = Tokenizer.from_gguf(header(bpe_meta(extra_tokens=["<|end|>"])))
    rng = np.random.default_rng(7)
    texts = ["".join(rng.choice(list("helo wrd<|end>é😀\n"), size=rng.integers(1, 400))) for _ in range(200)]
    want = [tok.tokenize(t) for t in texts]
    got: dict[int, list] = {}

    def work(k: int) -> None:
        for i in range(k, len(texts), 4):
            got[i] = tok.tokenize(texts[i])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [got[i] for i in range(len(texts))] == want
