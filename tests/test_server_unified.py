"""llama-server b11192 on a unified KV cache (`-np` auto, the default, and `-np 2 -kvu`): the sessions of
tests/oracle/server/unified.json (recorded by testing/record_server_unified.py) replayed in order on a fresh
bankml-serve each, every answer identical (token ids, text, every token's probabilities, timings' counts,
/slots). The requests go one after the other on different slots, so a conversation's cells sit after another
slot's, or are restored from the RAM prompt cache beside them and then fill the holes idle slots leave
(docs/server.md "The unified cache"): bankml-serve serves them on one UnifiedCache shared by the slots. The same
sessions on the qwen3 file (unified_qwen3.json) replay on it the same way.
"""

from __future__ import annotations

import pytest

import server_replay as sr

SESSIONS = sr.load("unified.json")
# the same sessions on the qwen3 file (testing/record_server_unified.py --qwen3): qwen3's graph on the shared stream
QWEN3 = sr.load("unified_qwen3.json")


def test_sessions_recorded():
    assert len(SESSIONS) >= 4
    assert all("-np" not in s["flags"] or "-kvu" in s["flags"] for s in SESSIONS)


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_unified_session_replays_identically(session, smollm2_path):
    problems = sr.replay(session, str(smollm2_path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])


def test_qwen3_sessions_recorded():
    assert len(QWEN3) >= 4 and all(s["model"] == "qwen3" and s["name"].startswith("qwen3_") for s in QWEN3)
    assert all("-np" not in s["flags"] or "-kvu" in s["flags"] for s in QWEN3)
    assert any("-np" not in s["flags"] for s in QWEN3) and any("-kvu" in s["flags"] for s in QWEN3)


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", QWEN3, ids=[s["name"] for s in QWEN3])
def test_qwen3_unified_session_replays_identically(session, smollm2_qwen3_path):
    sr.assert_replays_on_pinned(session, smollm2_qwen3_path)
