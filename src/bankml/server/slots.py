"""llama-server's slots, slot choice and host prompt cache (server-context.cpp `server_slot`,
`get_available_slot`, server-task.cpp `server_prompt_cache`).

    pool = SlotPool(ctx)                      # ctx.n_slots slots, each with its own KV cache of ctx.n_ctx_slot cells
    slot = pool.select(tokens, id_slot=-1)    # llama-server's choice, with the RAM prompt cache update
    slot.tokens                               # the tokens whose K/V the slot's cache holds (prompt.tokens)

Slot choice, as get_available_slot does it: a requested id (C++ remainder of id_slot by n_slots); else the idle slot
with a non-empty cache whose LCP / len(prompt) is strictly the largest and strictly above
`--slot-prompt-similarity` (0 disables); else LRU (smallest t_last_used, ties to the later slot). An LRU pick,
a requested slot, or a similarity pick that keeps under half of the slot's tokens, updates the prompt cache:
the slot's state is saved (unless an entry already holds it as a prefix), a better entry for the new prompt is
loaded (moved out of the cache), then the cache is trimmed to its byte and token limits.

The pool is driven by one worker thread (bankml.server.generation); nothing here locks.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field

from ..cxx.cfloat import f32
from ..engine.model import UNIFIED_ARCHS
from ..errors import ContextFull
from . import energy

log = logging.getLogger("bankml.server")


def common_prefix(a, b) -> int:
    """server_tokens::get_common_prefix for text tokens."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def time_us() -> int:
    return time.monotonic_ns() // 1000


@dataclass
class SlotStats:
    """server_slot_stats: counts and the three timestamps (µs)."""
    n_prompt_cached: int = 0
    n_prompt_processed: int = 0
    n_gen: int = 0
    t_start: int = 0
    t_prompt_last: int = 0
    t_gen_last: int = 0
    # the package's energy counter (bankml.server.energy, µJ) at t_start and at the first token; None without one
    e_start: int | None = None
    e_prompt: int | None = None

    def t_prompt_ms(self) -> float:
        return 0.0 if self.t_prompt_last == 0 else (self.t_prompt_last - self.t_start) / 1000.0

    def t_gen_ms(self) -> float:
        if self.t_gen_last == 0:
            return 0.0
        return max(1, self.t_gen_last - self.t_prompt_last) / 1000.0

    def n_gen_steps(self) -> int:
        return self.n_gen - 1 if self.n_gen > 0 else 0

    def energy_uj(self) -> tuple[int, int] | None:
        """(prompt, generation) energy of the package in µJ: from the start to the first token, and from the first
        token to now; None without a meter, or before the first token."""
        if self.e_start is None or self.e_prompt is None:
            return None
        now = energy.read()
        return None if now is None else (self.e_prompt - self.e_start, now - self.e_prompt)

    def to_json(self) -> dict:
        """llama-server's timings; with a readable energy counter, bankml's three energy fields after them (the
        package's joules over the prompt and over the generation, and the generation's per step), absent
        otherwise."""
        out = self._timings()
        e = self.energy_uj()
        if e is not None:
            steps = self.n_gen_steps()
            out["prompt_energy_j"] = e[0] / 1e6
            out["predicted_energy_j"] = e[1] / 1e6
            out["predicted_energy_per_token_j"] = e[1] / 1e6 / steps if steps > 0 else 0.0
        return out

    def _timings(self) -> dict:
        t_p, t_g, steps = self.t_prompt_ms(), self.t_gen_ms(), self.n_gen_steps()
        return {
            "cache_n": self.n_prompt_cached,
            "prompt_n": self.n_prompt_processed,
            "prompt_ms": t_p,
            "prompt_per_token_ms": t_p / self.n_prompt_processed if self.n_prompt_processed > 0 else 0.0,
            "prompt_per_second": 1e3 / t_p * self.n_prompt_processed if t_p > 0.0 else 0.0,
            "predicted_n": self.n_gen,
            "predicted_ms": t_g,
            "predicted_per_token_ms": t_g / steps if steps > 0 else 0.0,
            "predicted_per_second": 1e3 / t_g * steps if t_g > 0.0 else 0.0,
        }


