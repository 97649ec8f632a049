"""llama-server b11192's context shift (`--context-shift`, n_keep, n_discard) as bankml reproduces it.

- The engine: tests/oracle/forward/context_shift.json (testing/record_context_shift.py --engine) holds libllama's
  logits (row hashes, argmax) at -c 256 before and after llama_memory_seq_rm + llama_memory_seq_add, several
  shifts a case, F16 and Q8_0 caches; bankml's KVCache.shift must give every row's bits.
- The NEOX shift: tests/oracle/forward/context_shift_qwen3.json (testing/record_context_shift.py --engine-qwen3),
  the same on the qwen3 files (the derived one and its Q2_0 / Q1_0 quantizations), whose RoPE is NEOX: the shift
  re-rotates K's halves, F16 and Q8_0.
- The cells: bk_kv_seq_add's bookkeeping (positions, head, cells leaving below 0), save/restore of a shifted cache.
- The server: tests/oracle/server/context_shift.json (testing/record_context_shift.py) replayed in order on a
  fresh bankml-serve per session (the prompt cache decides which path computed a row): identical answers,
  logprob floats included, streamed and not; and without --context-shift the generation that stops.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import server_replay as sr
from engine_replay import FORWARD, row_hash

ENGINE = FORWARD / "context_shift.json"
ENGINE_QWEN3 = FORWARD / "context_shift_qwen3.json"
SESSIONS = sr.load("context_shift.json")
#: the qwen3 record's file keys -> the fixtures that make those files
QWEN3_FIXTURES = {"qwen3": "smollm2_qwen3_path", "qwen3_q2_0": "smollm2_qwen3_q2_0_path",
                  "qwen3_q1_0": "smollm2_qwen3_q1_0_path"}


def _engine_cases(path=ENGINE):
    return json.loads(path.read_text())["cases"] if path.exists() else []


def test_records_cover_the_feature():
    cases = _engine_cases()
    assert {c["kv"] for c in cases} == {"f16", "q8_0"}
    assert all(len(c["shifts"]) >= 2 for c in cases)
    names = {s["name"] for s in SESSIONS}
    assert names == {"shift_f16", "shift_q8_0", "no_shift"}
    steps = [s for sess in SESSIONS for s in sess["steps"]]
    assert any("sse" in s["answer"] for s in steps)
    assert {s["request"]["path"] for s in steps} == {"/completion", "/v1/chat/completions"}
    # the shifting sessions really shifted: truncated answers that generated more than the context holds
    long_shifted = [s for sess in SESSIONS if sess["name"] != "no_shift" for s in sess["steps"]
                    if s["answer"].get("json", {}).get("truncated") and
                    s["answer"]["json"].get("tokens_predicted", 0) > 256]
    assert len(long_shifted) >= 3


@pytest.mark.oracle
@pytest.mark.parametrize("case", _engine_cases(), ids=lambda c: f"{c['kv']}-{len(c['prompt'])}")
def test_engine_shift_matches_libllama(case, smollm2_path):
    _replay_shifts(case, smollm2_path)


def test_qwen3_records_cover_neox_shifts():
    cases = _engine_cases(ENGINE_QWEN3)
    assert {c["kv"] for c in cases} == {"f16", "q8_0"}
    assert {c["model"] for c in cases} == set(QWEN3_FIXTURES)
    assert all(len(c["shifts"]) >= 2 for c in cases)


@pytest.mark.oracle
@pytest.mark.parametrize("case", _engine_cases(ENGINE_QWEN3),
                         ids=lambda c: f"{c['model']}-{c['kv']}-{len(c['prompt'])}")
def test_engine_neox_shift_matches_libllama(case, request):
    """qwen3's K re-rotated in NEOX mode (bk_rope_shift_f16 / _q8_0 with neox): every row's bits."""
    from bankml.models.verify import sha256_file
    path = request.getfixturevalue(QWEN3_FIXTURES[case["model"]])
    assert sha256_file(path) == case["sha256"], f"{path} is not the recorded file"
    _replay_shifts(case, path)


def _replay_shifts(case, path):
    from bankml.engine.model import Model
    with Model.open(path, n_ctx=256, n_threads=2, oracle_threads=2, cache_type=case["kv"]) as m:
        rows, argmax = case["rows"].split(), case["argmax"]
        shifts = {at: (k, d) for k, d, at in case["shifts"]}
        m.decode(case["prompt"], 0)
        assert row_hash(m.logits()) == rows[0]
        n = len(case["prompt"])
        for i in range(1, len(rows)):
            if i in shifts:
                m.context_shift(*shifts[i])
                n -= shifts[i][1]
                assert m.n_past == n
            m.decode([argmax[i - 1]], n)
            n += 1
            got = m.logits()
            assert row_hash(got) == rows[i], f"row {i} ({len(shifts)} shifts)"
            assert int(np.argmax(got)) == argmax[i]


def test_cells_after_a_shift(smollm2_path):
    """seq_rm + seq_add leave the cells at their indices with moved positions; the next tokens fill the freed
    cells from the lowest (head 0 after seq_add); save/restore keep each cell's position."""
    from bankml.engine.model import Model
    with Model.open(smollm2_path, n_ctx=256, n_threads=2, oracle_threads=2) as m:
        m.decode(list(range(100, 120)), 0)
        m.context_shift(4, 6)
        pos = m.cache.positions()
        assert list(pos[:20]) == [0, 1, 2, 3] + [-1] * 6 + list(range(4, 14))
        assert m.n_past == 14 and m.cache._c.used == 14
        m.decode([200, 201], 14)
        pos = m.cache.positions()
        assert list(pos[:20]) == [0, 1, 2, 3, 14, 15] + [-1] * 4 + list(range(4, 14))
        state = m.cache.save()
        assert state.positions == (0, 1, 2, 3, 14, 15) + tuple(range(4, 14))
        m.cache.clear()
        m.cache.restore(state)
        # state_read_meta: the saved cells, in their saved order, go to cells 0..n-1 of the emptied cache
        assert list(m.cache.positions()[:17]) == [0, 1, 2, 3, 14, 15] + list(range(4, 14)) + [-1]
        again = m.cache.save()
        assert bytes(again) == bytes(state) and again.positions == state.positions
        with pytest.raises(ValueError):
            m.context_shift(10, 20)


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_context_shift_session_replays_identically(session, smollm2_path):
    problems = sr.replay(session, str(smollm2_path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])


def test_context_shift_flag():
    from bankml.server.flags import parse_flags
    assert parse_flags([]).ctx_shift is False                                   # common/arg.cpp: off by default
    assert parse_flags(["--context-shift"]).ctx_shift is True
    assert parse_flags(["--context-shift", "--no-context-shift"]).ctx_shift is False
    assert parse_flags([], environ={"LLAMA_ARG_CONTEXT_SHIFT": "1"}).ctx_shift is True
    assert parse_flags([], environ={"LLAMA_ARG_NO_CONTEXT_SHIFT": "1"}).ctx_shift is False


def test_ollama_shift_option():
    from bankml.server.ollama import options as o
    d = o.defaults({})
    assert o.context_shift(d, None) == (True, 4)                     # server/routes.go:520, num_keep 4
    assert o.context_shift(d, False) == (False, 4)
    assert o.context_shift(dict(d, num_keep=-7), True) == (True, -1)  # negative: the whole prompt
