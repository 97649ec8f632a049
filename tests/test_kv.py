"""llama.cpp b11192's KV-cache rules (src/kernels/kv.c): which cell each token lands in, n_kv, the F16 mask.

tests/oracle/attention/kv_rules.json (testing/record_attention.py) holds what the oracle's libllama did through
scripted sequences of decode calls and seq_rm, as llama-server drives them: per ubatch, the cells SET_ROWS wrote,
n_kv and the sha256 of the mask, for SmolLM2's cache and Gemma 3's global and sliding-window caches. Replayed
here through bankml's KVCells.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from bankml.engine._shims import _attention_shim as S

KV = json.loads((Path(__file__).parent / "oracle" / "attention" / "kv_rules.json").read_text())

# the caches of each model: (n_swa, swa_type, size from n_ctx); Gemma 3 270M: window 512, standard, and its
# SWA cache holds GGML_PAD(min(n_ctx, n_swa + n_ubatch), 256) cells
N_UBATCH = 512


def _caches(model, n_ctx):
    n_ctx = (n_ctx + 255) // 256 * 256
    if model == "smollm2":
        return {"base": S.KVCells(n_ctx)}
    swa_size = (min(n_ctx, 512 + N_UBATCH) + 255) // 256 * 256
    return {"base": S.KVCells(n_ctx), "swa": S.KVCells(swa_size, n_swa=512, swa_type=1)}


def _cells(runs):
    return np.concatenate([np.arange(a, a + n) for a, n in runs]).astype(np.uint32)


@pytest.mark.oracle
@pytest.mark.parametrize("sc", KV["scenarios"], ids=lambda s: f"{s['model']}-{s['name']}")
def test_kv_rules_match_llama(sc):
    caches = _caches(sc["model"], sc["n_ctx"])
    n_ub = 0
    for ev in sc["events"]:
        if "seq_rm" in ev:
            for c in caches.values():
                c.seq_rm(*ev["seq_rm"])
            continue
        if "clear" in ev:
            for c in caches.values():
                c.clear()
            continue
        pos = np.arange(ev["pos"], ev["pos"] + ev["n_tokens"], dtype=np.int32)
        for name, rec in ev["caches"].items():
            c = caches[name]
            assert c.size == rec["cache_size"]
            idxs = c.find_slot(pos)
            assert idxs is not None
            np.testing.assert_array_equal(idxs, _cells(rec["cells"]), err_msg=f"cells of {name} at pos {ev['pos']}")
            c.apply_ubatch(idxs, pos)
            assert c.n_kv() == rec["n_kv"], f"n_kv of {name} at pos {ev['pos']}"
            m = c.mask(pos)
            assert hashlib.sha256(m.tobytes()).hexdigest() == rec["mask_sha256"], f"mask of {name} at {ev['pos']}"
        n_ub += 1
    assert n_ub > 0


def test_records_cover_reuse_and_padding():
    # the records include SWA cell reuse (cell != position), n_kv capped by a small cache, and truncations
    swa_reused = any(ev["caches"]["swa"]["cells"][0][0] != ev["pos"] for sc in KV["scenarios"]
                     if sc["model"] == "gemma3" for ev in sc["events"] if "caches" in ev)
    assert swa_reused
    assert any(ev["caches"]["base"]["n_kv"] == ev["caches"]["base"]["cache_size"] for sc in KV["scenarios"]
               for ev in sc["events"] if "caches" in ev and sc["n_ctx"] <= 1024)
    assert any("seq_rm" in ev for sc in KV["scenarios"] for ev in sc["events"])


def test_cell_equals_position_for_one_sequence():
    # SmolLM2 (no SWA) in every recorded scenario: the cells written are exactly the positions
    for sc in KV["scenarios"]:
        if sc["model"] != "smollm2":
            continue
        for ev in sc["events"]:
            if "caches" in ev:
                np.testing.assert_array_equal(_cells(ev["caches"]["base"]["cells"]),
                                              np.arange(ev["pos"], ev["pos"] + ev["n_tokens"]))


def test_n_kv_padding():
    c = S.KVCells(4096)
    assert c.n_kv() == 256
    for n, want in ((1, 256), (255, 256), (256, 256), (257, 512), (511, 512), (512, 512), (513, 768)):
        c.clear()
        pos = np.arange(n, dtype=np.int32)
        c.apply_ubatch(c.find_slot(pos), pos)
        assert c.n_kv() == want
    small = S.KVCells(512)
    pos = np.arange(300, dtype=np.int32)
    small.apply_ubatch(small.find_slot(pos), pos)
    assert small.n_kv() == 512


def test_mask_causal_and_empty():
    c = S.KVCells(256)
    pos = np.arange(5, dtype=np.int32)
    c.apply_ubatch(c.find_slot(pos), pos)
    m = c.mask(np.array([3, 4], dtype=np.int32))
    assert m.shape == (2, 256)
    np.testing.assert_array_equal(m[0, :5], [0, 0, 0, 0, 0xFC00])
    np.testing.assert_array_equal(m[1, :5], [0, 0, 0, 0, 0])
    assert (m[:, 5:] == 0xFC00).all()


def test_seq_rm_moves_head_back_and_keeps_cells():
    c = S.KVCells(1024)
    pos = np.arange(600, dtype=np.int32)
    c.apply_ubatch(c.find_slot(pos), pos)
    c.seq_rm(300)
    assert c.head == 300 and c.used == 300 and c.pos_max() == 299
    nxt = np.arange(300, 310, dtype=np.int32)
    np.testing.assert_array_equal(c.find_slot(nxt), np.arange(300, 310))


def test_kv_cells_refuse_bad_input():
    with pytest.raises(ValueError, match="at least one cell"):
        S.KVCells(0)
    with pytest.raises(ValueError, match="swa_type must be"):
        S.KVCells(256, swa_type=7)
    with pytest.raises(ValueError, match="needs n_swa > 0"):
        S.KVCells(256, swa_type=1)
    c = S.KVCells(256)
    with pytest.raises(ValueError, match="outside the cache"):
        c.apply_ubatch([300], [0])
    with pytest.raises(ValueError, match="same, non-zero length"):
        c.apply_ubatch([1, 2], [0])
    assert c.find_slot(np.arange(257, dtype=np.int32)) is None  # more tokens than cells
