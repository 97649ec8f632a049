"""bankml.server.residency.Residency over a fake loader (no model, no engine): which models are resident and when.

The fake context has what Residency calls on a context (close(), snapshot(), model_info(), adopt_metrics(), path,
slots); the fake loader records every load and how many contexts are open at once. Every wait is bounded (short
ticks, polls of at most a few seconds, threads joined with a timeout) so that a bug fails a test instead of
hanging the suite.
"""

from __future__ import annotations

import os
import threading
import time
import types

import pytest

from bankml.server.http import Refusal
from bankml.server.residency import LOADED, SLEEPING, UNLOADED, FileChanged, LoadFailed, Residency

WAIT = 2.0          # the longest any condition is waited for
JOIN = 5.0          # the longest a helper thread is waited for


class FakeContext:
    def __init__(self, loader: "FakeLoader", path: str, name: str):
        self.loader, self.path, self.name = loader, path, name
        self.slots = None
        self.closed = False

    def close(self) -> None:
        with self.loader.lock:
            if not self.closed:
                self.closed = True
                self.loader.open.discard(self)

    def snapshot(self) -> dict:
        return {"props": {"model": self.name}}

    def model_info(self) -> dict:
        return {"meta": {"name": self.name}}

    def adopt_metrics(self, metrics) -> None:
        pass


