"""Embedding and rerank tasks on the server's slots, as llama-server b11192 runs them (tools/server/server-context.cpp:
update_slots for a task that needs embeddings, send_embedding, send_rerank).

    tasks = make_tasks(token_lists, pooling, normalize, rerank, emit_for)   # one task per input, in input order
    for t in tasks: ctx.worker.submit_task(run_embedding, t)                # emit(Result | Error) on the worker
    results = compute(ctx, token_lists, pooling="mean", normalize=2)        # the same, blocking (a worker thread)
    results = compute(ctx, token_lists, pooling="last", normalize=-1, cache_prompt=False)   # Ollama's runner
    submit(ctx, tasks)                                       # the routes: one by one, or run_group (see below)

Per task, in llama-server's order: the slot (get_available_slot: an embedding task never updates the host prompt
cache), "Prompt contains invalid tokens", then cache_idle_slots; then the prompt:
- pooling none, mean, cls and rank cannot split their prompt (can_split): it must fit one ubatch ("input (N tokens)
  is too large to process. increase the physical batch size (current batch size: U)", 500) and the slot's context
  ("input ... is larger than the max context size", exceed_context_size_error); nothing cached is reused, the slot
  is cleared and the whole prompt is one decode with every token an output (bankml.engine.Model.embed);
- pooling last can split: the cached prefix is kept (LCP with the slot's tokens, a fully cached prompt recomputes
  its last token), the rest goes in calls of at most n_batch tokens, and the last call's last row is the vector;
  a prompt of n_ctx tokens or more is exceed_context_size_error. With `cache_prompt=False` (Ollama's runner:
  LoadCacheSlot with cachePrompt false, runner/llamarunner/cache.go:86) no prefix is kept: the whole prompt is
  decoded, as llama-server decodes it in a slot erased first.
The slot keeps the prompt's cells and tokens afterwards (a later request may reuse them).
Several inputs on several slots (submit, compute): run_group runs llama-server's loop for the request's tasks, their
prompts decoded together (bankml.engine.Model.embed_batch on a split KV cache, Model.embed_unified on a unified one:
-np auto, -kvu), as the module's functions say. On a unified cache a lone input's calls are Model.embed_unified too.

Results (send_embedding): pooling none gives every row of the last call, unnormalised; any other pooling one row,
normalised with the request's embd_normalize (common_embd_normalize); rerank (send_rerank) the pooled row's element
0 as the score. This module knows no HTTP shape: bankml.server.api.embeddings (llama-server's and OpenAI's routes)
and bankml.server.api.ollama write the JSON.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from ..errors import ModelFileChanged
from .batching import _views
from .generation import Error
from .slots import common_prefix, time_us

#: llama_pooling_type values of a GGUF's `<arch>.pooling_type`
POOLING_TYPES = {0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}


def pooling_of(cfg, header) -> str:
    """llama_pooling_type(ctx): --pooling, else the model's `<arch>.pooling_type`, else none (llama_context)."""
    if cfg.pooling is not None:
        return cfg.pooling
    v = header.get(f"{header.architecture}.pooling_type")
    return POOLING_TYPES.get(int(v), "none") if v is not None else "none"


@dataclass
class Result:
    """server_task_result_embd / _rerank: the input's index, its token count (tokens_evaluated), its vectors (one per
    token with pooling none, else one) and, for rerank, the score."""
    index: int
    n_tokens: int
    vectors: list = field(default_factory=list)
    score: float = 0.0


@dataclass
class EmbeddingTask:
    tokens: list[int]
    pooling: str
    normalize: int
    rerank: bool
    emit: object                        # callable(Result | Error), called on the worker thread
    index: int = 0
    cache_prompt: bool = True           # pooling last: reuse the slot's cached prefix
    id: int = 0
    cancelled: threading.Event = field(default_factory=threading.Event)


