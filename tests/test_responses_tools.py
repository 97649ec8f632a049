"""Function tools through the OpenAI Responses API (POST /v1/responses with `tools`), as llama-server b11192
answers them: the body rewritten into an OpenAI chat request (tools, tool_choice, parallel_tool_calls), the
tool-call grammar and parser of the chat format, and the parsed calls as `function_call` output items
(to_json_oaicompat_resp / to_json_oaicompat_resp_stream and the partial results' events,
tools/server/server-task.cpp).

- llama-server's recorded answers (tests/oracle/server/responses_tools.json, testing/record_responses_tools.py:
  Hermes 2 Pro and Qwen 2.5 templates, tool_choice auto / required / a named function / none, histories of
  function_call and function_call_output items, parallel calls, streams, a call cut by max_output_tokens, seeded
  sampling) replayed in order on a fresh bankml-serve: identical after tests/server_replay.normalize (the random
  resp_ / msg_ / fc_ / call_ ids blanked), and within each answer the ids repeat where llama-server repeats them
  (one id per call for its fc_ item and call_ id and every event of the call).
- The real `openai` client's responses.create reads the function_call items, streamed and not.
- A format the chat route does not parse keeps its 501.
"""

from __future__ import annotations

import json

import pytest

import server_replay as sr

SESSIONS = sr.load("responses_tools.json")


def _answers():
    return [s["answer"] for sess in SESSIONS for s in sess["steps"]]


def _calls(output: list) -> list:
    return [o for o in output if o["type"] == "function_call"]


def test_enough_requests_recorded():
    answers = _answers()
    assert len(answers) >= 30
    assert all(a["status"] == 200 for a in answers)
    finals = [a["json"] for a in answers if "json" in a]
    streams = [a["sse"] for a in answers if "sse" in a]
    # calls were made, in both kinds of answer, and some of them parallel
    assert sum(bool(_calls(f["output"])) for f in finals) >= 6
    assert any(len(_calls(f["output"])) >= 2 for f in finals)
    assert sum(any(e.get("event") == "response.function_call_arguments.delta" for e in s if isinstance(e, dict))
               for s in streams) >= 4
    # every request of each session was recorded with each template
    assert len({s["name"] for s in SESSIONS}) == 2


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_responses_tool_session_replays_identically(session, smollm2_path):
    problems, _ = sr.replay_responses(session, str(smollm2_path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])


@pytest.mark.slow
@pytest.mark.oracle
def test_openai_client_reads_function_calls(smollm2_path):
    openai = pytest.importorskip("openai")
    session = SESSIONS[0]
    body = next(s["request"]["body"] for s in session["steps"]
                if s["request"]["body"].get("tool_choice") == "required" and not s["request"]["body"].get("stream"))
    kw = {k: body[k] for k in ("input", "tools", "tool_choice", "max_output_tokens", "temperature")}
    argv = sr.server_argv(session["flags"], str(smollm2_path))
    with sr.BankmlServe(argv) as srv:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="none")
        r = client.responses.create(model="smollm2", **kw)
        events = list(client.responses.create(model="smollm2", stream=True, **kw))
    calls = [o for o in r.output if o.type == "function_call"]
    assert r.status == "completed" and calls and all(c.name == "get_weather" for c in calls)
    assert all(c.id == "fc_" + c.call_id[len("call_"):] and c.status == "completed" for c in calls)
    assert all("city" in json.loads(c.arguments) for c in calls)
    done = events[-1].response
    assert events[-1].type == "response.completed"
    streamed = [o for o in done.output if o.type == "function_call"]
    # the ids are random per answer: everything else of the items is the same
    strip = (lambda items: [(c.name, c.arguments, c.status) for c in items])
    assert strip(streamed) == strip(calls)
    # the stream's argument deltas rebuild each call's arguments, under the call's item id
    for c in streamed:
        added = [e for e in events if e.type == "response.output_item.added" and e.item.id == c.id]
        assert len(added) == 1 and added[0].item.name == c.name and added[0].item.call_id == c.call_id
        assert "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta"
                       and e.item_id == c.id) == c.arguments


@pytest.mark.slow
@pytest.mark.oracle
def test_unparsed_format_keeps_the_chat_routes_refusal(smollm2_path):
    """A template whose tool-call format the chat route does not parse (Command R+: JSON-native with the content
    wrapped): the chat step's 501, naming the format, for the Responses API too."""
    command_r = "$TEMPLATE:CohereForAI-c4ai-command-r-plus-tool_use.jinja"
    flags = [command_r if f.startswith("$TEMPLATE:") else f for f in SESSIONS[0]["flags"]]
    argv = sr.server_argv(flags, str(smollm2_path))
    with sr.BankmlServe(argv) as srv:
        got = sr.exchange(srv.port, {"method": "POST", "path": "/v1/responses", "body": {
            "input": "hi", "tool_choice": "required", "max_output_tokens": 4,
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]}}, None)
    assert got["status"] == 501
    assert got["json"]["error"]["message"] == (
        "tool calls (tool_choice required) in the chat format the autoparser derives from this template "
        "(peg-native, JSON_NATIVE tool calls) are not reproduced by bankml yet")
