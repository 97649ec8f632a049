"""A load run of bankml-serve replayed through the engine (tests/oracle/server/load_run.json, testing/record_load.py):
the record holds the batches bankml-serve's debug log showed for overlapping /completion requests from several
clients on four slots sharing one unified KV cache (`-np auto`), with libllama b11192's output rows for the same
batches played in the same order. Model.decode_unified on the record's schedule must give libllama's rows (the
float32 bytes' hash and the argmax), and each argmax is the token bankml-serve served for that row.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from engine_replay import row_hash
from bankml.models.verify import sha256_file

RECORD = Path(__file__).parent / "oracle" / "server" / "load_run.json"


@pytest.fixture(scope="module")
def record():
    return json.loads(RECORD.read_text())


def test_record_shape(record):
    # a load, not a sequence: most views hold rows of several slots, some answers found their prefix cached, some
    # cells were dropped before others were placed (holes), and the record's counts add up
    steps = record["steps"]
    assert record["n_seq"] == 4 and record["clients"] > record["n_seq"]
    assert sum(1 for st in steps if len({it[0] for it in st["items"]}) > 1) == record["views_several_slots"] > 10
    assert any(p0 > 0 for st in steps for _, p0, _ in st["removed"])
    assert any(p0 == 0 for st in steps for _, p0, _ in st["removed"])
    assert record["rows"] == sum(len(st["rows"]) for st in steps) == sum(len(st["served"]) for st in steps) > 100


def test_engine_replays_the_load_run(record, smollm2_path):
    from bankml.engine import Model
    (name, pin), = record["model_sha256"].items()
    assert smollm2_path.name == name and sha256_file(smollm2_path) == pin
    m = Model.open(smollm2_path, n_ctx=record["n_ctx"], oracle_threads=record["threads"])
    try:
        cache = m.new_unified_cache(n_ctx=record["n_ctx"])
        compared = 0
        for i, st in enumerate(record["steps"]):
            for s, p0, p1 in st["removed"]:
                cache.seq_rm(s, p0, p1)
            items = [(s, toks, p0) for s, toks, p0, _ in st["items"]]
            outputs = [out for *_, out in st["items"]]
            got = [r for r in m.decode_unified(cache, items, outputs=outputs) if r is not None]
            assert len(got) == len(st["rows"]) == len(st["served"]), f"view {i}"
            for j, (row, want, am, served) in enumerate(zip(got, st["rows"], st["argmax"], st["served"])):
                where = f"view {i} (step {st['step']}) output {j}"
                assert row_hash(row) == want, f"{where}: logits differ from libllama's"
                assert int(np.argmax(row)) == am == served, f"{where}: argmax / served token"
                compared += 1
        assert compared == record["rows"]
    finally:
        m.close()
