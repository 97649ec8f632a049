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
from bankml.models.verify import sha256_file
from engine_replay import FORWARD, row_hash

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

RECORD = FORWARD / "multiseq.json"


def _record() -> dict:
    return json.loads(RECORD.read_text()) if RECORD.exists() else {"cases": []}


def tokens(seed: int, n_vocab: int):
    """testing/record_multiseq.py's rule: x = (1103515245 x + 12345) mod 2^31 from the seed, id = (x >> 8) mod
    n_vocab, drawn in item order."""
    x = seed

    def draw(k: int) -> list[int]:
        nonlocal x
        out = []
        for _ in range(k):
            x = (1103515245 * x + 12345) % 2**31
            out.append((x >> 8) % n_vocab)
        return out
    return draw


def test_record_present():
    assert RECORD.exists(), "tests/oracle/forward/multiseq.json is missing (testing/record_multiseq.py)"
    rec = _record()
    assert rec["unified"] is False and rec["cases"]
    assert rec["rows"] == sum(len(st["rows"]) for c in rec["cases"] for st in c["steps"])


@pytest.fixture(scope="module")
def model(smollm2_path):
    rec = _record()
    assert smollm2_path.name == rec["model"]
    assert sha256_file(smollm2_path) == rec["model_sha256"]
    opened = {}

    def get(cells: int) -> Model:
        if cells not in opened:
            for m in opened.values():      # one model open at a time
                m.close()
            opened.clear()
            opened[cells] = Model.open(smollm2_path, n_ctx=cells, oracle_threads=rec["threads"])
        return opened[cells]

    yield get
    for m in opened.values():
        m.close()


@pytest.mark.parametrize("case", _record()["cases"],
                         ids=lambda c: f"seed{c['seed']}-np{c['n_seq']}-c{c['cells']}")
def test_multiseq_oracle(model, case):
    rec = _record()
    m = model(case["cells"])
    assert m.n_ubatch == 512 and m.n_vocab == rec["n_vocab"]
    caches = [m.cache] + [m.new_cache(n_ctx=case["cells"]) for _ in range(case["n_seq"] - 1)]
    for c in caches:
        c.clear()
    draw = tokens(case["seed"], rec["n_vocab"])
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
