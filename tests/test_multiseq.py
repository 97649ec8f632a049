"""Replay tests/oracle/forward/multiseq.json (testing/record_multiseq.py: libllama b11192 decoding batches of
several sequences, one KV stream each, as llama-server `-np N` without `-kvu` does) through Model.decode_batch,
and tests/oracle/forward/multiseq_unified.json (testing/record_multiseq_unified.py: the same with one unified
stream, as `-np auto` / `-kvu` do) through Model.decode_unified: every recorded output row must have the same
float32 bits (compared as hashes of the bytes) and argmax.

Split: one KVCache of the record's cells per sequence, each step one decode_batch of the step's items in the
batch's order (seq_rm before it: the cache cleared), outputs where the record has them. Unified: one
UnifiedCache of the record's n_ctx cells, each step's seq_rm calls, then one decode_unified of the step's items.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from bankml.engine import Model
from bankml.errors import ContextFull, InvalidToken, PositionMismatch
from bankml.models.verify import sha256_file
from engine_replay import FORWARD, lcg_tokens, row_hash

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

RECORD = FORWARD / "multiseq.json"
UNIFIED = FORWARD / "multiseq_unified.json"
# the same schedule kinds on the qwen3 graph (the Q4_1 file re-described as qwen3): `record_multiseq*.py qwen3`
QWEN3 = FORWARD / "multiseq_qwen3.json"
UNIFIED_QWEN3 = FORWARD / "multiseq_unified_qwen3.json"
# Gemma 3 (sliding-window layers: each sequence's base and SWA streams, or both caches unified):
# `record_multiseq*.py gemma3`
GEMMA3 = FORWARD / "multiseq_gemma3.json"
UNIFIED_GEMMA3 = FORWARD / "multiseq_unified_gemma3.json"


def _record(path=RECORD) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"cases": []}


def test_record_present():
    assert RECORD.exists(), "tests/oracle/forward/multiseq.json is missing (testing/record_multiseq.py)"
    rec = _record()
    assert rec["unified"] is False and rec["cases"]
    assert rec["rows"] == sum(len(st["rows"]) for c in rec["cases"] for st in c["steps"])


def test_unified_record_present():
    assert UNIFIED.exists(), "tests/oracle/forward/multiseq_unified.json is missing (testing/record_multiseq_unified.py)"
    rec = _record(UNIFIED)
    assert rec["unified"] is True and rec["cases"] and rec["threads"] == _record()["threads"]
    assert rec["rows"] == sum(len(st["rows"]) for c in rec["cases"] for st in c["steps"])


QWEN3_FILE, GEMMA3_FILE = "derived/smollm2-135m-instruct-qwen3.gguf", "gemma-3-270m-q4_k_m.gguf"


@pytest.mark.parametrize("path,unified,arch,model,cache_types", [
    (QWEN3, False, "qwen3", QWEN3_FILE, {"f16", "q8_0"}), (UNIFIED_QWEN3, True, "qwen3", QWEN3_FILE, {"f16", "q8_0"}),
    (GEMMA3, False, "gemma3", GEMMA3_FILE, {"f16"}), (UNIFIED_GEMMA3, True, "gemma3", GEMMA3_FILE, {"f16"}),
], ids=["qwen3-split", "qwen3-unified", "gemma3-split", "gemma3-unified"])
def test_arch_records_present(path, unified, arch, model, cache_types):
    assert path.exists(), f"{path.name} is missing (testing/record_multiseq{'_unified' if unified else ''}.py {arch})"
    rec = _record(path)
    assert rec["unified"] is unified and rec["threads"] == _record()["threads"]
    assert {c["model"] for c in rec["cases"]} == {model}
    assert {c["cache_type"] for c in rec["cases"]} == cache_types
    assert rec["rows"] == sum(len(st["rows"]) for c in rec["cases"] for st in c["steps"]) > 0


@pytest.fixture(scope="module")
def model(smollm2_path, smollm2_f16_path, smollm2_qwen3_path, gemma3_path):
    rec = _record()
    paths = {p.name: p for p in (smollm2_path, smollm2_f16_path, smollm2_qwen3_path, gemma3_path)}
    for path in (RECORD, UNIFIED, QWEN3, UNIFIED_QWEN3, GEMMA3, UNIFIED_GEMMA3):
        for name, pin in _record(path).get("model_sha256", {}).items():
            assert sha256_file(paths[Path(name).name]) == pin, f"{name} is not the file the record was made with"
    opened = {}

    def get(case: dict, n_ctx: int | None = None) -> Model:
        n_ctx = n_ctx or case["cells"]
        key = (case["model"], n_ctx, case["cache_type"])
        if key not in opened:
            for m in opened.values():      # one model open at a time
                m.close()
            opened.clear()
            opened[key] = Model.open(paths[Path(case["model"]).name], n_ctx=n_ctx, oracle_threads=rec["threads"],
                                     cache_type=case["cache_type"])
        return opened[key]

    yield get
    for m in opened.values():
        m.close()


def _check_step(case: dict, i: int, step: dict, got: list, outputs: list) -> int:
    """A step's rows against the record (hash and argmax of each output, None elsewhere); returns the count."""
    rows = [r for r, out in zip(got, outputs) if out]
    assert all(r is None for r, out in zip(got, outputs) if not out)
    assert len(rows) == len(step["rows"]) == len(step["argmax"])
    for j, (row, want, am) in enumerate(zip(rows, step["rows"], step["argmax"])):
        where = f"seed {case['seed']} step {i} output {j} (items {step['items']})"
        assert row_hash(row) == want, f"{where}: logits differ from libllama's"
        assert int(np.argmax(row)) == am, f"{where}: argmax differs"
    return len(rows)


