"""Depth and size limits (issue 19, finding 8): deep grammars, schemas and JSON bodies are parsed on explicit
stacks or refused with a message that names bankml's limit, never with Python's "maximum recursion depth"; a flat
schema of 5,000 optional properties converts (the oracle's text) and constrains an answer; an integer field the
C type cannot hold is refused with the request's number, not its int32 wrap. The limits are documented in
docs/grammar.md, docs/json_schema.md and docs/nljson.md ("Depth and size limits").

Through the app (Starlette's TestClient) on SmolLM2, one app for the module; every answer is short (n_predict 1-4).
"""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from starlette.testclient import TestClient

from bankml.cxx import nljson
from bankml.grammar import gbnf, json_schema as js
from bankml.server.app import build_app
from bankml.server.ollama import gojson

TEMPLATE_LIMIT_MESSAGE = ("tools, tool calls and chat_template_kwargs nested deeper than 256 levels are not "
                          "supported (bankml's limit)")
STRUCT_LIMIT_MESSAGE = ("request structs nested deeper than 100 levels (tool property anyOf) are not supported "
                        "(bankml's limit)")
SCHEMA_LIMIT = 100   # json_schema.MAX_SCHEMA_DEPTH, as docs/json_schema.md documents it

# Python's exception names and texts that must never reach a client
_INTERNALS = re.compile(r"recursion|RecursionError|Traceback|Exception|Error\b|__\w+__")


@pytest.fixture(scope="module")
def client(smollm2_path):
    app = build_app(["-m", str(smollm2_path), "-c", "4096", "-np", "1", "-t", "2", "--jinja", "--reasoning", "off"])
    with TestClient(app) as c:
        yield c


def _post(client, path: str, raw: bytes):
    r = client.post(path, content=raw, headers={"Content-Type": "application/json"})
    return r.status_code, r.json()


def _error(body) -> str:
    err = body["error"]
    message = err["message"] if isinstance(err, dict) else err
    assert not _INTERNALS.search(message), message
    return message


def _nest(n: int, inner: str = "") -> str:
    return "[" * n + inner + "]" * n


def _schema_text(n: int, kind: str) -> str:
    """a schema n levels deep, as JSON text (Python's json would itself recurse on it)"""
    pre, post = {"array": ('{"type":"array","items":', "}"),
                 "object": ('{"type":"object","properties":{"a":', '},"required":["a"]}'),
                 "anyOf": ('{"anyOf":[', ',{"type":"null"}]}')}[kind]
    return pre * (n - 1) + '{"type":"string"}' + post * (n - 1)


def _optional_schema(n: int) -> dict:
    return {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(n)}}


# -- GBNF --------------------------------------------------------------------------------------------------------

def test_gbnf_nesting_parses_at_any_depth():
    # llama-server b11192 answers 16,000 nested groups and crashes (stack overflow) at 20,000; bankml's parser
    # keeps its own stack: 50,000 parse, one rule a group, as the oracle numbers them
    n = 50_000
    parsed = gbnf.parse("root ::= " + "(" * n + '"a"' + ")" * n)
    assert len(parsed.rules) == n + 1
    assert parsed.rules[n] == [(gbnf.CHAR, ord("a")), (gbnf.END, 0)]
    assert parsed.symbol_ids["root_1"] == 1 and parsed.rules[0] == [(gbnf.RULE_REF, 1), (gbnf.END, 0)]


def test_deep_grammar_constrains_an_answer(client):
    n = 5_000
    body = {"prompt": "Say", "n_predict": 4, "temperature": 0, "grammar": "root ::= " + "(" * n + '"ab" | "cd"' + ")" * n}
    status, out = _post(client, "/completion", json.dumps(body).encode())
    assert status == 200, out
    assert out["content"] in ("ab", "cd")


# -- JSON schemas ------------------------------------------------------------------------------------------------

def test_optional_properties_convert_in_linear_time():
    # the oracle's json_schema_to_grammar text for 5,000 optional properties (testing/grammar_oracle.Shim.schema;
    # it takes 505 s there, its get_recursive_refs being cubic): 597,311 characters with this sha256
    text = js.to_gbnf(_optional_schema(5000))
    assert len(text) == 597_311
    assert hashlib.sha256(text.encode()).hexdigest() == \
        "05ca6723eccbd81084e122cd2e2e688c1a551e1b179caa6842ad6c64a588ab56"
    assert text.count("-rest ::= ") == 4999


def test_optional_properties_constrain_an_answer(client):
    body = {"prompt": "JSON:", "n_predict": 6, "temperature": 0, "json_schema": _optional_schema(5000)}
    status, out = _post(client, "/completion", json.dumps(body).encode())
    assert status == 200, out
    assert out["content"].startswith("{")
    assert 1 <= out["tokens_predicted"] <= 6
    # greedy: the same answer again (the compiled grammar is cached per text)
    assert _post(client, "/completion", json.dumps(body).encode())[1]["content"] == out["content"]


