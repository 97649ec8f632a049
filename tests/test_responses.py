"""The OpenAI Responses API (POST /v1/responses, /responses, /v1/responses/input_tokens) as llama-server b11192
serves it.

- llama-server's recorded answers (tests/oracle/server/responses.json, recorded by testing/record_responses.py)
  replayed in order on a fresh bankml-serve: identical after tests/server_replay.normalize (the random resp_ /
  msg_ ids and the clock; streams event by event, `event:` lines included). Within each answer the ids that
  normalization blanks are checked to be the ones llama-server repeats (one response id per stream, one message
  id for every event of the message).
- The rewrite of a Responses body into an OpenAI chat body (families.responses.convert) against the chat body
  llama-server logged for each recorded request, key order included.
- The real `openai` client (responses.create, streamed and not) against bankml-serve.
"""

from __future__ import annotations

import json

import pytest

import server_replay as sr
from bankml.server.api.families.responses import ConversionError, convert

SESSIONS = sr.load("responses.json")
STEPS = [s for sess in SESSIONS for s in sess["steps"]]
PATHS = {"/v1/responses", "/responses", "/v1/responses/input_tokens", "/responses/input_tokens"}


def test_enough_requests_recorded():
    assert len(STEPS) >= 40
    assert sum("sse" in s["answer"] for s in STEPS) >= 10
    assert sum(s["answer"]["status"] >= 400 for s in STEPS) >= 20
    assert {s["request"]["path"] for s in STEPS} == PATHS
    assert sum("converted" in s for s in STEPS) >= 30


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_responses_session_replays_identically(session, smollm2_path):
    problems, raw = sr.replay_responses(session, str(smollm2_path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])
    # the non-stream answers' two clocks are one reading (server-task.cpp:585)
    for a in raw:
        if isinstance(a.get("json"), dict) and "completed_at" in a["json"]:
            assert a["json"]["completed_at"] == a["json"]["created_at"] > 0


# --- the rewrite ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("i", [i for i, s in enumerate(STEPS) if "body" in s["request"]
                               and s["request"]["path"] in ("/v1/responses", "/responses")])
def test_convert_is_llama_servers(i):
    step = STEPS[i]
    if "converted" not in step:
        # llama-server refused the body in its rewrite (no chat body logged): so does convert, with its text
        err = step["answer"]["json"]["error"]
        with pytest.raises(ConversionError) as e:
            convert(step["request"]["body"])
        assert (400, str(e.value)) == (err["code"], err["message"])
        return
    got = convert(step["request"]["body"])
    assert json.dumps(got, ensure_ascii=False) == json.dumps(step["converted"], ensure_ascii=False)


def test_convert_tools_and_reasoning():
    out = convert({"input": "hi", "tools": [{"type": "function", "name": "f", "parameters": {}},
                                            {"type": "web_search"}, 5,
                                            {"type": "function", "name": "g", "strict": False}],
                   "reasoning": {"effort": "high"}, "max_output_tokens": 7, "max_tokens": 3})
    assert out == {"max_tokens": 7, "messages": [{"role": "user", "content": "hi"}],
                   "tools": [{"type": "function", "function": {"name": "f", "parameters": {}, "strict": True}},
                             {"type": "function", "function": {"name": "g", "strict": False}}],
                   "reasoning_effort": "high"}
    # only tools of other types: no tools key at all
    assert "tools" not in convert({"input": "hi", "tools": [{"type": "file_search"}]})
    assert "reasoning" not in convert({"input": "hi", "reasoning": "x"})


def test_convert_merges_assistant_items():
    out = convert({"input": [
        {"type": "reasoning", "summary": [], "content": [{"text": "t"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "message", "role": "assistant", "content": "a"},
        {"type": "function_call_output", "call_id": "c1",
         "output": [{"type": "input_text", "text": "4"}, {"type": "input_image", "image_url": "u"}]}]})
    assert out["messages"] == [
        {"role": "assistant", "content": [{"text": "a", "type": "text"}], "reasoning_content": "t",
         "tool_calls": [{"function": {"arguments": "{}", "name": "f"}, "id": "c1", "type": "function"}]},
        {"content": [{"type": "text", "text": "4"}, {"type": "image_url", "image_url": {"url": "u"}}],
         "role": "tool", "tool_call_id": "c1"}]


def test_convert_refusals():
    for body, msg in [({"input": "x", "previous_response_id": "r"}, "llama.cpp does not support"),
                      ({"input": [{"type": "reasoning", "summary": []}]}, "item['content'] is not an array"),
                      ({"input": [{"type": "function_call_output", "call_id": "c", "output": [5]}]},
                       "Output of tool call missing 'type' field"),
                      ("input", "'input' is required")]:
        with pytest.raises(ConversionError, match=msg.replace("[", r"\[").replace("]", r"\]")):
            convert(body)


# --- the real client --------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.oracle
def test_openai_client_responses(smollm2_path):
    openai = pytest.importorskip("openai")
    argv = sr.server_argv(SESSIONS[0]["flags"], str(smollm2_path))
    with sr.BankmlServe(argv) as srv:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="none")
        inp = [{"role": "system", "content": "Book"}, {"role": "user", "content": "What is the best book"}]
        r = client.responses.create(model="gpt-4.1", input=inp, max_output_tokens=8, temperature=0)
        assert r.id.startswith("resp_") and r.status == "completed" and r.object == "response"
        assert r.output[0].id.startswith("msg_") and r.output_text
        assert r.usage.output_tokens == 8 and r.usage.total_tokens == r.usage.input_tokens + 8
        events = list(client.responses.create(model="gpt-4.1", input=inp, max_output_tokens=8, temperature=0,
                                              stream=True))
        kinds = [e.type for e in events]
        assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                             "response.content_part.added"]
        assert kinds[-4:] == ["response.output_text.done", "response.content_part.done",
                              "response.output_item.done", "response.completed"]
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        done = events[-1].response
        assert deltas == done.output_text == r.output_text
        assert {e.response.id for e in events if hasattr(e, "response")} == {done.id}
        assert {getattr(e, "item_id", None) or e.item.id for e in events[2:-1]} == {done.output[0].id}
        # a second turn from the first answer's output items, as a client carries a conversation on
        r2 = client.responses.create(model="gpt-4.1", input=inp + [o.model_dump() for o in r.output]
                                     + [{"role": "user", "content": "Why?"}], max_output_tokens=4, temperature=0)
        assert r2.status == "completed" and r2.usage.input_tokens > r.usage.input_tokens
        with pytest.raises(openai.BadRequestError) as e:
            client.responses.create(model="gpt-4.1", input="hi", previous_response_id="resp_1")
        assert e.value.body["message"] == "llama.cpp does not support 'previous_response_id'."
        # function tools: SmolLM2's template has no tool support, so the answer is the one without tools
        # (function_call items: tests/test_responses_tools.py)
        t = client.responses.create(model="gpt-4.1", input=inp, max_output_tokens=8, temperature=0, tools=[
            {"type": "function", "name": "f", "parameters": {"type": "object"}}])
        assert [o.type for o in t.output] == ["message"] and t.output_text == r.output_text
        n = client.responses.input_tokens.count(model="gpt-4.1", input=inp) \
            if hasattr(client.responses, "input_tokens") else None
        if n is not None:
            assert n.input_tokens == r.usage.input_tokens
