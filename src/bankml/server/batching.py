"""Continuous batching: several slots' work in one forward pass per step, as llama-server b11192's update_slots
gathers it (tools/server/server-context.cpp) when every slot has its own KV stream (-np N > 1 without -kvu), or
when the slots share one unified stream (-kvu, and -np auto: llama-server's default of 4 slots).

    batcher = Batcher.for_context(ctx, worker)   # None when the slots are served one at a time (see below)
    worker.submit(batcher.admit, task)           # a completion task: its slots, or deferred until slots free
    batcher.step()                               # one update_slots iteration (the worker calls it while busy)

The worker (bankml.server.worker.Worker) takes every queued item first (tasks are launched on their slots
between steps, as llama-server's start_loop does), then runs one step while any slot is at work. A step:

1. a task whose stream was cut (its `cancelled` flag) frees its slots now (the KV it computed stays cached; the
   worker also does this before each queued item, so a /slots or a new request after the cut sees the slot idle);
2. pre_decode: a generating slot whose tokens + 1 reach n_ctx is context-shifted (or refused for a shared
   prompt), as bankml.server.generation.pre_decode does it;
3. the batch: one row per generating slot (its last sampled token), in slot order; then, while the batch holds
   fewer than n_batch tokens, prompt tokens of each slot still processing its prompt, in slot order (a slot that
   starts gets its timers, reused prefix and first stream event then; a child of an n > 1 task waits for its
   parent's prompt); the last token of a finished prompt is an output row. With context checkpoints (a model with
   sliding-window layers) a slot's share is cut as one slot's llama_decode is (generation.prompt_batch, given the
   room left in the batch) and its checkpoint, if due (generation._maybe_checkpoint), is taken then, before the
   step's decode;
4. the batch is decoded in views of n_batch tokens, each one Model.decode_batch (one llama_decode: the engine
   cuts it into ubatches with split_equal, so each row has the bits libllama gives it in that batch), or on a
   unified cache Model.decode_unified (split_simple; each ubatch's tokens take the first empty cells from the
   search head). A view that finds no cells there (llama_decode's 1, nothing changed) is retried after the
   first idle slot holding tokens is purged (try_clear_idle_slots), else with n_batch halved; at n_batch 1 every
   processing slot fails with "Context size has been exceeded." and drops its cells. A decoded view puts
   n_batch back;
5. after each view, in slot order: the progress event of each slot processing a prompt (return_progress), then
   each slot whose output row is in the view samples it with its own sampler (a parent whose prompt ended first
   copies its cells to its children, who sample the same row).

A task arriving while others generate joins at the next step. A task finds no idle slot (or its requested slot
busy, or too few free slots for its n > 1 children): it is deferred, and each slot's release puts one deferred
task (the first that asked for that slot, else the oldest) back at the queue's front. An embedding or rerank task
runs whole between steps once a slot is idle; a slot save / restore / erase waits until its slot is released
(bankml.server.worker.Worker.call's wait_for).

Served one at a time instead (for_context returns None): one slot (-np 1), a unified KV cache that
slots.unified_refusal names (a model other than llama, qwen3 and gemma3; embeddings of one other than llama),
and models whose graph Model.decode_batch does not gather (bankml.engine.model.MULTI_SEQ_ARCHS). A model with
sliding-window layers (gemma3) is batched with a KV cache per slot or on a unified one, its checkpoints taken per
slot.

With -v, every step logs its composition at debug level: `batch: step S, view V: slot I D (decode|prompt) at P,
...` (D rows of slot I from position P, in the batch's order); with the unified cache's own debug lines (`kv:
seq_rm S P0 P1`, `kv: clear`, `kv: restore S N`: bankml.engine.model.UnifiedCache) that is what
testing/record_load.py replays through libllama.
"""

from __future__ import annotations

import logging

from ..engine.model import MULTI_SEQ_ARCHS
from ..errors import ContextFull, ModelFileChanged
from .generation import (Error, Final, _maybe_checkpoint, _release, copy_to_children, launch_slots, pre_decode,
                         prompt_batch, prompt_decoded, prompt_progress, prompt_start, sample_one)
from .slots import unified_refusal

log = logging.getLogger("bankml.server")

WAIT, STARTED, PROMPT, GENERATING = "wait", "started", "prompt", "generating"


def unbatched_reason(ctx) -> str | None:
    """Why this server's slots are served one at a time (None: they are batched)."""
    if ctx.n_slots <= 1:
        return "one slot"
    if ctx.kv_unified:
        if ctx.slots.unified is not None:   # one UnifiedCache, decode_unified
            return None
        return f"a unified KV cache (-kvu, -np auto): {unified_refusal(ctx)}"
    arch = ctx.header.architecture
    if arch not in MULTI_SEQ_ARCHS:     # Model.decode_batch gathers several streams in these graphs only
        return f"several sequences in one decode of a {arch} model are not reproduced by bankml yet"
    return None


