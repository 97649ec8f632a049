"""bankml.grammar.json_schema: b11192's schema-to-grammar conversion, text for text.

Records: tests/oracle/grammar/schemas.json (libllama-common's json_schema_to_grammar over ~560 schemas),
server_grammar_texts.json (the grammar llama-server reports in /completion's generation_settings).
"""

from __future__ import annotations

import hashlib
import json

import pytest

from bankml.errors import SchemaError
from bankml.grammar import json_schema as js


def _text(x) -> str:
    return bytes.fromhex(x["utf8_hex"]).decode("utf-8", "surrogateescape") if isinstance(x, dict) else x


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def test_converter_matches_oracle(oracle_dir):
    records = json.loads((oracle_dir / "grammar" / "schemas.json").read_text(encoding="utf-8"))["records"]
    assert len(records) >= 500
    n_ok = n_err = 0
    for rec in records:
        schema = json.loads(rec["schema"])
        try:
            got = js.to_gbnf(schema)
        except SchemaError as e:
            assert not rec["ok"], rec["id"]
            assert e.message == rec["error"], rec["id"]
            n_err += 1
            continue
        assert rec["ok"], rec["id"]
        if "grammar" in rec:
            assert got == _text(rec["grammar"]), rec["id"]
        else:
            assert _sha(got) == rec["grammar_sha256"], rec["id"]
        n_ok += 1
    assert n_ok >= 400 and n_err >= 30


def test_server_reports_the_same_text(oracle_dir):
    records = json.loads((oracle_dir / "grammar" / "server_grammar_texts.json").read_text(encoding="utf-8"))["records"]
    n = 0
    for rec in records:
        if rec["completion_status"] != 200:
            continue
        schema = rec["schema"]
        schema = {"type": "object"} if schema == {} else schema
        assert js.to_gbnf(schema) == _text(rec["completion_grammar"]), rec["schema"]
        n += 1
    assert n >= 30


@pytest.mark.parametrize("value, text", [
    (1.0, "1.0"), (0.1, "0.1"), (1e15, "1e+15"), (1e14, "100000000000000.0"), (2e-7, "2e-07"),
    (0.0001, "0.0001"), (1e-5, "1e-05"), (-0.0, "-0.0"), (1.5e300, "1.5e+300"), (123.456, "123.456"),
    (12345678901234567890, "12345678901234567890"), (123456789012345678901, "1.2345678901234568e+20"),
    ("a\"b\\c\n\x01é", '"a\\"b\\\\c\\n\\u0001é"'), ({"b": [1, None, True]}, '{"b":[1,null,true]}'),
])
def test_dump_like_nlohmann(value, text):
    # the texts are nlohmann::json's dump() format (decimal exponent window (-4, 15], two-digit exponents)
    assert js.dump(value) == text


@pytest.mark.parametrize("schema, match", [
    ({"type": "nonsense"}, "JSON schema error at #: unrecognized type nonsense"),
    ({"properties": {"a": {"type": "x"}}}, "JSON schema error at #/properties/a: unrecognized type x"),
    ({"anyOf": []}, "JSON schema error at #/anyOf: must not be empty"),
    ({"$ref": "#/nope"}, "JSON schema error at #: cannot resolve \\$ref #/nope, nope not found"),
    ({"type": "string", "pattern": "^(a$"}, "Invalid pattern \\^\\(a\\$: unbalanced parentheses"),
    ("text", "JSON schema error at #: schema must be an object"),
])
def test_refusals_carry_the_oracle_message(schema, match):
    with pytest.raises(SchemaError, match="^JSON schema conversion failed:\n" + match):
        js.to_gbnf(schema)


def test_integer_ranges_parse_as_gbnf():
    from bankml.grammar import gbnf
    for lo, hi in [(0, 9), (-17, 4321), (99, 101), (-256, -5), (7, None), (None, -3)]:
        s = {"type": "integer"}
        if lo is not None:
            s["minimum"] = lo
        if hi is not None:
            s["maximum"] = hi
        assert gbnf.parse(js.to_gbnf(s)).rules