def _cases(*paths) -> list[tuple]:
    return [(path, c) for path in paths for c in _record(path)["cases"]]


def _model_tag(c: dict) -> str:
    return c["model"].split("-")[-1].removesuffix(".gguf")


@pytest.mark.parametrize("path,case", _cases(RECORD, QWEN3, GEMMA3),
                         ids=lambda x: x.stem if isinstance(x, Path) else
                         f"{_model_tag(x)}-kv{x['cache_type']}-seed{x['seed']}-np{x['n_seq']}-c{x['cells']}")
def test_multiseq_oracle(model, path, case):
    rec = _record(path)
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
        compared += _check_step(case, i, step, got, outputs)
    assert ids.hexdigest()[:24] == case["tokens_sha256"], "the token rule drifted from the recorder's"
    assert compared == sum(len(st["rows"]) for st in case["steps"]) > 0


@pytest.mark.parametrize("path,case", _cases(UNIFIED, UNIFIED_QWEN3, UNIFIED_GEMMA3),
                         ids=lambda x: x.stem if isinstance(x, Path) else
                         f"{_model_tag(x)}-kv{x['cache_type']}-seed{x['seed']}-np{x['n_seq']}-unified")
def test_unified_oracle(model, path, case):
    rec = _record(path)
    m = model(case, rec["n_ctx"])
    assert m.n_ubatch == 512 and m.n_vocab == rec["n_vocab"]
    cache = m.new_unified_cache(n_ctx=rec["n_ctx"], n_seq_max=rec["n_seq_max"])
    assert cache.n_ctx == rec["n_ctx"] and cache.cache_type == case["cache_type"]
    draw = lcg_tokens(case["seed"], rec["n_vocab"])
    ids = hashlib.sha256()
    compared = 0
    for i, step in enumerate(case["steps"]):
        for s, p0, p1 in step["removed"]:
            cache.seq_rm(s, p0, p1)
        items, outputs = [], []
        for s, k, p0, out in step["items"]:
            toks = draw(k)
            ids.update(np.asarray(toks, dtype="<i4").tobytes())
            items.append((s, toks, p0))
            outputs.append(out)
        got = m.decode_unified(cache, items, outputs=outputs)
        compared += _check_step(case, i, step, got, outputs)
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
    """A batch of one sequence is an ordinary llama_decode: the same bits as decode() (prompt and a step), through
    decode_batch and through decode_unified."""
    _one_item_is_decode(small)


def test_qwen3_one_item_is_decode(smollm2_qwen3_path):
    """The same on the qwen3 graph (per-head Q/K norms, NEOX RoPE), which takes both paths too."""
    m = Model.open(smollm2_qwen3_path, n_ctx=512)
    try:
        _one_item_is_decode(m)
    finally:
        m.close()


def _one_item_is_decode(small):
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
    # one sequence in a unified cache, too (the tiled prompt, then a step at n_kv 512: split-KV)
    u = small.new_unified_cache()
    got = [small.decode_unified(u, [(3, toks, 0)])[0], small.decode_unified(u, [(3, [42], len(toks))])[0]]
    assert [row_hash(r) for r in got] == [row_hash(r) for r in want]
    assert small.decode_unified(u, [(3, [43], len(toks) + 1)], outputs=[False]) == [None]
    assert u.n_past(3) == len(toks) + 2
    assert other.n_past == len(toks) + 2


# --- decode_unified's API: placement, refusals (the cache untouched), one sequence = decode -----------------------