class _Group:
    """One completion task and its n > 1 children: their runs (bankml.server.generation._Run), parent first."""

    def __init__(self, runs):
        self.runs = runs
        self.shared = len(runs) > 1
        for r in runs:
            r.state = WAIT if r.task.id_parent != -1 else STARTED

    def live(self):
        return [r for r in self.runs if not r.done]

    def abort(self, ctx, last) -> None:
        """Release what is still running: the first live run carries `last` (an error, or None for a cut stream)."""
        for j, r in enumerate(self.live()):
            _release(ctx.slots, r, last if j == 0 else None, self.shared, finished=isinstance(last, Final))


class Batcher:
    def __init__(self, ctx, worker):
        self.ctx, self.worker = ctx, worker
        self.groups: list[_Group] = []
        self.deferred: list[tuple] = []     # (id_slot wanted, the queue item)
        self.n_step = 0
        ctx.slots.on_release = self._released

    @classmethod
    def for_context(cls, ctx, worker) -> "Batcher | None":
        why = unbatched_reason(ctx)
        if why is not None:
            if ctx.n_slots > 1:
                log.info("%d slots are served one at a time: %s", ctx.n_slots, why)
            return None
        return cls(ctx, worker)

    # -- the queue side
    def busy(self) -> bool:
        return any(g.live() for g in self.groups)

    def admit(self, task) -> None:
        """Launch a completion task (launch_slots_with_parent_task), or defer it while its slots are busy."""
        runs = launch_slots(self.ctx, task, defer=lambda: self.defer(task.params.id_slot,
                                                                       (self.admit, (task,))))
        if runs is not None:
            self.groups.append(_Group(runs))

    def admit_other(self, fn, task) -> None:
        """An embedding or rerank task: run whole now if a slot is idle, else deferred."""
        if all(s.processing for s in self.ctx.slots.slots):
            self.defer(-1, (self.admit_other, (fn, task)))
            return
        fn(self.ctx, task)

    def defer(self, id_slot: int, item: tuple) -> None:
        log.debug("no slot is available, defer task")
        self.deferred.append((id_slot, item))

    def _released(self, id_slot: int) -> None:
        """pop_deferred_task: the first deferred task that asked for this slot, else the oldest, to the queue's
        front."""
        if not self.deferred:
            return
        i = next((k for k, (want, _) in enumerate(self.deferred) if want == id_slot), 0)
        _, item = self.deferred.pop(i)
        self.worker.front.appendleft(item)

    # -- one update_slots iteration
    def reap(self) -> None:
        """Tasks whose stream was cut (their `cancelled` flag) free their slots (llama-server's cancel task, handled
        in the queue before the next step); the KV they computed stays cached."""
        for g in self.groups:
            if g.live() and g.runs[0].task.cancelled.is_set():
                g.abort(self.ctx, None)
        self.groups = [g for g in self.groups if g.live()]

    def step(self) -> None:
        ctx = self.ctx
        self.reap()
        if not self.groups:
            return
        ctx.worker.new_id()             # update_slots posts a NEXT_RESPONSE task (an id) per iteration
        self.n_step += 1
        try:
            self._step()
        except ModelFileChanged as e:   # the file was cut under the map: not a bug, and already said on stderr
            log.error("generation stopped: %s", e)
            self._abort_all(Error(500, str(e), "server_error"))
        except Exception as e:          # a bug: llama-server's 500 (abort_all_slots) rather than hanging clients
            log.exception("generation failed")
            self._abort_all(Error(500, str(e) or type(e).__name__, "server_error"))
        self.groups = [g for g in self.groups if g.live()]

    def _abort_all(self, err) -> None:
        for g in self.groups:
            g.abort(self.ctx, err)

    def _runs(self):
        return sorted((r for g in self.groups for r in g.live()), key=lambda r: r.slot.id)

    def _step(self) -> None:
        ctx = self.ctx
        group_of = {id(r): g for g in self.groups for r in g.runs}
        gen = [r for r in self._runs() if r.state == GENERATING]
        pre_decode(ctx, gen, lambda r: group_of[id(r)].shared)
        # the batch: [run, tokens, pos, output, is_prompt]
        rows = [[r, [r.next_tok], len(r.slot.tokens), True, False]
                for r in self._runs() if r.state == GENERATING]
        n_batch = ctx.n_batch
        size = len(rows)
        do_checkpoint = ctx.checkpoints_on
        for r in self._runs():
            if size >= n_batch:
                break
            if r.state == STARTED:
                go_on, last = prompt_start(ctx, r)
                if not go_on:
                    group_of[id(r)].abort(ctx, last)
                    continue
                r.state = PROMPT
            if r.state != PROMPT:
                continue
            start, P = len(r.slot.tokens), len(r.task.tokens)
            # the slot's share: what the batch has room for, cut as one slot's llama_decode is (prompt_batch);
            # its context checkpoint, if one is due, is taken now, before the step's decode (create_checkpoint)
            n = prompt_batch(ctx, r, start, P, n_batch, do_checkpoint, room=n_batch - size)
            if do_checkpoint:
                _maybe_checkpoint(ctx, r, start, n, P)
            rows.append([r, r.task.tokens[start:start + n], start, start + n == P, True])
            size += n
        v = 0
        while rows:
            view, rest = _take(rows, n_batch)
            try:
                self._decode_view(v, view, group_of)
            except ContextFull:
                if ctx.slots.unified is None:
                    raise
                # llama_decode found no cells for the view (a unified cache, nothing changed): at n_batch 1 every
                # processing slot fails; else the first idle slot holding tokens is purged
                # (try_clear_idle_slots), or n_batch halves, and the view is tried again
                if n_batch == 1:
                    self._context_exceeded()
                    return
                if not ctx.slots.clear_idle():
                    n_batch //= 2
                log.warning("failed to find free space in the KV cache, retrying with smaller batch size, "
                            "n_batch = %d", n_batch)
                continue
            rows, v = rest, v + 1
            n_batch = ctx.n_batch       # a decoded view puts n_batch back (update_slots)

    def _context_exceeded(self) -> None:
        """llama_decode failed at n_batch 1: each processing slot gets "Context size has been exceeded." and is
        released with its cells dropped (server-context.cpp, b11192)."""
        err = Error(500, "Context size has been exceeded.", "server_error")
        slots = [r.slot for g in self.groups for r in g.live()]
        for g in self.groups:
            g.abort(self.ctx, err)
        for s in slots:
            s.clear()

    def _decode_view(self, v: int, view: list, group_of: dict) -> None:
        ctx = self.ctx
        if log.isEnabledFor(logging.DEBUG):
            log.debug("batch: step %d, view %d: %s", self.n_step, v, ", ".join(
                f"slot {r.slot.id} {len(t)} ({'prompt' if p else 'decode'}) at {pos}" for r, t, pos, _, p in view))
        outs = [o for _, _, _, o, _ in view]
        if ctx.slots.unified is not None:
            logits = ctx.model.decode_unified(ctx.slots.unified, [(r.slot.id, t, pos) for r, t, pos, _, _ in view],
                                              outs)
        else:
            logits = ctx.model.decode_batch([(r.slot.id, r.slot.cache, t, pos) for r, t, pos, _, _ in view], outs)
        n_prompt = 0
        sample = set()
        for (r, toks, _, out, is_prompt), row in zip(view, logits):
            if is_prompt:
                prompt_decoded(r, toks)
                n_prompt += len(toks)
            else:
                r.slot.tokens.append(toks[0])
            if out:
                r.logits = row
                sample.add(id(r))
        ctx.slots.metrics.decoded(n_prompt if n_prompt else len(view), prompt=n_prompt > 0)
        # a parent whose prompt ended gives its cells, tokens and row to its children (copy_state_to)
        for r, _, _, out, is_prompt in view:
            if out and is_prompt:
                g = group_of[id(r)]
                copy_to_children(g.runs)
                for c in g.runs[1:]:
                    sample.add(id(c))
        for r in self._runs():
            if r.done:
                continue
            if r.state == PROMPT:
                prompt_progress(r)
            if id(r) in sample:
                r.state = GENERATING
                try:
                    sample_one(ctx, r, group_of[id(r)].shared)
                except Exception as e:  # iterate's catch: this task's 500, the other slots go on
                    log.exception("generation failed")
                    group_of[id(r)].abort(ctx, Error(500, str(e) or type(e).__name__, "server_error"))


def _take(rows: list, n_batch: int) -> tuple[list, list]:
    """The batch's next view of n_batch tokens and the rows after it (a slot's share split at the view's end;
    only its last piece keeps the output)."""
    view, room = [], n_batch
    for i, (r, toks, pos, out, is_prompt) in enumerate(rows):
        take = min(room, len(toks))
        view.append((r, toks[:take], pos, out and take == len(toks), is_prompt))
        room -= take
        if room == 0:
            rest = [] if take == len(toks) else [(r, toks[take:], pos + take, out, is_prompt)]
            return view, rest + list(rows[i + 1:])
    return view, []


def _views(rows: list, n_batch: int) -> list[list]:
    """The whole batch cut into views of n_batch tokens (_take after _take)."""
    views = []
    while rows:
        view, rows = _take(rows, n_batch)
        views.append(view)
    return views
