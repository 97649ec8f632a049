"""Replay the -t records of the Gemma 3 and qwen3 graphs (tests/oracle/forward/gemma3_threads.json, recorded by
`testing/record_forward_gemma3.py threads`, and qwen3_threads.json, `testing/record_forward.py qwen3_threads`):
libllama b11192 with llama-server's context (-c 4096, n_ubatch 512, flash attention, F16 cache) at llama -t 1, 3,
4, 6, 8, 12 and 16, on the files of tests/test_forward_gemma3.py and tests/test_forward_qwen3.py (whose records
are -t 2). bankml computes on its own threads and emulates each -t (Model.open oracle_threads); every row must
have the oracle's float32 bits (hashes of the bytes) and argmax.

What -t decides in these graphs: the split-KV chunks of a one-token ubatch at n_kv >= 512 (decode steps, and the
last ubatch of a 513- or 1025-token prompt) and the query tiles of the tiled path (ubatches of 64+ rows); for
Gemma 3 both on the global cache and on the sliding-window one (cells out of the window masked, cells reused
once its 1024 are full). Prompts of 100, 300 and 513 (qwen3) or 600 (gemma3) tokens at every -t, and of 1025
tokens at -t 3, 8 and 16 (test_the_records_cover_the_brief says what they reach). Each -t opens the model once
(tests/engine_replay.py RecordedModels).
"""

from __future__ import annotations

import pytest

from engine_replay import RecordedModels, record_sets, replay

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

GRAPHS = ("gemma3", "qwen3")
THREADS = {1, 3, 4, 6, 8, 12, 16}
SETS = {g: record_sets(f"{g}_threads") for g in GRAPHS}


@pytest.fixture(scope="module")
def models(request):
    # a graph's file is asked for (its fixture run) only when a test of that graph runs
    fixtures = {SETS[g][0]["model"]: f for g, f in (("gemma3", "gemma3_path"), ("qwen3", "smollm2_qwen3_path"))
                if SETS[g]}
    with RecordedModels(lambda name: request.getfixturevalue(fixtures[name])) as get:
        yield get


def _params():
    return [pytest.param(rec, case, id=f"{g}-t{rec['context']['threads']}-{case['id']}")
            for g in GRAPHS for rec in SETS[g] for case in rec["cases"]]


@pytest.mark.parametrize("graph", GRAPHS)
def test_the_records_cover_the_brief(graph):
    sets = SETS[graph]
    assert sets, f"tests/oracle/forward/{graph}_threads.json is missing"
    assert {s["context"]["threads"] for s in sets} == THREADS and len(sets) == len(THREADS)
    base = record_sets(graph)[0]
    for s in sets:
        assert s["model_sha256"] == base["model_sha256"]
        assert {k: v for k, v in s["context"].items() if k != "threads"} == \
            {k: v for k, v in base["context"].items() if k != "threads"}
    cases = {}  # every set runs a choice of the same prompts, with the same steps
    for s in sets:
        for c in s["cases"]:
            assert cases.setdefault(c["id"], c)["steps"] == c["steps"]
    cases = list(cases.values())
    lengths = [len(c["prompt"]) for c in cases]
    last_ubatch = [n - (n - 1) // 512 * 512 for n in lengths]
    assert any(u >= 64 for u in last_ubatch), "a tiled ubatch"
    assert any(n > 512 and u == 1 for n, u in zip(lengths, last_ubatch)), "a split-KV ubatch inside a prompt"
    # decode steps at n_kv 256 (one chunk), 512 (split-KV from position 256), 768 and 1280
    positions = {len(c["prompt"]) + i for c in cases for i in range(c["steps"])}
    for lo, hi in ((0, 256), (256, 512), (512, 768), (1024, 1280)):
        assert any(lo <= p < hi for p in positions), f"no decode step at n_kv {hi}"
    # the longest prompt (n_kv 1280; for gemma3 the SWA cache full) at 3 of the thread counts at least
    assert sum(any(len(c["prompt"]) > 1024 for c in s["cases"]) for s in sets) >= 3
    if graph == "gemma3":
        # a tiled ubatch whose window drops cells (512 + 64 tokens and more), steps past the SWA cache's 1024
        assert any(n > 512 + 64 and u >= 64 for n, u in zip(lengths, last_ubatch))
        assert any(p >= 1024 for p in positions)
    # -t matters in these records: some row differs between thread counts (so the replay tells them apart)
    rows = {}
    for s in sets:
        for c in s["cases"]:
            rows.setdefault(c["id"], []).append(c["rows"].split())
    assert any(len({r[i] for r in rs}) > 1 for rs in rows.values() for i in range(len(rs[0])))


@pytest.mark.parametrize("rec,case", _params())
def test_rows_identical(models, rec, case):
    assert replay(models(rec), case) == case["steps"] + 1
