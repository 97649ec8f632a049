"""bankml-serve and a sliding-window model (Gemma 3): served with llama-server's context checkpoints and pos_min
rule, at -np 1 (the answers: tests/test_server_gemma3.py) and on several slots, with a KV cache each or one
unified cache (-kvu, -np auto; batched: tests/test_server_batching.py, batching_gemma3.json); what is not
reproduced is refused by name: --context-shift, a quantized KV cache, slot files."""

import pytest

from bankml.errors import ModelRefused
from bankml.server.context import ServerContext
from bankml.server.flags import FlagError, parse_flags

BASE = ["-t", "2", "-c", "4096", "--jinja"]


def test_serving_gemma3_at_np_1_loads_with_checkpoints(gemma3_path):
    ctx = ServerContext.load(parse_flags(["-m", str(gemma3_path), "-np", "1"] + BASE))
    try:
        assert ctx.n_swa == 512 and ctx.checkpoints_on
        assert ctx.model.cache.has_swa and ctx.model.cache._c.swa_size == 1024
    finally:
        ctx.close()


def test_swa_full_and_no_checkpoints(gemma3_path):
    ctx = ServerContext.load(parse_flags(["-m", str(gemma3_path), "-np", "1", "--swa-full"] + BASE))
    try:
        # --swa-full: server_context's n_swa is 0, no checkpoints, a sliding-window cache of n_ctx cells
        assert ctx.n_swa == 0 and not ctx.checkpoints_on and ctx.model.cache._c.swa_size == 4096
    finally:
        ctx.close()
    cfg = parse_flags(["-m", str(gemma3_path), "-np", "1", "--ctx-checkpoints", "0"] + BASE)
    assert cfg.n_ctx_checkpoints == 0


def test_serving_gemma3_at_np_2_has_a_cache_per_slot(gemma3_path):
    ctx = ServerContext.load(parse_flags(["-m", str(gemma3_path), "-np", "2"] + BASE))
    try:
        ctx.start()
        # two slots, each its own base and sliding-window caches (2048 and 1024 cells), batched
        assert ctx.worker.batcher is not None and ctx.slots.unified is None
        assert [(s.cache.n_ctx, s.cache._c.swa_size) for s in ctx.slots.slots] == [(2048, 1024)] * 2
    finally:
        ctx.close()


def test_serving_gemma3_on_a_unified_cache(gemma3_path):
    ctx = ServerContext.load(parse_flags(["-m", str(gemma3_path), "-np", "2", "-kvu"] + BASE))
    try:
        ctx.start()
        # one stream of 4096 cells and a shared sliding-window cache of pad(512 x 2 + 512, 256) cells
        u = ctx.slots.unified
        assert ctx.worker.batcher is not None and u is not None and (u.n_ctx, u.swa_size) == (4096, 1536)
        assert all(s.cache.has_swa for s in ctx.slots.slots)
    finally:
        ctx.close()


@pytest.mark.parametrize("extra, why", [
    (["-np", "1", "--context-shift"], "--context-shift on a gemma3 model"),
])
def test_what_is_not_reproduced_is_refused_by_name(gemma3_path, extra, why):
    with pytest.raises(ModelRefused, match=why) as e:
        ServerContext.load(parse_flags(["-m", str(gemma3_path)] + extra + BASE))
    assert e.value.path == str(gemma3_path) and "not reproduced by bankml yet" in e.value.reasons[0]


def test_checkpoint_flags_and_their_variables():
    cfg = parse_flags(["-ctxcp", "3", "-cms", "64", "--swa-full"], environ={})
    assert (cfg.n_ctx_checkpoints, cfg.checkpoint_min_step, cfg.swa_full) == (3, 64, True)
    cfg = parse_flags([], environ={"LLAMA_ARG_CTX_CHECKPOINTS": "5", "LLAMA_ARG_CHECKPOINT_MIN_SPACING_NT": "7",
                                   "LLAMA_ARG_SWA_FULL": "1"})
    assert (cfg.n_ctx_checkpoints, cfg.checkpoint_min_step, cfg.swa_full) == (5, 7, True)
    assert parse_flags(["--swa-checkpoints", "2"], environ={}).n_ctx_checkpoints == 2
    defaults = parse_flags([], environ={})
    assert (defaults.n_ctx_checkpoints, defaults.checkpoint_min_step, defaults.swa_full) == (32, 8192, False)
    with pytest.raises(FlagError, match="checkpoint-min-step must be non-negative"):
        parse_flags(["-cms", "-1"], environ={})


