"""llama-server b11192's router-mode and sleep sessions (tests/oracle/router/sessions.json, recorded by
testing/record_router.py) replayed in order against a fresh bankml-serve each: every answer identical after
tests/router_replay.normalize_router (status, compared headers, body up to created, ids, measured times, the
program and the children's ports in /models' status.args), every wait reaching its state.

Needs the three SmolLM2 files in the models directory (Q4_1, and the derived Q8_0 and F16 that `bankml pull`
makes, and which conftest's fixtures make first when they are missing).
"""

from __future__ import annotations

import pytest

import router_replay as rr
from conftest import models_dir

SESSIONS = rr.load()
FILES = ("smollm2-135m-instruct-q4_1.gguf", "smollm2-135m-instruct-q8_0.gguf", "smollm2-135m-instruct-f16.gguf")


def test_router_records():
    names = {s["name"] for s in SESSIONS}
    assert {"router_basics", "router_each_model", "router_lru_max1", "router_no_autoload", "router_sleep",
            "router_names", "sleep_single", "sleep_single_slots"} <= names
    for s in SESSIONS:
        assert len(s["steps"]) >= 2
        assert not any(st["answer"].get("timed_out") for st in s["steps"]), s["name"]


@pytest.fixture(scope="module")
def model_source(smollm2_path, smollm2_q8_0_path, smollm2_f16_path):
    # the derived Q8_0 and F16 files are made by conftest's fixtures (bankml pull) when they are not there yet
    src = models_dir()
    missing = [f for f in FILES if not (src / f).exists()]
    if missing:
        pytest.skip(f"model files missing from {src}: {', '.join(missing)} (`bankml pull` makes them)")
    return src


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_router_session_replays_identically(session, model_source):
    problems = rr.replay_router(session, model_source)
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])
