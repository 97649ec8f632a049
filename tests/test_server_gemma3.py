"""bankml-serve serving Gemma 3 270M Q4_K_M (sliding-window layers) as llama-server b11192 does: the sessions of
tests/oracle/server/gemma3.json (testing/record_server_gemma3.py) replayed in order against a fresh bankml-serve
each, every answer identical (logprob floats included), after tests/server_replay.normalize.

What the replay checks beyond one-shot answers: the prompt cut into llama_decode calls where llama-server cuts
it to make context checkpoints (user-message starts, 4 + n_ubatch and 4 tokens before the end), the
checkpoints themselves (the sliding-window cache's cells) and the pos_min rule that restores one on the next
turn or processes the prompt again, --swa-full, --ctx-checkpoints and --checkpoint-min-step.
"""

from __future__ import annotations

import pytest

import server_replay as sr

SESSIONS = sr.load("gemma3.json")


def test_enough_requests_recorded():
    steps = [st for s in SESSIONS for st in s["steps"]]
    chats = [st for st in steps if st["request"]["path"] == "/v1/chat/completions"]
    assert len(chats) >= 40
    assert any("--swa-full" in s["flags"] for s in SESSIONS)
    assert all(s["flags"][s["flags"].index("-np") + 1] == "1" for s in SESSIONS)
    assert all(st["answer"]["status"] == 200 for st in steps)


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_session_replays_identically(session, gemma3_path):
    problems = sr.replay(session, str(gemma3_path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])
