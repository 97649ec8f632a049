"""llama-server b11192's answers to the meaning of Ollama requests (tests/oracle/ollama/records.json, recorded by
testing/record_ollama.py) replayed in order against a fresh bankml-serve per session, started as the oracle was:
answer text, done_reason, prompt_eval_count, eval_count and generate's context identical.
"""

from __future__ import annotations

import pytest

import ollama_replay as orp
import server_replay as sr

SESSIONS = orp.sessions()


def test_ollama_records():
    reqs = [r for s in SESSIONS for r in s["requests"]]
    assert len(reqs) >= 40
    assert {r["path"] for r in reqs} == {"/api/chat", "/api/generate"}
    assert {r["done_reason"] for r in reqs} == {"stop", "length"}
    assert any(r.get("truncation", {}).get("kept", 0) < r.get("truncation", {}).get("of", 0) for r in reqs)
    for r in reqs:
        assert r["eval_count"] >= 1 and r["prompt_eval_count"] >= 1
        assert ("context" in r) == (r["path"] == "/api/generate" and not r["ollama"].get("raw"))


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_ollama_session_replays_identically(session, smollm2_path):
    with sr.BankmlServe(["-m", str(smollm2_path)] + orp.SERVER_ARGS) as srv:
        problems = orp.replay_session(session, srv.port)
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])