@dataclass
class Slot:
    id: int
    cache: object                       # bankml.engine.KVCache
    n_ctx: int
    tokens: list[int] = field(default_factory=list)
    t_last_used: int = -1
    processing: bool = False
    # what GET /slots shows once a task ran
    id_task: int | None = None
    last: dict | None = None            # n_prompt_tokens, processed, cache, params of the last task
    next_token: dict = field(default_factory=lambda: {"has_next_token": False, "has_new_line": False,
                                                      "n_remain": -1, "n_decoded": 0})
    # server_prompt's context checkpoints (bankml.server.generation.Checkpoint), oldest first: models with
    # sliding-window layers only
    checkpoints: list = field(default_factory=list)

    def clear(self) -> None:
        """prompt_clear: drop every cached token (and the checkpoints)."""
        self.cache.clear()
        self.tokens = []
        self.checkpoints = []

    def keep_first(self, n: int) -> None:
        """prompt.tokens.keep_first(n) + llama_memory_seq_rm(id, n, -1)."""
        if n < len(self.tokens):
            self.tokens = self.tokens[:n]
        self.cache.truncate(n)

    def state_size(self) -> int:
        """llama_state_seq_get_size of the slot's sequence: the stream / cell / layer headers (24, plus
        8 + 24 n_layer + 12 per cell when there are cells) and the K / V rows."""
        n = len(self.tokens)
        return 24 + (8 + 24 * self.n_layer + n * (12 + self.cache_row_bytes) if n else 0)

    cache_row_bytes: int = 0
    n_layer: int = 0


@dataclass
class _Entry:
    tokens: list[int]
    state: bytes
    nbytes: int                         # llama-server's size of this state (Slot.state_size)
    checkpoints: list = field(default_factory=list)    # the slot's context checkpoints, saved with it

    def size(self) -> int:
        return self.nbytes


class PromptCache:
    """server_prompt_cache: saved slot states in insertion order (oldest first)."""

    def __init__(self, limit_mib: int, limit_tokens: int):
        self.limit_size = 0 if limit_mib < 0 else limit_mib * 1024 * 1024
        self.limit_tokens = limit_tokens
        self.states: deque[_Entry] = deque()

    def size(self) -> int:
        return sum(e.size() for e in self.states)

    def n_tokens(self) -> int:
        return sum(len(e.tokens) for e in self.states)

    def save(self, slot: Slot) -> bool:
        """prompt_save + alloc."""
        if not slot.tokens:
            return False
        for e in self.states:
            if common_prefix(e.tokens, slot.tokens) == len(slot.tokens):
                return False                       # already in the cache
        size_new = slot.state_size()
        if self.limit_size > 0 and size_new > self.limit_size:
            return False                           # larger than the whole cache: skipped
        self.states = deque(e for e in self.states if common_prefix(e.tokens, slot.tokens) != len(e.tokens))
        if self.limit_size > 0:
            while self.states and self.size() + size_new > self.limit_size:
                self.states.popleft()
        self.states.append(_Entry(list(slot.tokens), slot.cache.save(), size_new, list(slot.checkpoints)))
        return True

    def load(self, slot: Slot, tokens_new: list[int]) -> bool:
        """The best entry for tokens_new, moved into the slot (if any beats the slot's own tokens)."""
        lcp_best = common_prefix(slot.tokens, tokens_new)
        f_keep_best = lcp_best / len(slot.tokens) if slot.tokens else -1.0
        f_sim_best = lcp_best / len(tokens_new) if tokens_new else float("nan")
        best = None
        for e in self.states:
            lcp = common_prefix(e.tokens, tokens_new)
            f_keep = f32(lcp / len(e.tokens))
            f_sim = f32(lcp / len(tokens_new)) if tokens_new else float("nan")
            if f_keep < 0.25:
                continue
            if f32(f_keep_best) < f_keep and f32(f_sim_best) < f_sim:
                f_keep_best, f_sim_best, best = f_keep, f_sim, e
        if best is not None:
            try:
                slot.cache.restore(best.state)
            except ContextFull:             # no room in a unified cache: the slot holds nothing (prompt_clear)
                log.warning("failed to restore state with size %d", best.nbytes)
                return False
            slot.tokens = best.tokens
            slot.checkpoints = list(best.checkpoints)
            self.states.remove(best)
        return True

    def update(self) -> None:
        if self.limit_size > 0:
            while self.states and self.size() > self.limit_size:
                self.states.popleft()
        per_token = max(1.0, f32(self.size() / max(1, self.n_tokens())))
        limit_tokens = max(self.limit_tokens, int(self.limit_size / per_token)) if self.limit_size > 0 \
            else self.limit_tokens
        if self.limit_tokens > 0:
            while self.states and self.n_tokens() > limit_tokens:
                self.states.popleft()