def test_serving_smollm2_still_loads_without_checkpoints(smollm2_path):
    cfg = parse_flags(["-m", str(smollm2_path), "-t", "2", "-c", "512", "-np", "1", "--jinja"])
    ctx = ServerContext.load(cfg)
    try:
        assert ctx.header.architecture == "llama" and ctx.n_swa == 0 and not ctx.checkpoints_on
    finally:
        ctx.close()


# --- the serving logic on fakes (no model) ---------------------------------------------------------------------

class _Cache:
    def __init__(self, pos_min=0, pos_max=-1):
        self.pos_min, self.pos_max, self.restored = pos_min, pos_max, None

    def seq_pos_min(self):
        return self.pos_min

    def seq_pos_max(self):
        return self.pos_max

    def swa_save(self):
        return ("state", self.pos_min, self.pos_max)

    def swa_restore(self, data):
        self.restored = data


def _run(spans=(), checkpoints=None, cache=None, n_ckpt=32, min_step=8192, task_id=1):
    from types import SimpleNamespace as NS
    slot = NS(checkpoints=list(checkpoints or []), cache=cache or _Cache(), id=0)
    ctx = NS(cfg=NS(n_ctx_checkpoints=n_ckpt, checkpoint_min_step=min_step), model=NS(n_ubatch=512), n_swa=512)
    return ctx, NS(slot=slot, task=NS(spans=list(spans), id=task_id))


def _cuts(ctx, run, P, n_batch=2048):
    from bankml.server.generation import prompt_batch
    out, start = [], 0
    while start < P:
        n = prompt_batch(ctx, run, start, P, n_batch, True)
        out.append(n)
        start += n
    return out


def test_prompt_cuts_near_the_end_and_at_user_messages():
    from bankml.server.generation import prompt_batch
    ctx, run = _run()
    assert _cuts(ctx, run, 30) == [26, 4]                       # 4 before the end
    assert _cuts(ctx, run, 1100) == [584, 512, 4]                # 4 + n_ubatch, then 4
    assert _cuts(ctx, run, 1100, n_batch=300) == [300, 300, 200, 296, 4]   # min(n_batch, 4 + n_ubatch)
    ctx, run = _run(spans=[("user", 2), ("assistant", 10), ("user", 20)])
    assert _cuts(ctx, run, 40) == [2, 18, 16, 4]                 # user starts: no checkpoint yet / the last one
    assert prompt_batch(ctx, run, 0, 40, 2048, False) == 40      # checkpoints off: one call


def test_message_spans_find_the_delimiters_first_match_wins():
    from bankml.server.generation import message_spans

    class Tok:
        def tokenize(self, text, add_special, parse_special):
            return [ord(c) for c in text]
    toks = [ord(c) for c in "<u>hi<a>yo<u>ok"]
    spans = message_spans(Tok(), [{"role": "assistant", "delimiter": "<a>"}, {"role": "user", "delimiter": "<u>"},
                                  "junk"], toks)
    assert spans == [("user", 0), ("assistant", 5), ("user", 10)]
    assert message_spans(Tok(), None, toks) == []


def test_checkpoint_eviction_and_replacement():
    from bankml.server.generation import Checkpoint, create_checkpoint
    old = [Checkpoint(0, n, 0, n - 1, None) for n in (10, 20, 30)]
    ctx, run = _run(checkpoints=old, n_ckpt=3, min_step=15)
    create_checkpoint(ctx, run, 40, 0, 39)
    # full list: 20 lies within 15 of 10 (another task's): erased; then 30 is kept (>= 20 + 15 from 10? no: 30 > 25)
    assert [c.n_tokens for c in run.slot.checkpoints] == [10, 30, 40]
    # the same n_tokens again: the list is full, so the oldest goes first, then the one at 40 is replaced
    create_checkpoint(ctx, run, 40, 0, 39)
    assert [c.n_tokens for c in run.slot.checkpoints] == [30, 40]
    ctx, run = _run(checkpoints=[Checkpoint(0, n, 0, n - 1, None) for n in (10, 100)], n_ckpt=2, min_step=0)
    create_checkpoint(ctx, run, 200, 0, 199)                      # the oldest goes
    assert [c.n_tokens for c in run.slot.checkpoints] == [100, 200]


