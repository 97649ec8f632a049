"""bankml.server.api.families: the table of generation routes, the stream framings, the merges, and the one
refusal class (bankml.server.http.Refusal) with bankml.EngineError over it. No model needed."""

from __future__ import annotations

import bankml
from bankml.server.api import completion as completion_api
from bankml.server.api.families import ANTHROPIC, COMPLETION, OAI_CHAT, OAI_COMPLETIONS, OAI_RESPONSES, TABLE
from bankml.server.api.families.base import SSE, Family
from bankml.server.http import Refusal, error_body


def test_the_table_mounts_every_generation_path_once():
    paths = [p for ps, _ in TABLE for p in ps]
    assert paths == ["/completion", "/completions", "/v1/completions", "/chat/completions", "/v1/chat/completions",
                     "/v1/messages", "/v1/responses", "/responses"]
    assert all(isinstance(f, Family) and f.name for _, f in TABLE)
    assert [r.path for r in completion_api.routes] == paths
    assert all(r.methods >= {"POST"} for r in completion_api.routes)
    assert {f for _, f in TABLE} == {COMPLETION, OAI_COMPLETIONS, OAI_CHAT, ANTHROPIC, OAI_RESPONSES}


def test_framings():
    assert COMPLETION.framing.end() == b"" and OAI_COMPLETIONS.framing.end() == b"data: [DONE]\n\n"
    assert OAI_CHAT.framing.end() == b"data: [DONE]\n\n"
    sse = SSE(done=False)
    assert sse.chunk({"a": "é", "b": 1}) == 'data: {"a":"é","b":1}\n\n'.encode()
    assert sse.ping() == b":\n\n"
    assert sse.chunk(COMPLETION.refused(Refusal(400, "bad"))) == \
        b'data: {"error":{"code":400,"message":"bad","type":"invalid_request_error"}}\n\n'
    assert sse.headers == {"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}


def test_merges():
    assert COMPLETION.merge([{"index": 0}, {"index": 1}]) == [{"index": 0}, {"index": 1}]
    a, b = {"choices": [{"index": 0}], "id": "x"}, {"choices": [{"index": 1}], "id": "x"}
    assert OAI_CHAT.merge([a, b]) == {"choices": [{"index": 0}, {"index": 1}], "id": "x"}


def test_one_refusal_and_its_body():
    r = Refusal(400, "too long", "exceed_context_size_error", n_prompt_tokens=9, n_ctx=8)
    assert r.json() == {"error": {"code": 400, "message": "too long", "type": "exceed_context_size_error",
                                  "n_prompt_tokens": 9, "n_ctx": 8}}
    assert error_body("x", 501) == {"error": {"code": 501, "message": "x", "type": "not_supported_error"}}
    assert isinstance(r, bankml.errors.BankmlError)
    e = bankml.EngineError(400, r.json())
    assert isinstance(e, Refusal) and e.status == 400 and e.body == r.json() and str(e) == "400: too long"
    assert e.extra == {"n_prompt_tokens": 9, "n_ctx": 8} and e.type == "exceed_context_size_error"