class Bucket:
    def __init__(self):
        self.count = self.steps = self.time = 0

    def add(self, n: int, steps: int, t_us: int) -> None:
        self.count += n
        self.steps += steps
        self.time += t_us

    def per_second(self) -> float:
        return self.steps / self.time * 1e6 if self.time > 0 else 0.0


class Metrics:
    """server_metrics: cumulative counters, and the two buckets /metrics averages since its previous scrape."""

    def __init__(self, pool):
        self.pool = pool
        self.t_start = time_us()
        self.prompt, self.predict = Bucket(), Bucket()
        self.prompt_bucket, self.predict_bucket = Bucket(), Bucket()
        self.n_prompt_cached = 0
        self.n_tokens_max = 0
        self.n_decode = 0
        self.n_busy_slots = 0
        self._t_decode = time_us()
        # the package's energy over finished tasks (µJ); None while no task had a reading
        self.energy_prompt_uj: int | None = None
        self.energy_predicted_uj: int | None = None

    def prompt_cached(self, n: int) -> None:
        self.n_prompt_cached += n

    def decoded(self, n_tokens: int, prompt: bool) -> None:
        now = time_us()
        self.n_decode += 1
        for s in self.pool.slots:
            if s.processing:
                self.n_busy_slots += 1
            self.n_tokens_max = max(self.n_tokens_max, len(s.tokens))
        if prompt:
            self.prompt.add(n_tokens, n_tokens, now - self._t_decode)
            self.prompt_bucket.add(n_tokens, n_tokens, now - self._t_decode)
        self._t_decode = now

    def start(self) -> None:
        self._t_decode = time_us()

    def finished(self, run, ok: bool) -> None:
        st = run.stats
        t_us = 0 if st.t_gen_last == 0 else max(1, st.t_gen_last - st.t_prompt_last)
        self.predict.add(st.n_gen, st.n_gen_steps(), t_us)
        self.predict_bucket.add(st.n_gen, st.n_gen_steps(), t_us)
        e = st.energy_uj()
        if e is not None:
            self.energy_prompt_uj = (self.energy_prompt_uj or 0) + e[0]
            self.energy_predicted_uj = (self.energy_predicted_uj or 0) + e[1]

    def reset_bucket(self) -> None:
        self.prompt_bucket, self.predict_bucket = Bucket(), Bucket()


def unified_refusal(ctx) -> str | None:
    """Why this server's slots do not share one unified KV cache (None: they do, on Model.new_unified_cache):
    no unified cache asked, one slot (a unified cache of one sequence is a cache of its own), a graph
    Model.decode_unified does not take (model.UNIFIED_ARCHS), embeddings of a graph other than llama's
    (Model.embed_unified takes llama's only). A model with sliding-window layers (gemma3) shares one: its slots'
    checkpoints and saved states hold their sequence's cells of the shared sliding-window cache
    (bankml.engine.model.UnifiedSeq)."""
    if not ctx.kv_unified:
        return "a split KV cache"
    if ctx.n_slots <= 1:
        return "one slot"
    if ctx.header.architecture not in UNIFIED_ARCHS:
        return f"one unified stream for a {ctx.header.architecture} model is not reproduced by bankml yet"
    if ctx.cfg.embedding and ctx.header.architecture != "llama":
        return f"embeddings of a {ctx.header.architecture} model on a unified KV cache are not reproduced by bankml"
    return None


