"""Which models are in memory, and for how long: llama-server's router (`--models-max`, load, unload, LRU
eviction, a FIFO queue for a request whose model must wait for room), its sleep (`--sleep-idle-seconds`) and
the keep-alive the Ollama API asks for, over bankml's own contexts (bankml.server.context.ServerContext) in
this process rather than child servers.

    res = Residency(cfg, models={"a": "/m/a.gguf", "b": "/m/b.gguf"}, default="a")
    with res.lease("b") as ctx:        # loads b (verified; a is dropped first when --models-max is 1)
        ...                            # ctx: the ServerContext serving b, held until the block ends
    res.load("a"); res.unload("b")     # llama-server's POST /models/load, /models/unload (loads in the background)
    res.status("a")                    # "unloaded", "loading", "loaded" or "sleeping"

Rules:
- A model is loaded by a lease (the router's autoload, and every request in single-model mode) or by load().
  Every load verifies the file (the guard, then the sha256 pin; bankml.models.verify), after the models it
  replaces are dropped: two models are never read into memory together beyond --models-max.
- Room: with --models-max N (0: no limit) and N models resident, the least recently used one that no request
  holds is dropped (a sleeping model counts as resident and may be dropped). When every resident model is held,
  the request waits in a FIFO queue; a request for a model that is loaded, or loading, never waits for room.
- Reuse: a lease of a loaded model compares the file's identity (device, inode, size, mtime) with the one the
  load verified; a changed file is dropped and the request refused (`FileChanged`); the next load verifies again.
- Idle: a model no request holds for `sleep_idle` seconds goes to sleep (its context is closed: weights
  unmapped, KV caches, slots and host prompt cache freed) and wakes, verified again, on the next lease that needs
  it; its /props and /models answers and its /metrics counters are kept across the sleep, as llama-server keeps
  them. A per-model `keep_alive` (seconds; None: forever; 0: at once) unloads instead (Ollama's keep-alive).
- A load that fails leaves the model unloaded with the reason (`failure`), and the server serving the others.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from ..errors import ModelFileChanged
from .http import Refusal

log = logging.getLogger("bankml.server")

UNLOADED, LOADING, LOADED, SLEEPING = "unloaded", "loading", "loaded", "sleeping"


def _fits_in_memory(path: str) -> bool:
    """Whether /proc/meminfo's MemAvailable holds 1.5 times the file (True when either cannot be read)."""
    try:
        need = os.path.getsize(path) * 3 // 2
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024 >= need
    except (OSError, ValueError):
        pass
    return True


def file_identity(path: str) -> tuple:
    """(device, inode, size, mtime in ns) of a file: what a reuse compares instead of rehashing."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class FileChanged(Refusal):
    """A resident model's file changed since its load verified it."""

    def __init__(self, name: str, path: str):
        super().__init__(500, f"the file of model '{name}' ({path}) changed after it was verified; it is not "
                              "served, and its next load verifies it again", "server_error")


class Cancelled(Refusal):
    """A request whose client left while it waited for its model."""

    def __init__(self):
        super().__init__(503, "the client left while its model was waited for", "unavailable_error")


class LoadFailed(Refusal):
    """A model that could not be loaded (its reason: the guard's, the pin's, or the file's)."""

    def __init__(self, name: str, reason: str):
        super().__init__(500, f"model '{name}' cannot be loaded: {reason}", "server_error")
        self.reason = reason


@dataclass
class Resident:
    """One model the server may serve, and what it holds of it now."""
    name: str
    path: str
    aliases: tuple = ()
    status: str = UNLOADED
    ctx: object = None                    # the ServerContext while LOADED
    users: int = 0                        # leases held
    last_used: float = 0.0                # time.monotonic() of its load or its last use (LRU order)
    idle_since: float = 0.0               # time.monotonic() of its load or the end of its last lease (sleep)
    info: dict | None = None              # /v1/models' "meta" of the loaded model (kept while it sleeps)
    port: int = 0                         # the port it is served on, once loaded (/models' status.args)
    identity: tuple | None = None         # file_identity() the last load verified
    keep_alive: float | None = None       # seconds idle before it is unloaded (None: never)
    failure: str | None = None            # why the last load failed
    cached: dict = field(default_factory=dict)   # "props", "models", "metrics": what a sleeping model answers
    metrics: object = None                # its /metrics counters, carried across sleep
    n_loads: int = 0                      # loads (and wakes) so far
    owned: bool = True                    # close() closes its context (False: a context lent by its owner)
    stale: bool = False                   # its file changed since its load: no new lease, dropped when idle
    pending: bool = False                 # load() asked for it; its thread has not started loading yet

    @property
    def running(self) -> bool:
        """llama-server's is_running: loading, loaded or sleeping."""
        return self.status in (LOADING, LOADED, SLEEPING)


