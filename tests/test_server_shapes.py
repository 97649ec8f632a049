"""bankml-serve serving bankml.models.synth's files (shapes SmolLM2 does not have) as llama-server b11192 does: the
sessions of tests/oracle/server/shapes.json (testing/record_server_shapes.py) replayed in order against a fresh
bankml-serve each, every answer identical (logprob floats included), after tests/server_replay.normalize.

The files: the 1B llama (n_embd 2048, 24 layers, head size 128, GQA 4, untied output; Q4_1), the head-size-256
GQA-1 llama and the qwen3 shape (Q8_0), the head-size-64 GQA-8 llama (Q4_1), made when missing in <models>/derived
and checked against each session's sha256. What the replay checks beyond the forward records
(tests/test_forward_shapes.py): the server path on those shapes (template, prompt cache across turns, streams,
logprobs, seeded sampling, JSON mode, /props and /v1/models of the file).
"""

from __future__ import annotations

import pytest

import server_replay as sr

SESSIONS = sr.load("shapes.json")
CHAT = "/v1/chat/completions"


def test_enough_requests_recorded():
    big = [st for s in SESSIONS if s["shape"] == "llama-1b" for st in s["steps"]
           if st["request"]["path"] in (CHAT, "/completion")]
    assert len(big) >= 10
    steps = [st for s in SESSIONS for st in s["steps"]]
    assert all(st["answer"]["status"] == 200 for st in steps)
    bodies = [st["request"].get("body", {}) for st in steps]
    assert any(b.get("stream") for b in bodies) and any(b.get("logprobs") for b in bodies)
    assert any(b.get("seed") is not None and b.get("temperature") for b in bodies)
    assert any((b.get("response_format") or {}).get("type") == "json_object" for b in bodies)
    assert len({s["shape"] for s in SESSIONS}) >= 4


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_session_replays_identically(session, smollm2_path):
    from bankml.models import synth
    path = synth.ensure(smollm2_path.parent, session["shape"], session["type"], smollm2_path)
    sr.assert_replays_on_pinned(session, path)
