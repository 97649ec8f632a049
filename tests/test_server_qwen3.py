"""bankml-serve serving qwen3 models as llama-server b11192 does: the sessions of tests/oracle/server/qwen3.json
(testing/record_server_qwen3.py) replayed in order against a fresh bankml-serve each, every answer identical
(logprob floats included), after tests/server_replay.normalize.

The files: SmolLM2-135M-Instruct Q4_1 re-described as qwen3 (per-head Q/K norms, NEOX RoPE) and its Q1_0 and Q2_0
quantizations by `bankml quantize` (the conftest fixtures; each session's record pins its file's sha256). What the
replay checks beyond the forward records (tests/test_forward_qwen3.py): the chat template path, the prompt cache
across turns and conversations, streams, logprobs, seeded sampling, JSON mode, what /props and /v1/models say of
the file (model_ftype "Q1_0" / "Q2_0"), and --context-shift at -c 256 with an F16 and a Q8_0 cache (K re-rotated
in NEOX mode).
"""

from __future__ import annotations

import pytest

import server_replay as sr

SESSIONS = sr.load("qwen3.json")
FIXTURES = {"qwen3": "smollm2_qwen3_path", "qwen3_q1_0": "smollm2_qwen3_q1_0_path",
            "qwen3_q2_0": "smollm2_qwen3_q2_0_path"}
CHAT = "/v1/chat/completions"


def _chats(model: str) -> list[dict]:
    return [st for s in SESSIONS if s["model"] == model for st in s["steps"] if st["request"]["path"] == CHAT]


def test_enough_requests_recorded():
    assert len(_chats("qwen3_q1_0")) >= 20 and len(_chats("qwen3_q2_0")) >= 20 and len(_chats("qwen3")) >= 5
    steps = [st for s in SESSIONS for st in s["steps"]]
    assert all(st["answer"]["status"] == 200 for st in steps)
    bodies = [st["request"].get("body", {}) for st in steps]
    assert any(b.get("stream") for b in bodies) and any(b.get("logprobs") for b in bodies)
    assert any(b.get("seed") is not None and b.get("temperature") for b in bodies)
    assert any((b.get("response_format") or {}).get("type") == "json_object" for b in bodies)
    # the context shift: generations longer than the context (so they shifted; the Q8_0 cache's NEOX shift is
    # checked against libllama by tests/test_context_shift.py)
    shifting = [s for s in SESSIONS if "--context-shift" in s["flags"]]
    long = [st for s in shifting for st in s["steps"]
            if st["answer"].get("json", {}).get("tokens_predicted", 0) > 256]
    assert len(long) >= 2


def test_ftype_names_are_llama_cpps():
    # llama_ftype_name for the Bonsai types (the /props answers of the info sessions carry them)
    from bankml.server.context import FTYPE_NAMES
    assert (FTYPE_NAMES[40], FTYPE_NAMES[41]) == ("Q1_0", "Q2_0")
    props = {s["model"]: st["answer"]["json"]["model_ftype"] for s in SESSIONS for st in s["steps"]
             if st["request"]["path"] == "/props"}
    assert props["qwen3_q1_0"] == "Q1_0" and props["qwen3_q2_0"] == "Q2_0"


def test_unserved_architectures_are_refused(smollm2_path, monkeypatch):
    # the mechanism stays for an architecture the engine computes but whose serving is not recorded
    from bankml.errors import ModelRefused
    from bankml.server import context
    from bankml.server.flags import parse_flags
    monkeypatch.setitem(context.UNSERVED, "llama", "a reason")
    with pytest.raises(ModelRefused, match="serving a llama model is not reproduced by bankml yet: a reason"):
        context.ServerContext.load(parse_flags(["-m", str(smollm2_path), "-t", "2", "-c", "4096", "-np", "1"]))


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_session_replays_identically(session, request):
    path = request.getfixturevalue(FIXTURES[session["model"]])
    sr.assert_replays_on_pinned(session, path)