def test_cells_follow_find_slot(small):
    """Cells as llama_kv_cache::find_slot gives them (one stream): a batch's tokens take the first empty cells from
    head in batch order, whatever their sequence; seq_rm leaves holes and moves head back to the first one; a
    later batch fills them and goes on after head."""
    u = small.new_unified_cache()
    small.decode_unified(u, [(0, [1] * 10, 0), (1, [2] * 5, 0)])
    pos, seq = u.cells()
    assert seq[:15].tolist() == [0] * 10 + [1] * 5 and pos[:15].tolist() == list(range(10)) + list(range(5))
    assert (seq[15:] == -1).all() and u.head == 15 and u.used == 15
    small.decode_unified(u, [(0, [3], 10), (1, [4], 5), (2, [5] * 3, 0)])
    assert u.cells()[1][15:20].tolist() == [0, 1, 2, 2, 2] and u.head == 20
    u.seq_rm(0)                                   # cells 0..9 and 15 become holes, head back to 0
    assert u.head == 0 and u.used == 9 and u.n_past(0) == 0 and u.n_past(1) == 6
    small.decode_unified(u, [(1, [6], 6), (3, [7] * 12, 0)])
    pos, seq = u.cells()
    # 13 tokens: cells 0..9 (the hole), then 15, then 20, 21 (16..19 are held)
    assert seq[:10].tolist() == [1] + [3] * 9 and seq[15] == 3 and seq[20:22].tolist() == [3, 3]
    assert pos[15] == 9 and pos[21] == 11 and u.head == 22
    u.seq_rm(3, 5, -1)                            # keep positions 0..4: frees cells 6..9, 15, 20, 21
    assert u.head == 6 and u.n_past(3) == 5 and u.seq_pos_min(3) == 0
    # head 6 <= used 9 + 2: the search starts at head
    small.decode_unified(u, [(3, [8] * 2, 5)])
    assert u.cells()[1][6:8].tolist() == [3, 3] and u.head == 8
    u.seq_rm(-1)
    assert u.used == 0 and u.head == 0


def test_holes_fill_first(small):
    u = small.new_unified_cache()
    small.decode_unified(u, [(0, [1] * 100, 0), (1, [2] * 100, 0)])
    u.seq_rm(0)                                   # head moves back to 0 (the first hole)
    small.decode_unified(u, [(1, [3], 100)])      # cell 0; head 1
    small.decode_unified(u, [(2, [4] * 150, 0)])  # cells 1..99 (the rest of the hole), then 200..250
    pos, seq = u.cells()
    assert u.head == 251 and (seq[1:100] == 2).all() and (seq[200:251] == 2).all() and pos[250] == 149
    u.seq_rm(2, 50, -1)                           # positions 50.. leave: cells 51..99, 200..250; head back to 51
    assert u.head == 51 and u.used == 151
    small.decode_unified(u, [(1, [5], 101), (2, [6] * 2, 50)])
    assert u.cells()[1][51:54].tolist() == [1, 2, 2] and u.head == 54


def test_refusals_leave_the_cache(small):
    u = small.new_unified_cache(n_ctx=256)
    small.decode_unified(u, [(0, [1, 2, 3], 0), (1, [4, 5], 0)])
    before = [a.tolist() for a in u.cells()] + [u.head, u.used]
    bad = [
        (PositionMismatch, [(0, [7], 2)]),                            # seq 0's next position is 3
        (PositionMismatch, [(0, [7], 3), (2, [8], 1)]),               # seq 2 holds nothing: 0
        (InvalidToken, [(0, [7], 3), (1, [small.n_vocab], 2)]),
        (ContextFull, [(0, [7] * 200, 3), (1, [8] * 60, 2)]),         # 260 tokens, 251 free cells
        (ValueError, [(0, [7], 3), (0, [8], 4)]),                     # the same seq_id twice
        (ValueError, [(256, [7], 0)]),
        (ValueError, [(0, [], 3)]),
        (ValueError, []),
    ]
    for exc, items in bad:
        with pytest.raises(exc):
            small.decode_unified(u, items)
    with pytest.raises(ValueError):
        small.decode_unified(u, [(0, [7], 3)], outputs=[True, False])
    with pytest.raises(ValueError):
        small.decode_unified(small.cache, [(0, [7], 3)])
    assert [a.tolist() for a in u.cells()] + [u.head, u.used] == before


def test_gemma3_one_item_is_decode(gemma3_path):
    """The same on the Gemma 3 graph (a base and a sliding-window cache), through both paths too; one sequence's
    save / restore in its unified cache carries both parts (the sliding-window one: the cells its window shows)."""
    m = Model.open(gemma3_path, n_ctx=512)
    try:
        _one_item_is_decode(m)
        u = m.new_unified_cache(n_ctx=512, n_seq_max=2)
        assert u.swa_size == 512           # pad(min(512, 512 * 2 + 512), 256)
        toks = [2] + [(i * 7919) % 50000 + 100 for i in range(299)]
        m.decode_unified(u, [(0, toks, 0)])
        s0 = u.seq(0)
        saved = s0.save()
        assert saved.positions == tuple(range(300)) and saved.swa[0] == tuple(range(300))
        s0.clear()
        assert s0.n_past == 0 and s0.seq_pos_min() == -1
        s0.restore(saved)
        assert s0.n_past == 300 and (s0.seq_pos_min(), s0.seq_pos_max()) == (0, 299)
        assert s0.swa_save() == saved.swa and bytes(s0.save()) == bytes(saved)
    finally:
        m.close()
