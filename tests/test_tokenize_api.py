"""bankml.server.api.tokenize: POST /tokenize and /detokenize on a tiny Starlette app, against llama-server
b11192's answers (tests/oracle/tokenizer/http.json, recorded by testing/record_tokenizer.py --http)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from bankml.server.api.tokenize import routes, to_int32, valid_utf8_loose
from bankml.tokenizer import Tokenizer
from tokenizer_oracle import dec_bytes

HTTP = json.loads((Path(__file__).parent / "oracle" / "tokenizer" / "http.json").read_text())


def client_for(tok) -> TestClient:
    app = Starlette(routes=routes)
    app.state.tokenizer = tok
    return TestClient(app)


@pytest.fixture(scope="module")
def smollm2_client(smollm2_path):
    with client_for(Tokenizer.from_file(smollm2_path)) as c:
        yield c


def case_id(case) -> str:
    body = dec_bytes(case["body"])
    return f"{case['path']}:{body[:40]!r}"


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("case", HTTP, ids=case_id)
def test_llama_server_answer(smollm2_client, case):
    r = smollm2_client.post(case["path"], content=dec_bytes(case["body"]))
    assert (r.status_code, r.json()) == (case["status"], case["response"])
    assert r.headers["content-type"] == "application/json; charset=utf-8"


@pytest.mark.slow
@pytest.mark.parametrize("path, body", [
    ("/tokenize", {"content": "Hi é 😀", "with_pieces": True}),
    ("/detokenize", {"tokens": [1, 2, 3]}),
    ("/tokenize", {"content": 7}),
])
def test_answers_are_compact_sorted_utf8_json(smollm2_client, path, body):
    # nlohmann's dump(): no spaces, keys in std::map order, UTF-8 written as is
    r = smollm2_client.post(path, json=body)
    assert r.content == json.dumps(r.json(), ensure_ascii=False, separators=(",", ":"), sort_keys=True).encode()
    assert r.content.startswith(b'{"') and b'": ' not in r.content


@pytest.mark.parametrize("value, want", [
    (5, 5), (-3, -3), (True, 1), (False, 0), (1.9, 1), (-1.9, -1), (2147483647.9, 2147483647),
    (3e9, -2147483648), (-3e9, -2147483648), (1e20, -2147483648), (float("nan"), -2147483648),
    (4294967297, 1), (2 ** 63 + 5, 5), (-(2 ** 63), 0), (2 ** 64 + 5, -2147483648),
], ids=repr)
def test_int_conversion_is_nlohmanns(value, want):
    # get<int>() on a JSON number: truncation, INT_MIN outside int32 (cvttsd2si), 64-bit integers wrapped
    assert to_int32(value) == want


@pytest.mark.parametrize("value", [None, "3", [1], {"a": 1}])
def test_int_conversion_refuses_other_types(value):
    with pytest.raises(Exception, match="type must be number"):
        to_int32(value)


@pytest.mark.parametrize("data, ok", [
    (b"abc", True), (b"\xc3\xa9", True), (b"\xf0\x9f\x98", False), (b"\x80", False), (b"\xc0\x80", True),
    (b"\xed\xa0\x80", True), (b"\xf7\xbf\xbf\xbf", True), (b"\xf8\x80\x80\x80\x80", False), (b"", True),
], ids=repr)
def test_loose_utf8_check(data, ok):
    # llama-server's is_valid_utf8 looks at lead and continuation bytes only
    assert valid_utf8_loose(data) is ok