def make_tasks(token_lists, pooling: str, normalize: int, rerank: bool, emit_for,
               cache_prompt: bool = True) -> list[EmbeddingTask]:
    """One task per input (post_tasks numbers them 0, 1, ... as their result index)."""
    return [EmbeddingTask(list(t), pooling, normalize, rerank, emit_for(i), index=i, cache_prompt=cache_prompt)
            for i, t in enumerate(token_lists)]


def _prompt_error(ctx, slot, task: EmbeddingTask, can_split: bool):
    """update_slots' size checks of a new prompt (server-context.cpp:3184-3212)."""
    P = len(task.tokens)
    if not can_split:
        n_ubatch = ctx.model.n_ubatch
        if P > n_ubatch:
            return Error(500, f"input ({P} tokens) is too large to process. increase the physical batch size "
                              f"(current batch size: {n_ubatch})", "server_error")
        if P > slot.n_ctx:
            return Error(400, f"input ({P} tokens) is larger than the max context size ({slot.n_ctx} tokens). "
                              "skipping", "exceed_context_size_error", n_prompt_tokens=P, n_ctx=slot.n_ctx)
    elif P >= slot.n_ctx:
        return Error(400, f"request ({P} tokens) exceeds the available context size ({slot.n_ctx} tokens), try "
                          "increasing it", "exceed_context_size_error", n_prompt_tokens=P, n_ctx=slot.n_ctx)
    return None


def _launch(ctx, task: EmbeddingTask, deferred: list | None = None):
    """launch_slot_with_task for an embedding task: the idle slot it now runs on, or None when it was cancelled,
    refused (its error emitted), or finds no idle slot (then appended to deferred; run_embedding runs only once a
    slot is idle)."""
    pool = ctx.slots
    if task.cancelled.is_set():
        return None
    if not task.tokens:
        # only a rerank of an empty query and an empty document gets here (the embedding routes refuse empty input
        # first); llama-server's slot sends it a completion's result and its reader aborts on the type
        task.emit(Error(400, "the query and the document are both empty: there is nothing to rank",
                        "invalid_request_error"))
        return None
    slot = pool.select(task.tokens, -1, completion=False)
    if slot is None:
        if deferred is None:
            task.emit(Error(500, "no idle slot for this task", "server_error"))
        else:
            deferred.append(task)
        return None
    if any(not 0 <= t < ctx.tokenizer.n_vocab for t in task.tokens):
        task.emit(Error(400, "Prompt contains invalid tokens", "invalid_request_error"))
        return None
    slot.processing = True
    slot.id_task = task.id
    pool.cache_idle(slot)
    pool.n_processing += 1
    return slot


def run_embedding(ctx, task: EmbeddingTask) -> None:
    """One embedding or rerank task, start to end, on the worker thread (see the module doc)."""
    pool = ctx.slots
    slot = _launch(ctx, task)
    if slot is None:
        return
    out = None
    try:
        out = _evaluate(ctx, slot, task)
    except ModelFileChanged as e:
        out = Error(500, str(e), "server_error")
    except Exception as e:          # a bug: llama-server's 500 rather than a client left waiting
        import logging
        logging.getLogger("bankml.server").exception("embedding failed")
        out = Error(500, str(e) or type(e).__name__, "server_error")
    finally:
        pool.n_processing -= 1
        slot.processing = False
        slot.t_last_used = time_us()
        if out is not None:
            task.emit(out)


def _evaluate(ctx, slot, task: EmbeddingTask):
    pool, model, worker = ctx.slots, ctx.model, ctx.worker
    pooling = "rank" if task.rerank else task.pooling
    can_split = pooling == "last"          # llama has a memory module: only last pooling may split its prompt
    worker.new_id()                        # update_slots' iteration
    err = _prompt_error(ctx, slot, task, can_split)
    if err is not None:
        return err
    tokens = task.tokens
    P = len(tokens)
    n_past = 0
    if can_split and task.cache_prompt:
        n_past = common_prefix(slot.tokens, tokens)
        if n_past == P and n_past > 0:
            n_past -= 1
    pool.metrics.start()
    pool.metrics.prompt_cached(n_past)
    slot.keep_first(n_past)
    n_batch = ctx.n_batch if can_split else P
    rows = None
    first = True
    while len(slot.tokens) < P:
        if task.cancelled.is_set():
            return None
        if not first:
            worker.new_id()
        first = False
        chunk = tokens[len(slot.tokens):len(slot.tokens) + n_batch]
        if pool.unified is not None:        # -np auto, -kvu: the slot's sequence in the shared stream
            rows = model.embed_unified(pool.unified, [(slot.id, chunk, len(slot.tokens))], "none")[0]
        else:
            rows = model.embed(chunk, len(slot.tokens), cache=slot.cache)
        slot.tokens.extend(chunk)
        pool.metrics.decoded(len(chunk), prompt=True)
    return _result(model, task, rows if pooling == "none" else model.pool(rows, pooling))