def test_pos_min_rule_restores_or_resets():
    from bankml.server.generation import Checkpoint, swa_reuse
    # a short conversation: pos_min 0 >= threshold 0, the newest checkpoint not past n_past is restored
    cps = [Checkpoint(1, 26, 0, 25, "a"), Checkpoint(1, 60, 0, 59, "b")]
    ctx, run = _run(checkpoints=cps, cache=_Cache(0, 70))
    assert swa_reuse(ctx, run, 50, 80) == 25 and run.slot.cache.restored == "a"
    assert [c.n_tokens for c in run.slot.checkpoints] == [26]     # pos_max 59 > 25: erased
    # no checkpoint: the whole prompt again
    ctx, run = _run(cache=_Cache(0, 70))
    assert swa_reuse(ctx, run, 50, 80) == 0
    # the window still covers what the prefix needs (pos_min below the threshold): n_past kept
    ctx, run = _run(cache=_Cache(300, 1500))
    assert swa_reuse(ctx, run, 1400, 1500) == 1400
    # cache_prompt false (n_past 0): only the erasure
    ctx, run = _run(checkpoints=[Checkpoint(1, 26, 0, 25, "a")])
    assert swa_reuse(ctx, run, 0, 80) == 0 and run.slot.checkpoints == []


@pytest.mark.slow
def test_sliding_window_checkpoint_keeps_the_window_only(gemma3_path):
    # a checkpoint holds the sliding-window cache's cells that the window still shows to the sequence's largest
    # position (llama_kv_cache::state_write leaves masked cells out); restored, they go to the first free cells
    # in saved order (state_read_meta), and the base cache is not touched. The later bits are then those of
    # that layout (the recorded sessions check them against llama-server), not those of a run that never left.
    import numpy as np
    from bankml.engine import Model
    m = Model.open(gemma3_path, n_ctx=4096)
    try:
        toks = [2] + [(i * 7919) % 50000 + 100 for i in range(1199)]
        m.decode(toks[:1100], 0)
        assert m.cache.seq_pos_min() == 76 and m.cache.seq_pos_max() == 1099   # cells 0..75 reused
        positions, data = m.cache.swa_save()
        assert positions == tuple(range(1024, 1100)) + tuple(range(588, 1024))  # cell order, window only
        m.decode(toks[1100:1150], 1100)
        m.cache.swa_restore((positions, data))
        cells = m.cache._c.swa_positions()
        assert list(cells[:512]) == list(positions) and (cells[512:] == -1).all()
        assert m.cache.n_past == 1150                                           # the base cache as it was
        m.cache.truncate(1100)
        m.decode(toks[1100:1104], 1100)
        assert np.isfinite(m.logits()).all() and m.cache.seq_pos_min() == 588
        saved = m.cache.save()                       # the RAM prompt cache: both caches
        m.cache.clear()
        m.cache.restore(saved)
        assert m.cache.n_past == 1104 and m.cache.seq_pos_max() == 1103
    finally:
        m.close()


@pytest.mark.slow
def test_stream_copy_is_cell_for_cell(gemma3_path):
    # copy_state_to's seq_cp between two streams (an n > 1 parent's prompt to its children): every cell at the same
    # index in both caches, masked sliding-window cells included (a save / restore would leave those out and
    # compact the rest), and the next decode of either gives the same row
    import numpy as np
    from bankml.engine import Model
    m = Model.open(gemma3_path, n_ctx=4096)
    try:
        a, b = m.new_cache(2048), m.new_cache(2048)
        toks = [2] + [(i * 7919) % 50000 + 100 for i in range(1099)]
        m.decode(toks, 0, cache=a)
        b.copy_from(a)
        assert (b.positions() == a.positions()).all()
        assert (b._c.swa_positions() == a._c.swa_positions()).all() and b.seq_pos_min() == a.seq_pos_min() == 76
        assert bytes(b.save()) == bytes(a.save()) and b.save().swa == a.save().swa
        rows = []
        for c in (a, b):
            m.decode([toks[5]], 1100, cache=c)
            rows.append(m.logits().copy())
        assert rows[0].view(np.uint32).tolist() == rows[1].view(np.uint32).tolist()
        with pytest.raises(ValueError, match="same shape"):
            m.new_cache(4096).copy_from(a)
    finally:
        m.close()
