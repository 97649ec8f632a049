"""The Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens) as llama-server b11192 serves it.

- llama-server's recorded answers (tests/oracle/server/anthropic.json, recorded by testing/record_anthropic.py)
  replayed in order on a fresh bankml-serve: identical after tests/server_replay.normalize (the chatcmpl id;
  streams event by event, `event:` lines included).
- The rewrite of an Anthropic body into an OpenAI chat body (families.anthropic.convert), case by case.
- The real `anthropic` client (messages.create, messages.stream, messages.count_tokens) against bankml-serve.
"""

from __future__ import annotations

import json

import pytest

import server_replay as sr
from bankml.server.api.families.anthropic import ConversionError, _billing, convert

SESSIONS = sr.load("anthropic.json")


def test_enough_requests_recorded():
    steps = [s for sess in SESSIONS for s in sess["steps"]]
    assert len(steps) >= 30
    assert any("sse" in s["answer"] for s in steps)
    assert {s["request"]["path"] for s in steps} == {"/v1/messages", "/v1/messages/count_tokens"}


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_anthropic_session_replays_identically(session, smollm2_path):
    problems = sr.replay(session, str(smollm2_path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])


# --- the rewrite ------------------------------------------------------------------------------------------------

def test_convert_system_blocks_and_defaults():
    out = convert({"system": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}],
                   "messages": [{"role": "user", "content": "hi"}], "stop_sequences": ["x"], "top_k": 3,
                   "model": "m", "metadata": {"user_id": "u"}, "thinking": {"type": "enabled"}})
    assert out == {"messages": [{"role": "system", "content": "ab"}, {"role": "user", "content": "hi"}],
                   "stop": ["x"], "max_tokens": 4096, "top_k": 3, "thinking_budget_tokens": 10000,
                   "__metadata_user_id": "u"}


def test_convert_blocks_of_a_message():
    out = convert({"messages": [
        {"role": "assistant"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"},
                                          {"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1",
                                      "content": [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}]},
                                     {"type": "image", "source": {"type": "url", "url": "u"}}]}]})
    assert out["messages"] == [
        {"role": "assistant", "content": "", "reasoning_content": "t",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "42"}]


def test_convert_needs_messages():
    for body in ({}, [1], "x", {"system": "s"}):
        with pytest.raises(ConversionError, match="'messages' is required"):
            convert(body)


def test_billing_header_stamp_is_blanked():
    s = "x-anthropic-billing-header: cc_version=2.1; cch=a5145; You are Claude"
    assert _billing(s) == "x-anthropic-billing-header: cc_version=2.1; cch=fffff; You are Claude"
    assert _billing("cch=a5145; x") == "cch=a5145; x"
    assert _billing("x-anthropic-billing-header: cch=a51") == "x-anthropic-billing-header: cch=a51"


# --- the real client --------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.oracle
def test_anthropic_client(smollm2_path):
    anthropic = pytest.importorskip("anthropic")
    argv = sr.server_argv(SESSIONS[0]["flags"], str(smollm2_path))
    with sr.BankmlServe(argv) as srv:
        client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{srv.port}", api_key="none")
        msgs = [{"role": "user", "content": "Hello"}]
        m = client.messages.create(model="smollm2", max_tokens=8, messages=msgs, extra_body={"temperature": 0},
                                   system="Be brief.")
        assert m.type == "message" and m.role == "assistant" and m.stop_reason == "max_tokens"
        assert m.usage.output_tokens == 8 and m.content[0].type == "text" and m.content[0].text
        with client.messages.stream(model="smollm2", max_tokens=8, messages=msgs, extra_body={"temperature": 0},
                                    system="Be brief.") as stream:
            streamed = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert streamed == m.content[0].text == final.content[0].text
        assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 8
        n = client.messages.count_tokens(model="smollm2", messages=msgs, system="Be brief.")
        assert n.input_tokens == m.usage.input_tokens + m.usage.cache_read_input_tokens
        with pytest.raises(anthropic.InternalServerError) as e:
            client.messages.create(model="smollm2", max_tokens=8, messages=[
                {"role": "user", "content": [{"type": "image", "source": {
                    "type": "url", "url": "https://example.com/a.png"}}]}])
        assert "image input is not supported" in json.dumps(e.value.body)
        # tools: SmolLM2's template has no tool support, so llama-server answers as it does without them
        # (bankml.chat.tools; chat-diff-analyzer.cpp:261 (b11192))
        plain = client.messages.create(model="smollm2", max_tokens=8, messages=msgs, extra_body={"temperature": 0})
        with_tools = client.messages.create(model="smollm2", max_tokens=8, messages=msgs, tools=[
            {"name": "f", "description": "d", "input_schema": {"type": "object"}}], extra_body={"temperature": 0})
        assert with_tools.stop_reason == "max_tokens" and [b.type for b in with_tools.content] == ["text"]
        assert with_tools.content[0].text == plain.content[0].text