@pytest.mark.parametrize("kind", ["array", "object", "anyOf"])
def test_schema_at_the_limit_converts(kind):
    assert js.MAX_SCHEMA_DEPTH == SCHEMA_LIMIT
    text = js.to_gbnf(nljson.loads(_schema_text(SCHEMA_LIMIT, kind)))
    assert "\nroot ::= " in text
    assert gbnf.parse(text).symbol_ids["root"] >= 0


@pytest.mark.parametrize("kind", ["array", "object", "anyOf"])
@pytest.mark.parametrize("n", [SCHEMA_LIMIT + 1, 3000])
def test_deep_schema_is_refused_naming_the_limit(client, kind, n):
    raw = ('{"prompt":"hi","n_predict":1,"json_schema":' + _schema_text(n, kind) + "}").encode()
    status, out = _post(client, "/completion", raw)
    assert status == 400
    assert _error(out) == ("Field 'json_schema': \"json_schema\": JSON schema conversion failed:\n"
                           "JSON schema nesting deeper than 100 levels is not supported (bankml's limit)")


def test_ref_chain_is_refused_naming_the_limit():
    defs = {f"a{i}": {"$ref": f"#/$defs/a{i + 1}"} for i in range(2000)}
    defs["a2000"] = {"type": "integer"}
    with pytest.raises(js.SchemaError) as e:
        js.to_gbnf({"$ref": "#/$defs/a0", "$defs": defs})
    assert e.value.message.endswith("nesting deeper than 100 levels is not supported (bankml's limit)")


def test_long_property_name_with_additional_properties():
    # the trie of known names (not_strings) is walked on a stack: a 5,000-character name
    name = "k" * 5000
    text = js.to_gbnf({"type": "object", "properties": {name: {"type": "null"}}, "additionalProperties": True})
    assert text.count("[k] (") == 4999


def test_chat_schema_refused_naming_the_limit(client):
    raw = ('{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"response_format":{"type":"json_schema",'
           '"json_schema":{"schema":' + _schema_text(500, "object") + "}}}").encode()
    status, out = _post(client, "/v1/chat/completions", raw)
    assert status == 400
    assert "JSON schema nesting deeper than 100 levels is not supported (bankml's limit)" in _error(out)


# -- deep JSON bodies --------------------------------------------------------------------------------------------

def test_deep_unknown_field_on_completion(client):
    raw = b'{"prompt":"hi","n_predict":1,"temperature":0,"x":' + _nest(100_000).encode() + b"}"
    status, out = _post(client, "/completion", raw)
    assert status == 200 and out["tokens_predicted"] == 1


def test_deep_unknown_field_on_chat(client):
    raw = (b'{"messages":[{"role":"user","content":"hi","x":' + _nest(100_000).encode() + b'}],"max_tokens":1,'
           b'"temperature":0,"y":' + _nest(100_000).encode() + b"}")
    status, out = _post(client, "/v1/chat/completions", raw)
    assert status == 200 and out["usage"]["completion_tokens"] == 1


