"""bankml.grammar.chat: the chat template's response-format grammar and the content parsed from a JSON answer.

Records: tests/oracle/grammar/chat.json (libllama-common's common_chat_templates_apply with a json_schema, and
common_chat_parse of outputs), server_grammar_texts.json (the grammar the chat endpoint reports).
"""

from __future__ import annotations

import hashlib
import json

import pytest

from bankml.errors import SchemaError
from bankml.grammar import chat


def _text(x) -> str:
    return bytes.fromhex(x["utf8_hex"]).decode("utf-8", "surrogateescape") if isinstance(x, dict) else x


@pytest.fixture(scope="module")
def records(oracle_dir):
    return json.loads((oracle_dir / "grammar" / "chat.json").read_text(encoding="utf-8"))


def test_response_format_grammar_matches_oracle(records):
    n_ok = n_err = 0
    for rec in records["grammars"]:
        schema = json.loads(rec["schema"])
        gp = rec.get("generation_prompt", "<|im_start|>assistant\n")
        try:
            fmt = chat.response_format(schema, gp)
        except SchemaError as e:
            assert not rec["ok"], rec["id"]
            assert e.message == rec["error"], rec["id"]
            n_err += 1
            continue
        assert rec["ok"] and not rec["lazy"], rec["id"]
        if "grammar" in rec:
            assert fmt.grammar == _text(rec["grammar"]), rec["id"]
        else:
            sha = hashlib.sha256(fmt.grammar.encode("utf-8", "surrogateescape")).hexdigest()
            assert sha == rec["grammar_sha256"], rec["id"]
        n_ok += 1
    assert n_ok >= 300 and n_err >= 20


def test_content_matches_oracle_parser(records):
    fmt = chat.response_format({"type": "object"}, "<|im_start|>assistant\n")
    n = 0
    for rec in records["contents"]:
        text = bytes.fromhex(rec["text_hex"])
        assert rec["ok"]
        got = fmt.content(text)
        if rec["empty"]:
            assert got is None, text
        else:
            assert got.encode("utf-8", "surrogateescape") == bytes.fromhex(rec["content_hex"]), text
        n += 1
    assert n >= 100


def test_chat_endpoint_reports_the_same_grammar(oracle_dir):
    path = oracle_dir / "grammar" / "server_grammar_texts.json"
    recs = json.loads(path.read_text(encoding="utf-8"))["records"]
    n = 0
    for rec in recs:
        if rec["chat_status"] != 200:
            continue
        schema = rec["schema"] or {"type": "object"}
        fmt = chat.response_format(schema, rec["chat_generation_prompt"])
        assert fmt.grammar == _text(rec["chat_grammar"]), rec["schema"]
        n += 1
    assert n >= 30


def test_fence_and_space_are_stripped():
    fmt = chat.response_format({"type": "object"}, "<|im_start|>assistant\n")
    assert fmt.content('```json\n{"a": 1}\n```') == '{"a": 1}'
    assert fmt.content('  {"a": [1, 2') == '{"a": [1, 2'
    assert fmt.content("``") is None


def test_stream_deltas_follow_successive_parses():
    fmt = chat.response_format({"type": "object"}, "<|im_start|>assistant\n")
    answer = '```json\n{"a": [1, 22], "b": "x"}\n```'
    last, sent = "", ""
    for i in range(1, len(answer) + 1):
        cur = fmt.content(answer[:i])
        if cur is None or cur == last:
            continue
        sent += chat.content_delta(last, cur)
        last = cur
    assert sent == fmt.content(answer) == '{"a": [1, 22], "b": "x"}'
    assert chat.content_delta("abc", "ab") == ""
    with pytest.raises(SchemaError, match="Invalid diff"):
        chat.content_delta("abc", "abd")


def test_schema_error_as_the_template_step_raises_it():
    assert chat.schema_error({"type": "object"}) is None
    assert chat.schema_error({"type": "nonsense"}) == "JSON schema error at #: unrecognized type nonsense"
    assert chat.schema_error({"type": "string", "pattern": "^(a$"}) == (
        "JSON schema conversion failed:\nInvalid pattern ^(a$: unbalanced parentheses")