class SlotPool:
    """The server's slots (see the module doc)."""

    def __init__(self, ctx):
        self.ctx = ctx
        cfg = ctx.cfg
        model = ctx.model
        self.similarity = cfg.slot_prompt_similarity
        self.slots: list[Slot] = []
        # llama-server's unified KV cache (-kvu, -np auto) with several slots: one stream shared by every slot, each
        # slot its sequence (seq id = slot id); else (one slot, a split cache, or what unified_refusal names) each
        # slot has its own cache
        unified = unified_refusal(ctx) is None
        self.unified = model.new_unified_cache(ctx.n_ctx_slot, n_seq_max=ctx.n_slots) if unified else None
        for i in range(ctx.n_slots):
            if self.unified is not None:
                cache = self.unified.seq(i)
            elif i == 0 and model.cache.n_ctx == ctx.n_ctx_slot:
                cache = model.cache
            else:
                cache = model.new_cache(ctx.n_ctx_slot)
            s = Slot(i, cache, ctx.n_ctx_slot)
            s.cache_row_bytes = cache.state_size(1)
            s.n_layer = model.hparams.n_layer
            self.slots.append(s)
        n_ctx_total = ctx.n_ctx_slot if ctx.kv_unified else ctx.n_ctx_slot * ctx.n_slots
        self.prompt_cache = PromptCache(cfg.cache_ram_mib, n_ctx_total) if cfg.cache_ram_mib != 0 else None
        self.cache_idle_slots = cfg.cache_idle_slots and self.prompt_cache is not None
        if self.cache_idle_slots:
            # llama-server's debug tag for its own test suite (test_kv_keep_only_active.py), printed at -v
            log.debug("__TEST_TAG_CACHE_IDLE_SLOTS_ENABLED__")
        self.metrics = Metrics(self)
        self.n_processing = 0

    def by_id(self, id_slot: int) -> Slot | None:
        """get_slot_by_id: id_slot % n_slots with the id converted to size_t first (C++ int % size_t)."""
        return self.slots[(id_slot % (1 << 64)) % len(self.slots)]

    def select(self, tokens: list[int], id_slot: int = -1, completion: bool = True) -> Slot | None:
        """get_available_slot (None: the requested slot does not exist or no slot is idle)."""
        ret = None
        update = False
        if id_slot != -1:
            ret = self.by_id(id_slot)
        if self.similarity != 0.0:
            best = 0.0
            for s in self.slots:
                if id_slot != -1 and s.id != id_slot:
                    continue
                if s.processing or not s.tokens:
                    continue
                lcp = common_prefix(s.tokens, tokens)
                f_sim = f32(lcp / len(tokens)) if tokens else float("nan")
                if f_sim > best and f_sim > f32(self.similarity):
                    best = f_sim
                    ret = s
            if ret is not None:
                f_keep = f32(f32(best * len(tokens)) / len(ret.tokens)) if ret.tokens else float("nan")
                if f_keep < 0.5:
                    update = True
        if ret is None:
            t_last = -1
            for s in self.slots:
                if s.processing:
                    continue
                if ret is None or s.t_last_used <= t_last:
                    t_last = s.t_last_used
                    ret = s
            if ret is not None:
                update = True
        if ret is not None and update and completion and self.prompt_cache is not None:
            log.debug("updating prompt cache")        # server-context.cpp:1643 (b11192), at -v as there
            self.prompt_cache.save(ret)
            if not self.prompt_cache.load(ret, tokens):
                ret.clear()
            self.prompt_cache.update()
        return ret

    def clear_idle(self) -> bool:
        """try_clear_idle_slots (server-context.cpp, b11192): with a unified cache, the first idle slot holding
        tokens drops them (prompt_clear); whether one did."""
        if self.unified is None:
            return False
        for s in self.slots:
            if not s.processing and s.tokens:
                log.warning("purging slot %d with %d tokens", s.id, len(s.tokens))
                s.clear()
                return True
        return False

    def cache_idle(self, active: Slot) -> None:
        """cache_idle_slots: after a completion task is launched, save every idle slot (a unified pool also
        clears them)."""
        if not self.cache_idle_slots:
            return
        for s in self.slots:
            if s is active or s.processing:
                continue
            if self.prompt_cache.save(s):          # each saved slot trims the cache at once, as there
                log.debug("slot %d: __TEST_TAG_CACHE_IDLE_SLOT__", s.id)
                self.prompt_cache.update()
            if self.ctx.kv_unified:
                s.clear()
