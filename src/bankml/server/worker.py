"""The worker: the one thread that runs tasks (completions, other slot tasks, slot actions) in arrival order, as
llama-server b11192's task queue does (tools/server/server-queue.cpp). Every engine call happens on it.

    worker = Worker(ctx)
    worker.submit_completion(task)     # a bankml.server.generation.CompletionTask; emit(event) runs on the worker
    worker.call(fn, *args)             # run fn on the worker after the tasks before it, return its result

With several slots on a split KV cache, completions go to bankml.server.batching's Batcher (one update_slots step
per loop turn while slots are at work); else each runs start to end (bankml.server.generation.run_completion).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque

from .batching import Batcher
from .generation import CompletionTask, run_completion

log = logging.getLogger("bankml.server")

_STOP = object()


class Worker:
    """The one thread that runs tasks (completions and slot actions) in arrival order."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.queue: queue.Queue = queue.Queue()
        self.front: deque = deque()     # deferred tasks put back at the queue's front (pop_deferred_task)
        # continuous batching (bankml.server.batching) when several slots have their own caches; else None and
        # each completion runs start to end (run_completion)
        self.batcher = Batcher.for_context(ctx, self)
        self.n_deferred = 0
        self._next_id = 0
        self._id_lock = threading.Lock()
        self.thread = threading.Thread(target=self._loop, name="bankml-worker", daemon=True)
        self.thread.start()

    def new_id(self) -> int:
        with self._id_lock:
            i = self._next_id
            self._next_id += 1
            return i

    def submit(self, fn, *args) -> None:
        self.queue.put((fn, args))

    def submit_completion(self, task: CompletionTask) -> None:
        """Queue a task; its id is taken now, as llama-server numbers tasks when the HTTP thread posts them (the
        counter also advances once per update_slots iteration and per /slots, /metrics or slot action)."""
        task.id = self.new_id()
        for child in task.children:
            child.id = self.new_id()
            child.id_parent = task.id
        if self.batcher is not None:
            self.submit(self.batcher.admit, task)
        else:
            self.submit(run_completion, self.ctx, task)

    def submit_task(self, fn, task) -> None:
        """Queue another kind of slot task (bankml.server.embeddings): its id is taken now, as for a completion;
        fn(ctx, task) runs on the worker."""
        task.id = self.new_id()
        if self.batcher is not None:
            self.submit(self.batcher.admit_other, fn, task)
        else:
            self.submit(fn, self.ctx, task)

    def call(self, fn, *args, wait_for=None):
        """Run fn(*args) on the worker (after the tasks before it) and return its result (blocking). wait_for: a
        slot; while the batcher has it at work, the call is deferred until its release."""
        done = threading.Event()
        box = {}

        def job():
            if wait_for is not None and self.batcher is not None and wait_for.processing:
                self.batcher.defer(wait_for.id, (job, ()))
                return
            try:
                box["v"] = fn(*args)
            except BaseException as e:  # handed back to the caller
                box["e"] = e
            finally:
                done.set()
        self.submit(job)
        done.wait()
        if "e" in box:
            raise box["e"]
        return box["v"]

    def _next(self):
        """The next queued item: the queue's front first; while the batcher has slots at work, None when nothing
        is queued (the batcher steps then), else wait for one."""
        if self.front:
            return self.front.popleft()
        if self.batcher is not None and self.batcher.busy():
            try:
                return self.queue.get_nowait()
            except queue.Empty:
                return None
        return self.queue.get()

    def _loop(self) -> None:
        while True:
            item = self._next()
            if item is _STOP:
                return
            if item is None:                # slots at work, nothing queued: one update_slots step
                self.batcher.step()
                continue
            if self.batcher is not None:
                self.batcher.reap()
            fn, args = item
            try:
                fn(*args)
            except Exception:
                log.exception("worker task failed")

    def stop(self) -> None:
        self.queue.put(_STOP)
        self.thread.join(timeout=10)