def _result(model, task: EmbeddingTask, got) -> Result:
    """send_embedding / send_rerank: got is the rows (pooling none) or what the sequence's pooling gave (a vector;
    for rank, the score in element 0)."""
    P = len(task.tokens)
    if task.rerank:
        return Result(task.index, P, score=float(got[0]))
    if task.pooling == "none":
        return Result(task.index, P, [np.array(r, dtype=np.float32) for r in got])
    vec = model.normalize(np.asarray(got, dtype=np.float32), task.normalize)
    return Result(task.index, P, [np.asarray(vec, dtype=np.float32)])


class _Run:
    """One task of a group on its slot (started: its prompt not yet checked)."""

    def __init__(self, slot, task: EmbeddingTask):
        self.slot, self.task, self.started = slot, task, False


def batched(ctx) -> bool:
    """Whether several inputs of a request are decoded together, as llama-server does it: several slots, each its
    own KV stream or all on one unified stream (the worker's Batcher runs them), else one task at a time."""
    return ctx.worker.batcher is not None


def submit(ctx, tasks: list[EmbeddingTask]) -> None:
    """Post a request's tasks to the worker: one by one (run_embedding), or, with several inputs on several slots,
    as one group that runs llama-server's steps for them (run_group)."""
    if len(tasks) > 1 and batched(ctx):
        for t in tasks:                 # numbered as post_tasks numbers them
            t.id = ctx.worker.new_id()
        ctx.worker.submit(ctx.worker.batcher.admit_other, run_group, tasks)   # when a slot is idle
        return
    for t in tasks:
        ctx.worker.submit_task(run_embedding, t)


def run_group(ctx, tasks: list[EmbeddingTask]) -> None:
    """A request's embedding (or rerank) tasks on several slots, start to end on the worker thread, as llama-server
    b11192's loop runs them when they are the server's only work: each turn launches the queued tasks on idle slots
    (get_available_slot; a task without one is deferred, and each release puts the oldest deferred task back at the
    queue's front), then one update_slots step: in slot order, each started slot's prompt checks and reused prefix
    (as run_embedding), then its prompt tokens while the batch has room (a prompt that cannot split waits for a
    step where it fits whole); the batch is decoded in views of n_batch tokens, each one llama_decode of several
    sequences (bankml.engine.Model.embed_batch: split_equal's ubatches, pooled per ubatch; on a unified cache
    Model.embed_unified: split_simple's), and after each view
    every slot whose last prompt token is in it sends its result and is released."""
    pool = ctx.slots
    queue = list(tasks)
    deferred: list[EmbeddingTask] = []
    runs: list[_Run] = []

    def release(r: _Run, out) -> None:
        runs.remove(r)
        pool.n_processing -= 1
        r.slot.processing = False
        r.slot.t_last_used = time_us()
        if out is not None:
            r.task.emit(out)
        if deferred:
            queue.insert(0, deferred.pop(0))

    try:
        while queue or runs:
            while queue:                            # process_new_tasks
                task = queue.pop(0)
                slot = _launch(ctx, task, deferred)
                if slot is not None:
                    runs.append(_Run(slot, task))
            if not runs:
                break
            for r in [r for r in runs if r.task.cancelled.is_set()]:
                release(r, None)
            if runs:
                _group_step(ctx, runs, release)
    except ModelFileChanged as e:
        for r in list(runs):
            release(r, Error(500, str(e), "server_error"))
    except Exception as e:          # a bug: llama-server's 500 rather than a client left waiting
        import logging
        logging.getLogger("bankml.server").exception("embedding failed")
        for r in list(runs):
            release(r, Error(500, str(e) or type(e).__name__, "server_error"))
    for task in deferred + queue:
        if not task.cancelled.is_set():
            task.emit(Error(500, "no slot was left for this input", "server_error"))


