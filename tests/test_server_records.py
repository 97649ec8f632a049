"""The server records (tests/oracle/server/) are what testing/record_server.py sends today: every request that
does not depend on an earlier answer is the one testing/server_sessions.py defines, in the same order and with
the same server flags, so a re-recording replaces like with like. Needs no model and no llama.cpp build."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import server_replay as sr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from testing import server_sessions  # noqa: E402

SESSIONS = sr.load("sessions.json")
LEGACY = sr.load("sessions_legacy.json")
GROUPS = sr.load("bad_requests.json")


@pytest.mark.parametrize("defined", server_sessions.sessions() + server_sessions.legacy_sessions(),
                         ids=lambda s: s["name"])
def test_session_record_matches_its_definition(defined):
    rec = next(s for s in SESSIONS + LEGACY if s["name"] == defined["name"])
    assert rec["flags"] == defined["flags"]
    assert len(rec["steps"]) == len(defined["steps"])
    for step, want in zip(rec["steps"], defined["steps"]):
        if not callable(want):
            assert step["request"] == want
        # 403: a feature llama-server has off (/cors-proxy, /tools); 204, 417, 503: a target's answer through /cors-proxy
        assert step["answer"]["status"] in (200, 204, 400, 401, 403, 404, 413, 500, 501) or (
            defined.get("target") and step["answer"]["status"] in (204, 417, 503))


@pytest.mark.parametrize("defined", server_sessions.bad_requests(), ids=lambda g: g["name"])
def test_bad_request_record_matches_its_definition(defined):
    rec = next(g for g in GROUPS if g["name"] == defined["name"])
    assert rec["flags"] == defined["flags"]
    assert [s["request"] for s in rec["steps"]] == defined["requests"]


def test_counts():
    assert len(SESSIONS) >= 30 and all(len(s["steps"]) >= 2 for s in SESSIONS)
    assert sum(s["answer"]["status"] >= 400 for g in GROUPS for s in g["steps"]) >= 40
    # the model path never leaks into a record (it is written $MODEL)
    text = "".join((sr.RECORDS / n).read_text() for n in ("sessions.json", "sessions_legacy.json",
                                                           "bad_requests.json"))
    assert "/.local/share/bankml/models/" not in text and "$MODEL" in text


def test_normalization_blanks_only_run_dependent_values():
    a = {"status": 200, "headers": {}, "json": {
        "id": "chatcmpl-abc123", "created": 5, "system_fingerprint": "b0-unknown", "model": "/m/x.gguf",
        "timings": {"cache_n": 3, "prompt_n": 4, "prompt_ms": 1.5, "predicted_per_second": 9.0,
                    "predicted_ms": 0.0},
        "prompt_progress": {"total": 9, "time_ms": 3},
        "choices": [{"logprobs": {"content": [{"id": 42, "token": "a"}]}}]}}
    n = sr.normalize(a, "/m/x.gguf")["json"]
    # measured times: only int or float and zero or not stay (prompt_progress.time_ms: int only)
    assert n == {"id": "chatcmpl-<id>", "created": 0, "system_fingerprint": "<fingerprint>", "model": "$MODEL",
                 "timings": {"cache_n": 3, "prompt_n": 4, "prompt_ms": 1.0, "predicted_per_second": 1.0,
                             "predicted_ms": 0.0},
                 "prompt_progress": {"total": 9, "time_ms": 0},
                 "choices": [{"logprobs": {"content": [{"id": 42, "token": "a"}]}}]}
    assert sr.dumps(n["timings"]).endswith('"predicted_ms":0.0}')
    lookup = {"status": 200, "headers": {}, "json": [{"conversation_id": "c", "is_done": True, "total_bytes": 2952,
                                                      "started_at": 1796184750, "completed_at": 0}]}
    assert sr.normalize(lookup, "")["json"] == [{"conversation_id": "c", "is_done": True, "total_bytes": 1,
                                                 "started_at": 1, "completed_at": 0}]


def test_sse_and_chunked_parsing():
    raw = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
           b"b\r\ndata: {\"a\":\r\n" b"7\r\n1}\n\n:\n\n\r\n" b"e\r\ndata: [DONE]\n\n\r\n" b"0\r\n\r\n")
    rec = sr.answer_record(*sr.parse_http(raw))
    assert rec["sse"] == [{"data": {"a": 1}}, {"comment": ""}, {"data": "[DONE]"}]
