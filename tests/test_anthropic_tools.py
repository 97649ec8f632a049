"""Tool calls through the Anthropic Messages API (POST /v1/messages with `tools`), as llama-server b11192 answers
them: the body rewritten into an OpenAI chat request (tools, tool_choice), the tool-call grammar and parser of the
chat format, and the parsed calls as `tool_use` blocks (to_json_anthropic / to_json_anthropic_stream and the
partial results' events, tools/server/server-task.cpp).

- llama-server's recorded answers (tests/oracle/server/anthropic_tools.json, testing/record_anthropic_tools.py:
  Hermes 2 Pro and Qwen 2.5 templates, tool_choice auto / any / tool / none, histories of tool_use and
  tool_result blocks, parallel calls, streams, a call cut by max_tokens, seeded sampling) replayed in order on a
  fresh bankml-serve: identical after tests/server_replay.normalize (the calls' random ids blanked).
- The real `anthropic` client reads the tool_use blocks, and its stream accumulator rebuilds the same message
  from the events.
"""

from __future__ import annotations

import pytest

import server_replay as sr

SESSIONS = sr.load("anthropic_tools.json")


def _answers():
    return [s["answer"] for sess in SESSIONS for s in sess["steps"]]


def test_enough_requests_recorded():
    answers = _answers()
    assert len(answers) >= 30
    assert all(a["status"] == 200 for a in answers)
    finals = [a["json"] for a in answers if "json" in a]
    streams = [a["sse"] for a in answers if "sse" in a]
    # calls were made, in both kinds of answer, and some of them parallel
    assert sum(f["stop_reason"] == "tool_use" for f in finals) >= 6
    assert any(sum(b["type"] == "tool_use" for b in f["content"]) >= 2 for f in finals)
    assert sum(any(e.get("data", {}).get("delta", {}).get("type") == "input_json_delta" for e in s if isinstance(e, dict))
               for s in streams) >= 4


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_anthropic_tool_session_replays_identically(session, smollm2_path):
    problems = sr.replay(session, str(smollm2_path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])


@pytest.mark.slow
@pytest.mark.oracle
def test_anthropic_client_reads_tool_use(smollm2_path):
    anthropic = pytest.importorskip("anthropic")
    session = SESSIONS[0]
    body = next(s["request"]["body"] for s in session["steps"]
                if s["request"]["body"].get("tool_choice") == {"type": "any"} and not s["request"]["body"].get("stream"))
    kw = {k: body[k] for k in ("max_tokens", "messages", "tools", "tool_choice")}
    argv = sr.server_argv(session["flags"], str(smollm2_path))
    with sr.BankmlServe(argv) as srv:
        client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{srv.port}", api_key="none")
        m = client.messages.create(model="smollm2", extra_body={"temperature": 0}, **kw)
        with client.messages.stream(model="smollm2", extra_body={"temperature": 0}, **kw) as stream:
            final = stream.get_final_message()
    calls = [b for b in m.content if b.type == "tool_use"]
    assert m.stop_reason == "tool_use" and calls and all(c.name == "get_weather" for c in calls)
    assert all(isinstance(c.input, dict) and "city" in c.input for c in calls)
    assert final.stop_reason == m.stop_reason
    # the ids are random per answer: everything else of the blocks is the same
    strip = (lambda blocks: [{k: v for k, v in b.model_dump().items() if k != "id"} for b in blocks])
    assert strip(final.content) == strip(m.content)