def _group_step(ctx, runs: list, release) -> None:
    """One update_slots iteration over the group's runs (see run_group)."""
    pool, model = ctx.slots, ctx.model
    ctx.worker.new_id()
    n_batch = ctx.n_batch
    batch = []                                  # (run, tokens, pos, last piece of its prompt, is_prompt)
    size = 0
    for r in sorted(runs, key=lambda r: r.slot.id):
        if size >= n_batch:
            break
        task, slot = r.task, r.slot
        pooling = "rank" if task.rerank else task.pooling
        can_split = pooling == "last"
        P = len(task.tokens)
        if not r.started:
            err = _prompt_error(ctx, slot, task, can_split)
            if err is not None:
                release(r, err)
                continue
            n_past = 0
            if can_split and task.cache_prompt:
                n_past = common_prefix(slot.tokens, task.tokens)
                if n_past == P and n_past > 0:
                    n_past -= 1
            pool.metrics.start()
            pool.metrics.prompt_cached(n_past)
            slot.keep_first(n_past)
            r.started = True
        start = len(slot.tokens)
        if not can_split and size + P - start > n_batch:
            continue                            # cannot fit the prompt in this batch: the next step
        n = min(n_batch - size, P - start)
        batch.append((r, task.tokens[start:start + n], start, start + n == P, True))
        size += n
    pooling = "rank" if runs[0].task.rerank else runs[0].task.pooling
    for view in _views(batch, n_batch):
        if pool.unified is not None:            # -np auto, -kvu: one stream, split_simple (Model.embed_unified)
            got = model.embed_unified(pool.unified, [(r.slot.id, t, pos) for r, t, pos, _, _ in view], pooling)
        else:                                   # a stream per slot, split_equal
            got = model.embed_batch([(r.slot.id, r.slot.cache, t, pos) for r, t, pos, _, _ in view], pooling)
        for r, t, _, _, _ in view:
            r.slot.tokens.extend(t)
        pool.metrics.decoded(sum(len(v[1]) for v in view), prompt=True)
        for (r, _, _, done, _), g in sorted(zip(view, got), key=lambda e: e[0][0].slot.id):
            if done:
                release(r, _result(model, r.task, g))


def compute(ctx, token_lists, pooling: str, normalize: int = 2, rerank: bool = False,
            cache_prompt: bool = True) -> list[Result]:
    """Every input's Result, in input order, from the worker (blocking: call it off the event loop). Raises the first
    Error (a bankml.server.http.Refusal) a task answered. Several inputs on several slots are decoded together as
    the routes do it (submit); cache_prompt=False (Ollama's runner) reuses no cached prefix and decodes each input
    alone."""
    got: dict[int, object] = {}
    done = threading.Event()
    lock = threading.Lock()
    n = len(token_lists)

    def emit_for(i):
        def emit(ev):
            with lock:
                got[i] = ev
                if len(got) == n or isinstance(ev, Error):
                    done.set()
        return emit

    tasks = make_tasks(token_lists, pooling, normalize, rerank, emit_for, cache_prompt)
    if not tasks:
        return []
    if cache_prompt:
        submit(ctx, tasks)
    else:                               # Ollama's runner: each input alone, as in a slot erased first
        for t in tasks:
            ctx.worker.submit_task(run_embedding, t)
    done.wait()
    with lock:
        errors = [ev for ev in got.values() if isinstance(ev, Error)]
    if errors:
        for t in tasks:
            t.cancelled.set()
        raise errors[0]
    return [got[i] for i in range(n)]
