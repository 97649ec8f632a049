"""Replay tests/oracle/forward/multiseq.json (testing/record_multiseq.py: libllama b11192 decoding batches of
several sequences, one KV stream each, as llama-server `-np N` without `-kvu` does) through Model.decode_batch:
every recorded output row must have the same float32 bits (compared as hashes of the bytes) and argmax.

Each schedule runs as recorded: one KVCache of the record's cells per sequence, each step one decode_batch of
the step's items in the batch's order (seq_rm before it: the cache cleared), outputs where the record has them.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from bankml.engine import Model
from bankml.errors import ContextFull, InvalidToken, PositionMismatch
from bankml.models.verify import sha256_file
from engine_replay import FORWARD, lcg_tokens, row_hash

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

RECORD = FORWARD / "multiseq.json"


def _record() -> dict:
    return json.loads(RECORD.read_text()) if RECORD.exists() else {"cases": []}


def test_record_present():
    assert RECORD.exists(), "tests/oracle/forward/multiseq.json is missing (testing/record_multiseq.py)"
    rec = _record()
    assert rec["unified"] is False and rec["cases"]
    assert rec["rows"] == sum(len(st["rows"]) for c in rec["cases"] for st in c["steps"])


@pytest.fixture(scope="module")
def model(smollm2_path, smollm2_f16_path):
    rec = _record()
    paths = {p.name: p for p in (smollm2_path, smollm2_f16_path)}
    for name, pin in rec["model_sha256"].items():
        assert sha256_file(paths[name]) == pin, f"{name} is not the file the record was made with"
    opened = {}

    def get(case: dict) -> Model:
        key = (case["model"], case["cells"], case["cache_type"])
        if key not in opened:
            for m in opened.values():      # one model open at a time
                m.close()
            opened.clear()
            opened[key] = Model.open(paths[case["model"]], n_ctx=case["cells"], oracle_threads=rec["threads"],
                                     cache_type=case["cache_type"])
        return opened[key]

    yield get
    for m in opened.values():
        m.close()


@pytest.mark.parametrize("case", _record()["cases"],
                         ids=lambda c: f"{c['model'].split('-')[-1].removesuffix('.gguf')}-kv{c['cache_type']}"
                                       f"-seed{c['seed']}-np{c['n_seq']}-c{c['cells']}")
def test_multiseq_oracle(model, case):
    rec = _record()
    m = model(case)
    assert m.n_ubatch == 512 and m.n_vocab == rec["n_vocab"]
    caches = [m.cache] + [m.new_cache(n_ctx=case["cells"]) for _ in range(case["n_seq"] - 1)]
    for c in caches:
        c.clear()
    draw = lcg_tokens(case["seed"], rec["n_vocab"])
    ids = hashlib.sha256()
    compared = 0
    for i, step in enumerate(case["steps"]):
        for s in step["removed"]:
            caches[s].clear()
        items, outputs = [], []
        for s, k, p0, out in step["items"]:
            toks = draw(k)
            ids.update(np.asarray(toks, dtype="<i4").tobytes())
            items.append((s, caches[s], toks, p0))
            outputs.append(out)
        got = m.decode_batch(items, outputs=outputs)
        rows = [r for r, out in zip(got, outputs) if out]
        assert all(r is None for r, out in zip(got, outputs) if not out)
        assert len(rows) == len(step["rows"]) == len(step["argmax"])
        for j, (row, want, am) in enumerate(zip(rows, step["rows"], step["argmax"])):
            where = f"seed {case['seed']} step {i} output {j} (items {step['items']})"
            assert row_hash(row) == want, f"{where}: logits differ from libllama's"
            assert int(np.argmax(row)) == am, f"{where}: argmax differs"
            compared += 1
    assert ids.hexdigest()[:24] == case["tokens_sha256"], "the token rule drifted from the recorder's"
    assert compared == sum(len(st["rows"]) for st in case["steps"]) > 0


# --- the API around the record: what decode_batch refuses (no cache touched) and what it equals ---------------

@pytest.fixture(scope="module")
def small(smollm2_path):
    m = Model.open(smollm2_path, n_ctx=512)
    yield m
    m.close()


def test_refusals_leave_the_caches(small):
    a, b, c = small.cache, small.new_cache(), small.new_cache(n_ctx=256)
    for x in (a, b, c):
        x.clear()
    small.decode_batch([(0, a, [1, 2, 3], 0), (1, b, [4, 5], 0)])
    before = [(x.n_past, x.positions().tolist()) for x in (a, b)]
    bad = [
        (PositionMismatch, [(0, a, [7], 2), (1, b, [8], 2)]),                 # a's next position is 3
        (InvalidToken, [(0, a, [7], 3), (1, b, [small.n_vocab], 2)]),
        (ContextFull, [(0, a, [7] * 510, 3), (1, b, [8], 2)]),
        (ValueError, [(0, a, [7], 3), (0, b, [8], 2)]),                       # the same seq_id twice
        (ValueError, [(0, a, [7], 3), (1, a, [8], 3)]),                       # the same cache twice
        (ValueError, [(0, a, [7], 3), (2, c, [8], 0)]),                       # caches of different sizes
        (ValueError, [(0, a, [], 3)]),
        (ValueError, []),
    ]
    for exc, items in bad:
        with pytest.raises(exc):
            small.decode_batch(items)
    with pytest.raises(ValueError):
        small.decode_batch([(0, a, [7], 3)], outputs=[True, False])
    assert [(x.n_past, x.positions().tolist()) for x in (a, b)] == before


def test_one_item_is_decode(small):
    """A batch of one sequence is an ordinary llama_decode: the same bits as decode() (prompt and a step)."""
    toks = list(range(100, 400))
    small.cache.clear()
    small.decode(toks, 0)
    want = [small.logits().copy()]
    small.decode([42], len(toks))
    want.append(small.logits().copy())
    other = small.new_cache()
    got = [small.decode_batch([(5, other, toks, 0)])[0], small.decode_batch([(5, other, [42], len(toks))])[0]]
    assert [row_hash(r) for r in got] == [row_hash(r) for r in want]
    assert small.decode_batch([(5, other, [43], len(toks) + 1)], outputs=[False]) == [None]
    assert other.n_past == len(toks) + 2
