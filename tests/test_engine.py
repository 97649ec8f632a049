"""bankml.engine's contract (docs/architecture.md, "Engine"): Model.open, decode, logits, truncate, n_past, extra
caches, saved states, refusals. The bits themselves are checked against llama.cpp by test_engine_oracle.py
(libllama records) and test_engine_greedy.py (llama-server records); here the engine is checked against itself
where the oracle's arithmetic says two computations are the same."""

from __future__ import annotations

import numpy as np
import pytest

from bankml.engine import Model
from bankml.errors import ContextFull, InvalidToken, ModelRefused, PinMismatch, PositionMismatch

pytestmark = pytest.mark.slow

PROMPT = [1, 9690, 314, 253, 1023, 30, 378, 1789, 282, 3143, 28, 4053, 11, 198, 2362, 4775, 17, 260]


@pytest.fixture(scope="module")
def model(smollm2_path):
    m = Model.open(smollm2_path, n_ctx=1024)
    yield m
    m.close()


def _bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).copy()


def _run(m, tokens, cache=None):
    (cache or m.cache).clear()
    m.decode(tokens, 0, cache=cache)
    return _bits(m.logits())


def test_hparams(model):
    hp = model.hparams
    assert (hp.n_embd, hp.n_layer, hp.n_head, hp.n_head_kv, hp.head_dim, hp.n_ff) == (576, 30, 9, 3, 64, 1536)
    assert model.n_vocab == 49152 and model.n_ctx_train == 8192 and hp.tied_output
    assert model.n_ctx == 1024 and model.n_threads >= 1 and model.oracle_threads == 2
    assert hp.kq_scale == 0.125


def test_n_ctx_is_padded_to_256(smollm2_path):
    with Model.open(smollm2_path, n_ctx=300) as m:
        assert m.n_ctx == 512 and m.cache.n_ctx == 512 and m.n_ubatch == 512
    with Model.open(smollm2_path, n_ctx=None) as m:
        assert m.n_ctx == 8192


def test_logits_is_a_view_valid_until_the_next_decode(model):
    model.cache.clear()
    model.decode(PROMPT, 0)
    a = model.logits()
    first = a.copy()
    assert a.shape == (model.n_vocab,) and a.dtype == np.float32
    assert np.shares_memory(a, model.logits())
    model.decode([int(first.argmax())], len(PROMPT))
    assert not np.array_equal(a, first)  # the same buffer, now the next row


def test_refusals_leave_the_cache_unchanged(model):
    model.cache.clear()
    model.decode(PROMPT, 0)
    n = model.n_past
    assert n == len(PROMPT)
    with pytest.raises(PositionMismatch, match=f"next position is {n}"):
        model.decode([5], n + 1)
    with pytest.raises(PositionMismatch):
        model.decode([5], 0)
    with pytest.raises(InvalidToken, match="out of the vocabulary"):
        model.decode([5, model.n_vocab], n)
    with pytest.raises(InvalidToken):
        model.decode([-1], n)
    with pytest.raises(ContextFull, match="the context holds 1024"):
        model.decode([5] * (1024 - n + 1), n)
    with pytest.raises(ValueError, match="non-empty"):
        model.decode([], n)
    with pytest.raises(ValueError, match="integers"):
        model.decode([1.5], n)
    assert model.n_past == n


def test_the_context_fills_to_the_last_cell(smollm2_path):
    with Model.open(smollm2_path, n_ctx=256) as m:
        m.decode(list(range(100, 355)), 0)
        m.decode([7], 255)
        assert m.n_past == 256
        with pytest.raises(ContextFull):
            m.decode([7], 256)


def test_truncate_then_recompute(model):
    # one-chunk attention (fewer than 64 rows) computes each row alone: the last row of a 10-token call equals
    # the last row of the same tokens recomputed after truncating to 6
    want = _run(model, PROMPT[:10])
    model.truncate(6)
    assert model.n_past == 6
    model.decode(PROMPT[6:10], 6)
    np.testing.assert_array_equal(_bits(model.logits()), want)
    model.truncate(0)
    assert model.n_past == 0
    with pytest.raises(ValueError, match="cannot truncate"):
        model.truncate(-1)


def test_threads_do_not_change_bits(smollm2_path):
    prompt = PROMPT * 20  # 360 tokens: tiled attention, then split-KV decode at n_kv 512
    rows = []
    for t in (1, 2, 3):
        with Model.open(smollm2_path, n_ctx=1024, n_threads=t) as m:
            m.decode(prompt, 0)
            r = [_bits(m.logits())]
            for i in range(3):
                m.decode([int(m.logits().argmax())], len(prompt) + i)
                r.append(_bits(m.logits()))
            rows.append(r)
    for r in rows[1:]:
        for a, b in zip(rows[0], r):
            np.testing.assert_array_equal(a, b)


def test_regrouped_weights_give_the_file_layout_bits(smollm2_path, model):
    prompt = PROMPT * 5
    want = _run(model, prompt)
    with Model.open(smollm2_path, n_ctx=1024, regroup=False) as m:
        np.testing.assert_array_equal(_run(m, prompt), want)


def test_a_second_cache_is_independent(model):
    a = _run(model, PROMPT)
    other = model.new_cache(512)
    assert other.n_ctx == 512 and other.n_past == 0
    b = _run(model, PROMPT[:7], cache=other)
    model.decode([int(a.view(np.float32).argmax())], len(PROMPT))  # the first cache goes on
    step = _bits(model.logits())
    model.decode(PROMPT[7:], 7, cache=other)  # the second one too
    np.testing.assert_array_equal(_bits(model.logits()), a)  # same tokens, same cells: same bits
    assert not np.array_equal(a, b) and not np.array_equal(step, a)
    with pytest.raises(ValueError, match="a cache of"):
        model.new_cache(4096)


def test_save_and_restore(model):
    model.cache.clear()
    model.decode(PROMPT, 0)
    state = model.cache.save()
    nxt = int(model.logits().argmax())
    model.decode([nxt], len(PROMPT))
    want = _bits(model.logits())
    model.cache.clear()
    model.decode([3, 4, 5], 0)
    model.cache.restore(state)
    assert model.n_past == len(PROMPT)
    model.decode([nxt], len(PROMPT))
    np.testing.assert_array_equal(_bits(model.logits()), want)
    with pytest.raises(ValueError, match="not a saved state"):
        model.cache.restore(state[:-1])


def test_q8_0_cache_runs(smollm2_path):
    with Model.open(smollm2_path, n_ctx=512, cache_type="q8_0") as m:
        m.decode(PROMPT, 0)
        assert m.cache.cache_type == "q8_0" and np.isfinite(m.logits()).all()
    with pytest.raises(ValueError, match="cache type"):
        Model.open(smollm2_path, n_ctx=512, cache_type="q4_0")


def test_open_verifies_first(tmp_path, smollm2_path):
    copy = tmp_path / smollm2_path.name
    copy.write_bytes(smollm2_path.read_bytes()[:-1] + b"\x01")
    with pytest.raises(PinMismatch):
        Model.open(copy)
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"GGUF")
    with pytest.raises(ModelRefused):
        Model.open(bad)
