"""bankml.grammar.request: which grammar a request gets, and llama-server's refusals (status and body).

Records: tests/oracle/grammar/server_errors.json (llama-server b11192's answers to requests with bad grammars,
schemas and grammar fields), tokens_smollm2.json (tokenized generation prompts, inputs only).
"""

from __future__ import annotations

import json

import pytest

from bankml.grammar import GrammarVocab
from bankml.grammar import request as req

GP = "<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def vocab(smollm2_path):
    return GrammarVocab.from_gguf_file(smollm2_path)


@pytest.fixture(scope="module")
def tokens(oracle_dir):
    return json.loads((oracle_dir / "grammar" / "tokens_smollm2.json").read_text(encoding="utf-8"))["tokens"]


def resolve(endpoint: str, body: dict, vocab, tokens):
    """What bankml answers for the grammar part of a request: (200, grammar) or (status, body text)."""
    try:
        if endpoint == "/completion":
            spec = req.completion_grammar_fields(body, lambda text: tokens[text])
            gp = body.get("generation_prompt", "")
        else:
            fmt = req.chat_response_format(req.chat_json_schema(body), GP)
            spec = req.completion_grammar(req.chat_llama_params(body, fmt))
            gp = GP
        prefill = req.prefill_tokens(gp, tokens[gp], lambda t: vocab.pieces[t]) if gp else []
        return 200, req.sampler_grammar(spec, vocab, prefill)
    except req.ConstrainedRequestError as e:
        return e.status, json.dumps(req.error_body(e), ensure_ascii=False, separators=(",", ":"))


@pytest.mark.slow
@pytest.mark.oracle
def test_refusals_match_llama_server(oracle_dir, vocab, tokens):
    recs = json.loads((oracle_dir / "grammar" / "server_errors.json").read_text(encoding="utf-8"))["records"]
    recs += [r for r in json.loads((oracle_dir / "grammar" / "server_lazy.json").read_text(encoding="utf-8"))["records"]
             if r["status"] != 200]
    n_refused = 0
    for rec in recs:
        status, body = resolve(rec["endpoint"], rec["request"], vocab, tokens)
        assert status == rec["status"], rec["request"]
        if status != 200:
            assert body == rec["body"], rec["request"]
            n_refused += 1
    assert n_refused >= 20


def test_completion_field_precedence():
    assert req.completion_grammar({"prompt": "x"}) is None
    spec = req.completion_grammar({"json_schema": {"type": "integer"}})
    assert spec.kind == req.OUTPUT_FORMAT and spec.needs_prefill and "root ::=" in spec.text
    # both present: the grammar wins; a non-string grammar is no grammar
    assert req.completion_grammar({"json_schema": {"type": "integer"}, "grammar": 'root ::= "a"'}).kind == req.USER
    assert req.completion_grammar({"json_schema": {"type": "integer"}, "grammar": None}) is None
    assert req.completion_grammar({"grammar": 5}) is None
    assert req.completion_grammar({"grammar": 'root ::= "a"', "grammar_type": "tool_calls"}).needs_prefill
    assert not req.completion_grammar({"grammar": 'root ::= "a"'}).needs_prefill
    # {} means any object
    assert req.completion_grammar({"json_schema": {}}).text == req.completion_grammar(
        {"json_schema": {"type": "object"}}).text
    with pytest.raises(req.ConstrainedRequestError, match="^400: Field 'json_schema': \"json_schema\": JSON schema"):
        req.completion_grammar({"json_schema": {"type": "x"}})


def test_chat_schema_resolution():
    assert req.chat_json_schema({"messages": []}) is None
    assert req.chat_json_schema({"response_format": {"type": "json_object"}}) == {"type": "object"}
    assert req.chat_json_schema({"response_format": {"type": "text"}}) is None
    s = {"type": "integer"}
    assert req.chat_json_schema({"json_schema": s, "response_format": {"type": "json_object"}}) == s
    assert req.chat_json_schema({"json_schema": s, "response_format": {"type": "json_object", "schema": None}}) == {
        "type": "object"}
    assert req.chat_json_schema({"response_format": {"type": "json_schema", "json_schema": {"schema": s}}}) == s
    with pytest.raises(req.ConstrainedRequestError, match="^500: Cannot use both json_schema and grammar$"):
        req.chat_json_schema({"json_schema": s, "grammar": "root ::= x"})
    with pytest.raises(req.ConstrainedRequestError, match='^400: response_format type must be one of "text"'):
        req.chat_json_schema({"response_format": {"type": "xml"}})


def test_chat_grammar_wins_over_a_user_grammar(vocab):
    body = {"response_format": {"type": "json_object"}, "grammar": 'root ::= "ignored"'}
    fmt = req.chat_response_format(req.chat_json_schema(body), GP)
    spec = req.completion_grammar(req.chat_llama_params(body, fmt))
    assert spec.kind == req.TOOL_CALLS and spec.text == fmt.grammar


def test_prefill_and_its_failure(vocab, tokens):
    spec = req.completion_grammar({"grammar": 'root ::= "Sure, " [a-z]+', "grammar_type": "tool_calls"})
    g = req.sampler_grammar(spec, vocab, req.prefill_tokens("Sure, ", tokens["Sure, "], lambda t: vocab.pieces[t]))
    assert not g.allowed(vocab.pieces.index(b"Sure"))
    bad = req.completion_grammar({"grammar": 'root ::= "x"', "grammar_type": "tool_calls"})
    # the oracle rethrows a sliced copy of the exception: only "std::exception" reaches the client
    with pytest.raises(req.ConstrainedRequestError, match=r"^400: Failed to initialize samplers: std::exception$"):
        req.sampler_grammar(bad, vocab, tokens["Sure"])
    # a leading-space token is dropped when the prompt has none
    assert req.prefill_tokens("Sure", [16096], lambda t: b" Sure") == []


def test_trigger_fields():
    tok = {"<tool>": [7], "call me": [1, 2]}.get
    preserved = req.field_preserved_tokens({"preserved_tokens": ["<tool>"]}, tok)
    assert preserved == {7}
    triggers = req.field_grammar_triggers({"grammar_triggers": [{"type": 1, "value": "<tool>"},
                                                                {"type": 1, "value": "call me"},
                                                                {"type": 3, "value": "a.*"}]}, tok, preserved, True)
    assert [(t.type, t.token) for t in triggers] == [(0, 7), (1, -1), (3, -1)]
    spec = req.GrammarSpec('root ::= "x"', req.USER, True, triggers)
    assert spec.trigger_args() == (["call me", "^a.*$"], [7])
    with pytest.raises(req.ConstrainedRequestError, match="should be marked as preserved token: <tool>"):
        req.field_grammar_triggers({"grammar_triggers": [{"type": 1, "value": "<tool>"}]}, tok, set(), False)
    with pytest.raises(req.ConstrainedRequestError, match="no triggers set for lazy grammar"):
        req.field_grammar_triggers({"grammar_triggers": []}, tok, set(), True)
    with pytest.raises(req.ConstrainedRequestError, match=r"key 'type' not found"):
        req.field_grammar_triggers({"grammar_triggers": [{"value": "x"}]}, tok, set(), False)