class Residency:
    """The models a server serves and the ones in memory (see the module doc).

    cfg: the ServerConfig every context is made with; models: name -> path (or (path, aliases)), in listing
    order; default: the model of a request that names none (single-model mode); models_max: --models-max;
    sleep_idle: --sleep-idle-seconds (None or < 0: never); loader(cfg, path, name): makes a started context
    (bankml.server.app gives ServerContext.load's; this module knows contexts only by what it calls on them:
    close(), snapshot(), model_info(), adopt_metrics(), path, slots)."""

    def __init__(self, cfg, models: dict, default: str | None = None, *, loader, models_max: int = 1,
                 sleep_idle: float | None = None, tick: float = 0.1, fake_timing: bool = False):
        self.cfg = cfg
        self.models: dict[str, Resident] = {}
        for name, spec in models.items():
            path, aliases = (spec, ()) if isinstance(spec, (str, os.PathLike)) else spec
            self.models[name] = Resident(name, os.fspath(path), tuple(aliases))
        self.default = default
        self.models_max = models_max
        self.sleep_idle = sleep_idle if sleep_idle is not None and sleep_idle >= 0 else None
        self._loader = loader
        self._cond = threading.Condition()
        self._queue: deque = deque()          # tickets waiting for room, in arrival order
        self._closed = False
        self._tick = tick
        #: llama-server's LLAMA_SERVER_DEBUG_FAKE_TIMING (router mode): 2 s more on every load and every routed
        #: request (bankml.server.routing sleeps those), so that its tests can hold a model busy
        self.fake_timing = fake_timing
        self._reaper = threading.Thread(target=self._reap, name="bankml-residency", daemon=True)
        self._reaper.start()

    # -- names
    def resolve(self, name: str | None) -> Resident | None:
        """The model a request names (its name or an alias); None: the default."""
        if name is None or name == "":
            return self.models.get(self.default) if self.default is not None else None
        r = self.models.get(name)
        if r is not None:
            return r
        for r in self.models.values():
            if name in r.aliases:
                return r
        return None

    def add(self, name: str, path: str, aliases=()) -> Resident:
        """Another model this server may serve (a registry entry found after start-up)."""
        with self._cond:
            r = self.models.get(name)
            if r is None:
                r = self.models[name] = Resident(name, os.fspath(path), tuple(aliases))
            return r

    def adopt(self, name: str, ctx, aliases=(), owned: bool = True) -> Resident:
        """Take a context loaded (and verified) before the server started as model `name`, loaded; `owned`:
        the residency closes it (else its owner does, and close() leaves it open)."""
        with self._cond:
            r = self.models.get(name) or Resident(name, ctx.path, tuple(aliases))
            r.owned = owned
            self.models[name] = r
            r.ctx, r.status, r.identity = ctx, LOADED, file_identity(ctx.path)
            r.last_used = r.idle_since = time.monotonic()
            r.info = ctx.model_info()["meta"]
            r.n_loads += 1
            return r

    def status(self, name: str) -> str:
        r = self.resolve(name)
        return r.status if r is not None else UNLOADED

    def resident(self) -> list[Resident]:
        with self._cond:
            return [r for r in self.models.values() if r.running]

    # -- leases
    @contextlib.contextmanager
    def lease(self, name: str | None = None):
        """Hold a model for one request: load (or wake) it when needed, and yield its ServerContext."""
        r = self.resolve(name)
        if r is None:
            raise Refusal(400, f"model '{name}' not found", "invalid_request_error")
        ctx = self.acquire(r)
        try:
            yield ctx
        finally:
            self.release(r)

    def acquire(self, r: Resident, touch: bool = True, cancelled: threading.Event | None = None):
        """Take a lease on r (blocking while it loads or waits for room); returns its ServerContext. touch: the
        lease counts as a use in the LRU order (llama-server's router counts POST requests only); cancelled: set
        when the client has gone, which takes the request out of the queue (raises Cancelled) before it costs
        another model its place."""
        with self._cond:
            while True:
                if self._closed:
                    raise Refusal(503, "the server is shutting down", "unavailable_error")
                if cancelled is not None and cancelled.is_set():
                    raise Cancelled()
                if r.status == LOADED:
                    if r.stale or not self._same_file(r):
                        # never served again; dropped once the requests that hold it are done
                        r.stale = True
                        if r.users == 0:
                            self._drop(r, UNLOADED)
                            self._cond.notify_all()
                        raise FileChanged(r.name, r.path)
                    r.users += 1
                    if touch:
                        r.last_used = time.monotonic()
                    return r.ctx
                if r.status == LOADING:
                    self._cond.wait(self._tick)
                    continue
                # unloaded or sleeping: this request loads it
                failure = self._load_locked(r, cancelled)
                if failure is not None:
                    raise LoadFailed(r.name, failure)

    def try_acquire(self, r: Resident, touch: bool = True):
        """acquire() for a loaded model whose file is unchanged, when the lock is free at once; None otherwise
        (then acquire() decides, on a thread)."""
        if not self._cond.acquire(blocking=False):
            return None
        try:
            if r.status != LOADED or r.stale or self._closed or not self._same_file(r):
                return None
            r.users += 1
            if touch:
                r.last_used = time.monotonic()
            return r.ctx
        finally:
            self._cond.release()

    def release(self, r: Resident) -> None:
        with self._cond:
            r.users -= 1
            r.idle_since = time.monotonic()
            if r.stale and r.users == 0 and r.status == LOADED:
                self._drop(r, UNLOADED)
            self._cond.notify_all()

    def peek(self, name: str | None = None):
        """The loaded ServerContext of a model, without taking a lease or waking it (None when not loaded)."""
        r = self.resolve(name)
        return r.ctx if r is not None and r.status == LOADED else None

    # -- llama-server's /models/load and /models/unload
    def load(self, name: str, wait: bool = False) -> None:
        """Start loading a model in the background (or wait for it); failures land in its status."""
        r = self.resolve(name)
        if r is None:
            raise KeyError(name)

        if wait:
            with self._cond:
                if r.status in (UNLOADED, SLEEPING):
                    self._load_locked(r)
        else:
            with self._cond:
                if r.status != UNLOADED:
                    return
                if not self._make_room(r):
                    raise Refusal(500, "model limit reached, try again later", "server_error")
                r.status = LOADING              # seen at once by /models, as the router marks it
                r.failure = None
                r.port = self.cfg.port or 1
                r.pending = True
            threading.Thread(target=self._background_load, args=(r,), name="bankml-load", daemon=True).start()

    def _background_load(self, r: Resident) -> None:
        with self._cond:
            if r.pending:
                r.pending = False
                r.status = UNLOADED
                self._load_locked(r)

    def unload(self, name: str) -> None:
        """Drop a model once its requests are done (a model still loading is dropped when its load ends, and
        counts as a failed load, as a llama-server child stopped while it loads does)."""
        r = self.resolve(name)
        if r is None:
            raise KeyError(name)
        with self._cond:
            was_loading = r.status == LOADING
            while r.status == LOADING or (r.status == LOADED and r.users):
                self._cond.wait()
            if r.running:
                self._drop(r, UNLOADED)
                if was_loading:
                    r.failure = "unloaded while it was loading"
            self._cond.notify_all()

    def unload_soon(self, name: str) -> None:
        """llama-server's /models/unload: answered at once, unload() in the background."""
        if self.resolve(name) is None:
            raise KeyError(name)
        threading.Thread(target=self.unload, args=(name,), name="bankml-unload", daemon=True).start()

    def set_keep_alive(self, name: str | None, seconds: float | None) -> None:
        """Ollama's keep_alive for a model: unloaded after `seconds` idle (None: never; 0: once idle)."""
        r = self.resolve(name)
        if r is not None:
            with self._cond:
                r.keep_alive = seconds
                self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            for r in self.models.values():
                if r.ctx is not None and r.owned:
                    self._drop(r, UNLOADED)
            self._cond.notify_all()
        self._reaper.join(timeout=5)

    # -- inside the lock
    def _load_locked(self, r: Resident, cancelled: threading.Event | None = None) -> str | None:
        """Make room, then load r (the lock is released while the file is verified and read). Returns the
        failure's reason, or None; raises Cancelled when `cancelled` is set while it waits."""
        ticket = object()
        self._queue.append(ticket)
        try:
            while True:
                if self._closed:
                    return "the server is shutting down"
                if cancelled is not None and cancelled.is_set():
                    raise Cancelled()
                if r.status == LOADED:
                    return None
                if r.status == LOADING:       # another request got there first: wait for its load
                    self._cond.wait(self._tick)
                    continue
                if self._queue[0] is ticket and self._make_room(r):
                    break
                self._cond.wait(self._tick)
        finally:
            self._queue.remove(ticket)
            self._cond.notify_all()
        waking = r.status == SLEEPING
        r.status = LOADING
        r.failure = None
        r.port = self.cfg.port or 1           # where it is served: this server (llama-server: the child's port)
        self._cond.release()
        try:
            if self.fake_timing:
                time.sleep(2)
            try:
                identity = file_identity(r.path)
                ctx = self._loader(self.cfg, r.path, r.name)
                if file_identity(r.path) != identity:
                    ctx.close()
                    raise OSError(f"{r.path} changed while it was loaded")
                if r.metrics is not None and getattr(ctx, "slots", None) is not None:
                    ctx.adopt_metrics(r.metrics)
                error = None
            except Refusal as e:
                error = e.message
            except Exception as e:        # the guard's and the pin's refusals, an unreadable file
                error = str(e) or type(e).__name__
        finally:
            self._cond.acquire()
        if error is None and self._closed:       # close() ran meanwhile: what was loaded goes too
            ctx.close()
            error = "the server is shutting down"
        if error is not None:
            log.warning("model %s not loaded: %s", r.name, error)
            r.status, r.ctx, r.failure = UNLOADED, None, error
            if waking:
                r.cached.clear()
            self._cond.notify_all()
            return error
        r.ctx, r.identity, r.status, r.stale = ctx, identity, LOADED, False
        r.last_used = r.idle_since = time.monotonic()
        r.info = ctx.model_info()["meta"]
        r.n_loads += 1
        r.cached.clear()
        log.info("model %s %s (%s)", r.name, "woke" if waking else "loaded", r.path)
        self._cond.notify_all()
        return None

    def _make_room(self, r: Resident) -> bool:
        """Drop least recently used idle models until r fits, in number (--models-max) and in memory (MemAvailable
        must hold about 1.5 times its file: the weights' pages and their regrouped copies); False when every
        resident model that would have to go is held."""
        while True:
            others = [m for m in self.models.values() if m is not r and m.running]
            fits = (self.models_max <= 0 or len(others) < self.models_max) and (
                not others or _fits_in_memory(r.path))
            if fits:
                return True
            idle = [m for m in others if m.users == 0 and m.status in (LOADED, SLEEPING)]
            if not idle:
                return False
            victim = min(idle, key=lambda m: m.last_used)
            log.info("model %s unloaded to make room for %s", victim.name, r.name)
            self._drop(victim, UNLOADED)

    def _drop(self, r: Resident, status: str) -> None:
        ctx, r.ctx = r.ctx, None
        if ctx is not None:
            if status == SLEEPING:
                r.cached.update(ctx.snapshot())
            r.metrics = getattr(getattr(ctx, "slots", None), "metrics", None) if status == SLEEPING else None
            if r.metrics is not None:
                r.metrics.pool = None         # it must not keep the old slots (and so the weights) alive
            ctx.close()
            del ctx
            gc.collect()                      # the slots, caches and weights form cycles: free them now
        if status == UNLOADED:
            r.cached.clear()
            r.metrics = None
            r.info = None
        r.status = status
        r.identity = None if status == UNLOADED else r.identity

    def _same_file(self, r: Resident) -> bool:
        """The file's identity is the one the load verified, and no read of its map has faulted since."""
        model = getattr(r.ctx, "model", None)
        try:
            if model is not None:
                model.check_file()
            return file_identity(r.path) == r.identity
        except (OSError, ModelFileChanged):
            return False

    def _reap(self) -> None:
        """Sleep or unload idle models as their time comes."""
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                for r in self.models.values():
                    if r.status not in (LOADED, SLEEPING) or r.users:
                        continue
                    idle = now - r.idle_since
                    if r.keep_alive is not None and idle >= r.keep_alive:
                        log.info("model %s unloaded: its keep-alive expired", r.name)
                        self._drop(r, UNLOADED)
                        self._cond.notify_all()
                    elif (r.status == LOADED and r.keep_alive is None and self.sleep_idle is not None
                          and idle >= self.sleep_idle):
                        log.info("model %s is sleeping", r.name)
                        self._drop(r, SLEEPING)
                        self._cond.notify_all()
                self._cond.wait(self._tick)