def test_deep_value_inside_response_format_schema(client):
    # an unknown keyword holding a value 100,000 deep: the schema is copied, dumped and read on explicit stacks
    raw = (b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"response_format":{"type":"json_object",'
           b'"schema":{"x":' + _nest(100_000).encode() + b"}}}")
    status, out = _post(client, "/v1/chat/completions", raw)
    assert status == 200, out


def test_deep_tools_are_refused_naming_the_limit(client):
    deep = _nest(100_000)
    raw = ('{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"tools":[{"type":"function","function":'
           '{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"array","default":' + deep
           + "}}}}}]}").encode()
    status, out = _post(client, "/v1/chat/completions", raw)
    assert status == 400
    assert _error(out) == TEMPLATE_LIMIT_MESSAGE


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/apply-template"])
@pytest.mark.parametrize("n", [257, 100_000])
def test_deep_template_kwargs_are_refused_naming_the_limit(client, path, n):
    # llama-server renders 1,000 levels and crashes at 100,000
    raw = (b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":1,"chat_template_kwargs":{"x":'
           + _nest(n - 1).encode() + b"}}")
    status, out = _post(client, path, raw)
    assert status == 400
    assert _error(out) == TEMPLATE_LIMIT_MESSAGE


def test_template_kwargs_at_the_limit(client):
    raw = (b'{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"x":' + _nest(255).encode()
           + b"}}")
    status, out = _post(client, "/apply-template", raw)
    assert status == 200 and out["prompt"].endswith("<|im_start|>assistant\n")


def test_dump_and_loads_python_at_any_depth():
    v = nljson.loads(_nest(100_000, "1"))
    assert nljson.depth(v) == 100_000
    assert nljson.dump(v) == _nest(100_000, "1")
    assert nljson.dump(nljson.loads_python(_nest(50_000, '"a"'))) == _nest(50_000, '"a"')
    assert nljson.dump([[1, {"a": [2]}]], 2) == '[\n  [\n    1,\n    {\n      "a": [\n        2\n      ]\n    }\n  ]\n]'


# -- Ollama: Go's decoder ----------------------------------------------------------------------------------------

def test_go_max_depth():
    # encoding/json's scanner (scanner.go, pushParseState): 10,000 levels read, the next opening bracket is
    # "exceeded max depth"; Go then decodes whatever depth it read, and so does bankml
    with pytest.raises(gojson.BindError) as e:
        gojson.bind(_nest(10_001).encode(), "ChatRequest")
    assert str(e.value) == "invalid character '[' exceeded max depth"
    with pytest.raises(gojson.BindError) as e:
        gojson.bind(b'{"model":' + _nest(10_000).encode() + b"}", "ChatRequest")
    assert str(e.value) == "invalid character '[' exceeded max depth"
    with pytest.raises(gojson.BindError) as e:
        gojson.bind(b'{"model":' + _nest(9_999).encode() + b"}", "ChatRequest")
    assert str(e.value) == "json: cannot unmarshal array into Go struct field ChatRequest.model of type string"
    with pytest.raises(gojson.BindError) as e:
        gojson.bind(b'{"model":' + _nest(5_000, "1 2").encode() + b"}", "ChatRequest")
    assert str(e.value) == "invalid character '2' after array element"
    deep = _nest(9_997, '{"k":1.50}')
    out = gojson.bind(b'{"model":"m","options":{"x":' + deep.encode() + b'},"format":' + deep.encode() + b"}",
                      "ChatRequest")
    assert out["model"] == "m" and out["format"] == deep and nljson.depth(out["options"]) == 9_999


def test_go_struct_nesting_limit():
    def prop(n):  # api.ToolProperty n deep through anyOf
        return '{"anyOf":[' * (n - 1) + '{"type":"string"}' + "]}" * (n - 1)

    def body(n):
        return ('{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",'
                '"properties":{"a":' + prop(n) + "}}}}]}").encode()
    # ChatRequest, Tool, ToolFunction, ToolFunctionParameters: 4 structs around the properties
    out = gojson.bind(body(96), "ChatRequest")
    assert out["tools"][0]["function"]["name"] == "f"
    with pytest.raises(gojson.BindError) as e:
        gojson.bind(body(97), "ChatRequest")
    assert str(e.value) == STRUCT_LIMIT_MESSAGE


def test_ollama_deep_bodies(client):
    status, out = _post(client, "/api/chat", _nest(10_001).encode())
    assert status == 400 and _error(out) == "invalid character '[' exceeded max depth"
    raw = b'{"model":"smollm2","messages":[{"role":"user","content":"hi"}],"x":' + _nest(100_000).encode() + b"}"
    status, out = _post(client, "/api/chat", raw)
    assert status == 400 and _error(out) == "invalid character '[' exceeded max depth"
    # an unknown field 9,000 deep is read and ignored, as Go does: the answer is the model's
    raw = (b'{"model":"smollm2-135m-instruct-q4_1","messages":[{"role":"user","content":"hi"}],"stream":false,'
           b'"options":{"num_predict":1,"temperature":0},"x":' + _nest(9_000).encode() + b"}")
    status, out = _post(client, "/api/chat", raw)
    assert status == 200, out
    assert out["done"] is True and out["eval_count"] == 1


# -- integers the C type cannot hold ---------------------------------------------------------------------------

@pytest.mark.parametrize("field,raw,shown", [
    ("n_predict", "1000000000000", "1000000000000"),       # llama-server: "but got -727379968"
    ("n_predict", "4294967301", "4294967301"),             # llama-server runs it as n_predict 5
    ("n_predict", "1e12", "1000000000000.0"),              # llama-server: "but got -2147483648"
    ("n_keep", "-3000000000", "-3000000000"),
    ("repeat_last_n", "3000000000", "3000000000"),
    ("t_max_predict_ms", "18446744073709551615", "18446744073709551615"),  # llama-server runs it as -1
])
def test_out_of_range_integer_shows_the_request_value(client, field, raw, shown):
    status, out = _post(client, "/completion", f'{{"prompt":"hi","n_predict":1,"{field}":{raw}}}'.encode()
                        if field != "n_predict" else f'{{"prompt":"hi","n_predict":{raw}}}'.encode())
    assert status == 400
    message = _error(out)
    assert message.startswith(f"Field '{field}': Value must be between ")
    assert message.endswith(f", but got {shown}")


def test_in_range_integer_refusal_unchanged(client):
    status, out = _post(client, "/completion", b'{"prompt":"hi","n_predict":-2}')
    assert status == 400
    assert _error(out) == "Field 'n_predict': Value must be between -1 <= value <= 2147483647, but got -2"