class FakeLoader:
    """loader(cfg, path, name): a FakeContext; `fail`: names whose load raises; `delay`: seconds a load takes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls: list[str] = []
        self.open: set[FakeContext] = set()
        self.peak = 0               # the most contexts open at once
        self.fail: set[str] = set()
        self.delay = 0.0

    def __call__(self, cfg, path, name):
        with self.lock:
            self.calls.append(name)
        if self.delay:
            time.sleep(self.delay)
        if name in self.fail:
            raise RuntimeError(f"cannot read {path}")
        ctx = FakeContext(self, path, name)
        with self.lock:
            self.open.add(ctx)
            self.peak = max(self.peak, len(self.open))
        return ctx

    def loads(self, name: str) -> int:
        return self.calls.count(name)


@pytest.fixture
def files(tmp_path):
    out = {}
    for name in ("a", "b", "c", "bad"):
        p = tmp_path / f"{name}.gguf"
        p.write_bytes(name.encode() * 64)
        out[name] = str(p)
    return out


@pytest.fixture
def make(files):
    """make(models_max=1, **kw) -> (Residency, FakeLoader); closed at the end of the test."""
    made = []

    def make_residency(models_max: int = 1, **kw):
        loader = FakeLoader()
        res = Residency(types.SimpleNamespace(port=0), dict(files), None, loader=loader, models_max=models_max,
                        tick=0.01, **kw)
        made.append(res)
        return res, loader

    yield make_residency
    for res in made:
        res.close()


def wait_for(pred, timeout: float = WAIT) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.005)
    return pred()


def use(res: Residency, name: str):
    """One lease of a model, given back at once; its context."""
    with res.lease(name) as ctx:
        return ctx


class Leaser:
    """A lease taken on a thread of its own: `got` is set once it has the context, it holds it until `go` is set
    (or at once with hold=False); `order` (a shared list) records the name when the lease was had."""

    def __init__(self, res: Residency, name: str, order: list | None = None, hold: bool = False):
        self.res, self.name, self.order = res, name, order
        self.got, self.go = threading.Event(), threading.Event()
        if not hold:
            self.go.set()
        self.ctx = self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            with self.res.lease(self.name) as ctx:
                self.ctx = ctx
                if self.order is not None:
                    self.order.append(self.name)
                self.got.set()
                self.go.wait(JOIN)
        except Exception as e:        # noqa: BLE001 - kept for the test to look at
            self.error = e
            self.got.set()

    def start(self) -> "Leaser":
        self.thread.start()
        return self

    def join(self) -> "Leaser":
        self.go.set()
        self.thread.join(JOIN)
        assert not self.thread.is_alive(), f"the lease of {self.name} did not finish"
        assert self.error is None, f"the lease of {self.name} raised {self.error!r}"
        return self


def held(res: Residency, name: str, order: list | None = None) -> Leaser:
    """A lease of `name` taken on its own thread and held (until join())."""
    holder = Leaser(res, name, order, hold=True).start()
    assert holder.got.wait(WAIT), f"the lease of {name} was not had"
    return holder


def queued(res: Residency, name: str, order: list | None = None, place: int = 1) -> Leaser:
    """A lease of `name` on its own thread, once it waits for room at `place` in the queue."""
    waiter = Leaser(res, name, order).start()
    assert wait_for(lambda: len(res._queue) == place), f"the request for {name} is not queued"
    return waiter


# -- room: --models-max and LRU eviction

def test_models_max_1_replaces_the_resident_model(make):
    res, loader = make(models_max=1)
    a = use(res, "a")
    assert res.status("a") == LOADED and not a.closed
    b = use(res, "b")
    assert a.closed and not b.closed
    assert (res.status("a"), res.status("b")) == (UNLOADED, LOADED)
    use(res, "a")
    assert b.closed and res.status("b") == UNLOADED
    assert loader.calls == ["a", "b", "a"]
    assert loader.peak == 1, "two models were in memory together with --models-max 1"


def test_models_max_2_evicts_the_least_recently_used(make):
    res, loader = make(models_max=2)
    use(res, "a")
    use(res, "b")
    use(res, "a")                 # b is now the least recently used
    use(res, "c")
    assert [res.status(n) for n in "abc"] == [LOADED, UNLOADED, LOADED]
    use(res, "b")                 # a was used before c: a goes
    assert [res.status(n) for n in "abc"] == [UNLOADED, LOADED, LOADED]
    assert loader.calls == ["a", "b", "c", "b"]
    assert loader.peak == 2
    assert sorted(r.name for r in res.resident()) == ["b", "c"]


def test_models_max_0_has_no_limit(make):
    res, loader = make(models_max=0)
    for n in "abc":
        use(res, n)
    assert [res.status(n) for n in "abc"] == [LOADED] * 3
    assert loader.peak == 3


def test_unknown_model_is_refused(make):
    res, loader = make()
    with pytest.raises(Refusal) as e:
        use(res, "nope")
    assert e.value.status == 400 and "nope" in e.value.message
    assert loader.calls == []


# -- waiting for room

def test_request_waits_while_every_resident_model_is_held_fifo(make):
    res, loader = make(models_max=1)
    order: list[str] = []
    holder = held(res, "a", order)
    first = queued(res, "b", order)
    second = queued(res, "c", order, place=2)
    time.sleep(0.2)               # both keep waiting while a is held
    assert not first.got.is_set() and not second.got.is_set()
    assert loader.calls == ["a"] and res.status("a") == LOADED and not holder.ctx.closed
    holder.join()
    first.join()
    second.join()
    assert order == ["a", "b", "c"], "the queue was not served in arrival order"
    assert loader.calls == ["a", "b", "c"]
    assert holder.ctx.closed and first.ctx.closed and not second.ctx.closed
    assert loader.peak == 1


def test_two_waiters_for_one_idle_model_are_both_served(make):
    res, loader = make(models_max=1)
    use(res, "a")
    loader.delay = 0.05
    first, second = Leaser(res, "b").start(), Leaser(res, "c").start()
    first.join()
    second.join()
    assert first.ctx.name == "b" and second.ctx.name == "c"
    assert res.status("a") == UNLOADED and loader.peak == 1


def test_request_for_a_loaded_model_never_waits_for_room(make):
    res, loader = make(models_max=1)
    holder = held(res, "a")
    waiter = queued(res, "b")
    t = time.monotonic()
    again = Leaser(res, "a").start()          # a is loaded: served at once, queue or not
    assert again.got.wait(WAIT), "a request for a loaded model waited for room"
    again.join()
    assert time.monotonic() - t < 1.0
    assert again.ctx is holder.ctx and not waiter.got.is_set()
    holder.join()
    waiter.join()
    assert loader.calls == ["a", "b"]


def test_requests_for_a_loading_model_share_its_load(make):
    res, loader = make(models_max=1)
    loader.delay = 0.2
    leasers = [Leaser(res, "a").start() for _ in range(3)]
    for lz in leasers:
        lz.join()
    assert loader.calls == ["a"]
    assert len({id(lz.ctx) for lz in leasers}) == 1


# -- sleep and keep-alive

def test_sleeps_when_idle_and_wakes_on_the_next_lease(make):
    res, loader = make(sleep_idle=0.1)
    a = use(res, "a")
    assert wait_for(lambda: res.status("a") == SLEEPING), "a did not go to sleep"
    r = res.models["a"]
    assert a.closed and r.ctx is None
    assert r.cached == {"props": {"model": "a"}}       # what a sleeping model answers
    assert r.info == {"name": "a"}                     # /models' meta kept across the sleep
    assert res.peek("a") is None and [m.name for m in res.resident()] == ["a"]
    woke = use(res, "a")
    assert woke is not a and not woke.closed
    assert loader.calls == ["a", "a"] and r.n_loads == 2
    assert res.status("a") in (LOADED, SLEEPING)


def test_a_held_model_does_not_sleep(make):
    res, loader = make(sleep_idle=0.05)
    holder = held(res, "a")
    time.sleep(0.3)
    assert res.status("a") == LOADED and not holder.ctx.closed
    holder.join()
    assert wait_for(lambda: res.status("a") == SLEEPING)


def test_a_sleeping_model_is_dropped_to_make_room(make):
    res, loader = make(models_max=1, sleep_idle=0.05)
    use(res, "a")
    assert wait_for(lambda: res.status("a") == SLEEPING)
    use(res, "b")
    assert res.status("a") == UNLOADED and res.models["a"].cached == {}
    assert res.models["a"].info is None


def test_keep_alive_0_unloads_once_idle(make):
    res, loader = make()
    res.set_keep_alive("a", 0)
    holder = held(res, "a")
    time.sleep(0.1)
    assert res.status("a") == LOADED          # held: kept
    holder.join()
    assert wait_for(lambda: res.status("a") == UNLOADED), "keep_alive 0 did not unload a"
    assert holder.ctx.closed


def test_keep_alive_none_keeps_forever(make):
    res, loader = make()
    res.set_keep_alive("a", None)
    a = use(res, "a")
    time.sleep(0.5)
    assert res.status("a") == LOADED and not a.closed


def test_keep_alive_positive_expires(make):
    res, loader = make(sleep_idle=0.05)      # keep_alive wins over sleep: unloaded, not asleep
    res.set_keep_alive("a", 0.5)
    t = time.monotonic()
    a = use(res, "a")
    time.sleep(0.2)
    assert res.status("a") == LOADED
    assert wait_for(lambda: res.status("a") == UNLOADED), "keep_alive 0.5 did not expire"
    assert time.monotonic() - t >= 0.45
    assert a.closed and loader.calls == ["a"]


def test_keep_alive_unloads_a_sleeping_model(make):
    res, loader = make(sleep_idle=0.05)
    use(res, "a")
    assert wait_for(lambda: res.status("a") == SLEEPING)
    res.set_keep_alive("a", 0)
    assert wait_for(lambda: res.status("a") == UNLOADED, 1.0), "keep_alive 0 left the sleeping model resident"


# -- the file's identity

def test_changed_file_is_refused_then_reloaded(make, files):
    res, loader = make()
    a = use(res, "a")
    with open(files["a"], "ab") as f:
        f.write(b"!")                          # size and mtime change
    with pytest.raises(FileChanged) as e:
        use(res, "a")
    assert e.value.status == 500 and files["a"] in e.value.message
    assert res.status("a") == UNLOADED and a.closed
    again = use(res, "a")
    assert loader.calls == ["a", "a"] and again is not a and not again.closed


def touch(path: str) -> None:
    """The same bytes, a new mtime."""
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


def test_touched_file_is_refused(make, files):
    res, loader = make()
    use(res, "a")
    touch(files["a"])
    with pytest.raises(FileChanged):
        use(res, "a")
    use(res, "a")
    assert loader.loads("a") == 2


def test_replaced_file_is_refused(make, files, tmp_path):
    res, loader = make()
    use(res, "a")
    other = tmp_path / "other"
    other.write_bytes(open(files["a"], "rb").read())
    os.replace(other, files["a"])             # same bytes, another inode
    with pytest.raises(FileChanged):
        use(res, "a")
    assert res.status("a") == UNLOADED


def test_changed_file_does_not_close_a_held_context(make, files):
    res, loader = make()
    holder = held(res, "a")
    touch(files["a"])
    with pytest.raises(FileChanged):
        use(res, "a")
    assert not holder.ctx.closed, "the context a running request holds was closed under it"
    holder.join()
    assert wait_for(lambda: holder.ctx.closed), "the changed model was not dropped once its lease ended"
    use(res, "a")
    assert loader.loads("a") == 2


# -- failed loads

def test_failed_load_leaves_the_model_unloaded_and_others_served(make):
    res, loader = make(models_max=1)
    loader.fail.add("bad")
    use(res, "a")
    with pytest.raises(LoadFailed) as e:
        use(res, "bad")
    assert e.value.status == 500 and "cannot read" in e.value.message
    r = res.models["bad"]
    assert r.status == UNLOADED and r.ctx is None and "cannot read" in r.failure
    assert res.status("a") == UNLOADED          # dropped before bad was read (--models-max 1)
    b = use(res, "b")
    assert not b.closed and res.status("b") == LOADED
    with pytest.raises(LoadFailed):             # tried again on the next lease
        use(res, "bad")
    assert loader.loads("bad") == 2
    loader.fail.clear()
    use(res, "bad")
    assert r.failure is None and r.status == LOADED


def test_failed_background_load_lands_in_its_status(make):
    res, loader = make()
    loader.fail.add("bad")
    res.load("bad")
    assert wait_for(lambda: res.models["bad"].failure is not None)
    assert res.status("bad") == UNLOADED
    res.load("a")
    assert wait_for(lambda: res.status("a") == LOADED)


# -- unload

def test_unload_soon_waits_for_the_lease_holder(make):
    res, loader = make()
    holder = held(res, "a")
    res.unload_soon("a")
    time.sleep(0.2)
    assert res.status("a") == LOADED and not holder.ctx.closed, "unload_soon cut the running request short"
    holder.join()
    assert wait_for(lambda: res.status("a") == UNLOADED), "unload_soon did not unload a once it was released"
    assert holder.ctx.closed


def test_unload_now_and_background_load(make):
    res, loader = make(models_max=2)
    res.load("a")
    res.load("b")
    assert wait_for(lambda: res.status("a") == LOADED and res.status("b") == LOADED)
    res.unload("a")
    assert res.status("a") == UNLOADED and res.status("b") == LOADED
    assert len(loader.open) == 1


def test_close_during_a_load_closes_what_it_loaded(make):
    res, loader = make()
    loader.delay = 0.3
    loading = Leaser(res, "a").start()
    assert wait_for(lambda: loader.calls == ["a"])
    res.close()
    loading.thread.join(JOIN)
    assert not loading.thread.is_alive()
    assert isinstance(loading.error, Refusal)          # the lease is refused: the server is shutting down
    assert not loader.open, "the context loaded while the residency closed is still open"
    assert res.status("a") == UNLOADED


def test_close_refuses_waiters_and_closes_contexts(make):
    res, loader = make(models_max=1)
    holder = held(res, "a")
    waiter = queued(res, "b")
    res.close()
    waiter.thread.join(JOIN)
    assert not waiter.thread.is_alive()
    assert isinstance(waiter.error, Refusal)
    holder.go.set()
    holder.thread.join(JOIN)
    assert not loader.open
