"""bankml.cxx.nljson: request bodies accepted and refused as llama-server b11192's nlohmann::json does, with its
error messages (replayed from tests/oracle/tokenizer/http.json: every body llama-server refused while parsing)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bankml.cxx.nljson import JSONParseError, loads
from tokenizer_oracle import dec_bytes

HTTP = json.loads((Path(__file__).parent / "oracle" / "tokenizer" / "http.json").read_text())
PARSE_ERRORS = [c for c in HTTP if c["status"] == 500 and c["response"]["error"]["message"].startswith(
    ("[json.exception.parse_error", "[json.exception.out_of_range"))]
ACCEPTED = [c for c in HTTP if c["status"] == 200]


@pytest.mark.oracle
@pytest.mark.parametrize("case", PARSE_ERRORS, ids=lambda c: repr(dec_bytes(c["body"])[:40]))
def test_refused_like_llama_server(case):
    with pytest.raises(JSONParseError) as e:
        loads(dec_bytes(case["body"]))
    assert str(e.value) == case["response"]["error"]["message"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", ACCEPTED, ids=lambda c: repr(dec_bytes(c["body"])[:40]))
def test_accepted_like_llama_server(case):
    loads(dec_bytes(case["body"]))


def test_some_of_each_were_recorded():
    assert len(PARSE_ERRORS) >= 40 and len(ACCEPTED) >= 20


@pytest.mark.parametrize("text", [
    b'{"a": [1, -2, 3.5, "x\\u00e9", true, false, null, {}], "b": {"c": []}}',
    b'  [1e-400, -0, 0.0, 18446744073709551615, -9223372036854775808]  ',
    b'"\\ud83d\\ude00"',
    b'{"a": 1, "a": 2}',
], ids=repr)
def test_values_match_pythons_json(text):
    assert loads(text) == json.loads(text)


def test_what_python_reads_differently():
    assert loads(b"\xef\xbb\xbf[1]") == [1]                         # BOM skipped
    assert loads(b'{"a": 1}\x00trailing bytes') == {"a": 1}        # NUL ends the input
    big = loads(b"[123456789012345678901234567890]")[0]            # past uint64: a double
    assert isinstance(big, float) and big == 1.2345678901234568e29
    deep = loads(b"[" * 5000 + b"]" * 5000)                        # no depth limit
    for _ in range(4999):
        deep = deep[0]
    assert deep == []
    with pytest.raises(JSONParseError, match=r"number overflow parsing '1e999'"):
        loads(b"[1e999]")
    with pytest.raises(JSONParseError, match="invalid literal"):
        loads(b"NaN")
    assert math.isfinite(loads(b"1.7976931348623157e308"))


def test_long_bodies_are_walked_in_runs():
    # the recorded '{"content": "\ud800"' answer, with 100,000 more bytes before the surrogate: the column moves
    # by as much, and "last read" holds them (the byte-level parser takes such runs at once)
    small = next(c for c in PARSE_ERRORS if dec_bytes(c["body"]) == b'{"content": "\\ud800"}')
    want = small["response"]["error"]["message"].replace("column 20", "column 100020")
    want = want.replace("last read: '\"", "last read: '\"" + "a" * 100_000)
    with pytest.raises(JSONParseError) as e:
        loads(b'{"content": "' + b"a" * 100_000 + b'\\ud800"}')
    assert str(e.value) == want
    assert loads(b" " * 1_000_000 + b"[1" + b"0" * 400 + b"e-400]") == [1.0]


# --- how nlohmann writes a double (bankml.cxx._dtoa) -------------------------------------------------------------

FLOATS = json.loads((Path(__file__).parent / "oracle" / "nljson" / "floats.json").read_text())


def test_doubles_written_as_nlohmann_writes_them():
    """Every one of the 900,529 seeded doubles (tests/nljson_floats.py: edges, random bits, floats widened to double)
    dumps to nlohmann's own text (testing/record_nljson_floats.py ran json(x).dump() on them): the sha256 of all the
    texts, and 3,000 of them one by one."""
    import hashlib

    import numpy as np

    from bankml.cxx import _dtoa, nljson
    from nljson_floats import SEED, inputs

    assert FLOATS["seed"] == SEED
    values = inputs()
    assert len(values) == FLOATS["n"]
    texts = _dtoa.array_text(values)[1:-1].split(",")
    assert hashlib.sha256(("\n".join(texts) + "\n").encode()).hexdigest() == FLOATS["sha256"]
    kept = [(np.frombuffer(bytes.fromhex(h), "<f8")[0], t) for h, t in FLOATS["kept"]]
    assert [nljson.dump(float(x)) for x, _ in kept] == [t for _, t in kept]
    # Grisu2 is not always the shortest text: some of these are longer than Python's repr
    mid = [(x, t) for x, t in zip(values[:300_000].tolist(), texts) if 1e-4 < abs(x) < 1e15]
    assert sum(len(t.lstrip("-")) > len(repr(abs(x))) for x, t in mid) > 0
