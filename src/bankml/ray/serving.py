"""bankml-serve as a Ray Serve application: N replicas, each one bankml-serve app (bankml.server.app.build_app:
its engine, slots, host prompt cache, residency and keep-alive), behind one ingress that Ray's HTTP proxy calls.

    app = serving.application(["-m", model, "-c", "4096", "-np", "1", "-t", "1"], replicas=2)
    serve.run(app, name="bankml", route_prefix="/")       # every bankml-serve route, through Ray's proxy

- `Ingress` (one small replica, no model): Ray's proxy hands it the request; it reads the body, computes the
  request's affinity key (bankml.ray.affinity) and calls the replica deployment's handle with it
  (`handle.options(stream=True).serve_http.remote(scope, body, affinity=key)`); the handle's request router,
  bankml.ray.router.PrefixAffinityRouter (Ray Serve's RequestRouter extension point), picks the replica. The
  replica's ASGI messages come back as a stream and go to the client unchanged (status, headers, SSE events).
  Ray's proxy does not pass the body to a request router (the replica pulls it after routing), which is why the
  key is computed one hop in, where the body is known.
- `Replica`: the bankml-serve app, entered (its lifespan: the model loaded and verified, the worker started) in
  `reconfigure` from the deployment's user_config {"argv": [...], "epoch": n} (through a Serve config, serve
  deploy or a RayService, a new argv or epoch is a lightweight update: the engine is rebuilt in place, in the same
  process; `serve.run` from Python replaces the replicas instead); `serve_http` runs one request through the app;
  `check_health` is the app's GET /health (Ray's health check: a replica whose /health is not 200 is replaced);
  `record_routing_stats` tells the router which models the replica holds and its engine epoch.
- A replica that dies while it answers: the client gets a clear error (503 with llama-server's error body when
  nothing was sent yet; else, in a stream, a last `data: {"error": ...}` event, as llama-server ends a stream on an
  error), and Ray's router drops the replica, so the next request goes to another one (which recomputes the
  prefix).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from ray import serve
from ray.serve.config import RequestRouterConfig

from . import affinity

log = logging.getLogger("bankml.ray")

APP_NAME = "bankml"
ROUTER = "bankml.ray.router:PrefixAffinityRouter"
SCOPE_KEYS = ("type", "asgi", "http_version", "method", "scheme", "path", "raw_path", "query_string", "headers",
              "client", "server")
_DONE = object()
RETRIES = 2          # a request whose replica failed before it answered anything is sent again (to another one)


class Replica:
    """One bankml-serve app (see the module doc)."""

    def __init__(self):
        self._app = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._config: dict | None = None
        self._epoch = 0

    async def reconfigure(self, config: dict) -> None:
        if self._app is not None and config == self._config:
            return
        await self._close()
        from ..server.app import build_app
        app = build_app(list(config.get("argv", [])))
        stack = contextlib.AsyncExitStack()
        await stack.enter_async_context(app.router.lifespan_context(app))    # loads and verifies the model
        self._app, self._stack, self._config = app, stack, dict(config)
        self._epoch = config.get("epoch", 0)

    async def _close(self) -> None:
        stack, self._stack, self._app = self._stack, None, None
        if stack is not None:
            await stack.aclose()

    async def __del__(self):
        # Ray calls it once the replica drained (no request left, or graceful_shutdown_timeout_s passed)
        await self._close()

    async def serve_http(self, scope: dict, body: bytes, affinity=None):
        """One request through the app: yields lists of the ASGI messages it sends."""
        app = self._app
        if app is None:
            from ..server.http import error_body
            yield _json_answer(503, error_body("Loading model", 503))
            return
        queue: asyncio.Queue = asyncio.Queue()
        gone = asyncio.Event()
        first = True

        async def receive():
            nonlocal first
            if first:
                first = False
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message):
            await queue.put(message)

        async def run():
            try:
                await app(dict(scope), receive, send)
            finally:
                await queue.put(_DONE)

        task = asyncio.ensure_future(run())
        try:
            done = False
            while not done:
                batch = [await queue.get()]
                while not queue.empty():
                    batch.append(queue.get_nowait())
                if batch[-1] is _DONE:
                    batch.pop()
                    done = True
                if batch:
                    yield batch
        finally:
            if not task.done():
                gone.set()                 # the client left: the app sees its disconnect and stops the task

    async def check_health(self) -> None:
        if self._app is None:
            raise RuntimeError("the bankml engine is not loaded")
        status = None
        async for batch in self.serve_http({"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                                            "method": "GET", "scheme": "http", "path": "/health",
                                            "raw_path": b"/health", "query_string": b"", "headers": [],
                                            "client": ("127.0.0.1", 0), "server": ("127.0.0.1", 0)}, b""):
            for m in batch:
                if m["type"] == "http.response.start":
                    status = m["status"]
        if status != 200:
            raise RuntimeError(f"/health answered {status}")

    def record_routing_stats(self) -> dict:
        res = getattr(self._app.state, "residency", None) if self._app is not None else None
        models = []
        if res is not None:
            for r in res.resident():
                models += [r.name, *r.aliases]
        return {"models": models, "epoch": self._epoch}


def _json_answer(status: int, body: dict) -> list[dict]:
    raw = json.dumps(body, separators=(",", ":")).encode()
    return [{"type": "http.response.start", "status": status,
             "headers": [(b"content-type", b"application/json; charset=utf-8"),
                         (b"content-length", str(len(raw)).encode())]},
            {"type": "http.response.body", "body": raw, "more_body": False}]


def _died(status_sent: bool, content_type: bytes, path: str, error: BaseException) -> list[dict]:
    """What the client gets when its replica stopped answering (see the module doc)."""
    message = f"the bankml replica serving this request stopped ({type(error).__name__}); send the request again"
    err = {"code": 503, "message": message, "type": "unavailable_error"}
    if not status_sent:
        return _json_answer(503, {"error": err})
    if content_type.startswith(b"text/event-stream"):
        if path == "/v1/messages":
            chunk = b"event: error\ndata: " + json.dumps(err, separators=(",", ":")).encode() + b"\n\n"
        else:
            chunk = b"data: " + json.dumps({"error": err}, separators=(",", ":")).encode() + b"\n\n"
    elif content_type.startswith(b"application/x-ndjson"):
        chunk = json.dumps({"error": message}, separators=(",", ":")).encode() + b"\n"   # Ollama's stream error
    else:
        chunk = b""
    return [{"type": "http.response.body", "body": chunk, "more_body": False}]


class Ingress:
    """Ray's HTTP proxy calls this ASGI app (serve.ingress, late-bound); see the module doc."""

    def __init__(self, replicas):
        self.replicas = replicas

    async def reconfigure(self, config: dict) -> None:
        from .router import forget_all
        forget_all()              # the replicas' engines are rebuilt with the same config: their caches are empty

    def __serve_build_asgi_app__(self):
        return _ASGI(self)

    async def asgi(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        from ..server.routing import _buffer
        body, _ = await _buffer(receive)
        light = {k: scope[k] for k in SCOPE_KEYS if k in scope}
        light["root_path"] = ""
        light["headers"] = [(bytes(k), bytes(v)) for k, v in scope.get("headers", [])]
        key = affinity.of(scope["method"], scope["path"], body)
        started, ended, ctype = False, False, b""
        for attempt in range(RETRIES + 1):
            received = False
            stream = self.replicas.options(stream=True).serve_http.remote(light, body, affinity=key)
            try:
                async for batch in stream:
                    received = True
                    for message in batch:
                        if message["type"] == "http.response.start":
                            started = True
                            ctype = next((v for k, v in message.get("headers", [])
                                          if k.lower() == b"content-type"), b"")
                        elif message["type"] == "http.response.body" and not message.get("more_body", False):
                            ended = True
                        await send(message)
                return
            except asyncio.CancelledError:
                stream.cancel()
                raise
            except Exception as e:      # the replica died or became unreachable (RayActorError, ...)
                log.warning("replica failed while answering %s %s: %r", scope["method"], scope["path"], e)
                if not received and attempt < RETRIES:
                    continue            # nothing reached the client: Ray's router dropped the replica, try another
                if not ended:
                    for message in _died(started, ctype, scope["path"], e):
                        await send(message)
                return


class _ASGI:
    """The ingress's ASGI callable (an object with an async __call__: what uvicorn's lifespan takes as ASGI 3)."""

    def __init__(self, ingress: Ingress):
        self.ingress = ingress

    async def __call__(self, scope, receive, send):
        await self.ingress.asgi(scope, receive, send)


def application(argv: list[str], replicas: int = 1, replica_cpus: int = 1, epoch: int = 0,
                max_ongoing_requests: int | None = None, health_check_period_s: float = 10.0):
    """The Ray Serve application: `replicas` bankml-serve replicas with bankml-serve's flags `argv` (no --host /
    --port: Ray's proxy listens), and the ingress. replica_cpus: the CPUs a replica reserves, and its compute
    threads (OMP_NUM_THREADS); bankml's -t stays what it is for one server, the -t of the llama-server whose bits
    are reproduced."""
    from ..server.flags import parse_flags
    cfg = parse_flags(list(argv))            # refused here, not on every replica
    n_slots = cfg.n_parallel if cfg.n_parallel > 0 else 4
    config = {"argv": list(argv), "epoch": epoch}
    replica = serve.deployment(
        Replica, name="BankmlReplica", num_replicas=replicas,
        ray_actor_options={"num_cpus": replica_cpus,
                           "runtime_env": {"env_vars": {"OMP_NUM_THREADS": str(max(1, int(replica_cpus)))}}},
        max_ongoing_requests=max_ongoing_requests or 2 * n_slots,
        health_check_period_s=health_check_period_s, health_check_timeout_s=30,
        graceful_shutdown_wait_loop_s=2, graceful_shutdown_timeout_s=60,
        request_router_config=RequestRouterConfig(request_router_class=ROUTER, request_routing_stats_period_s=2,
                                                  request_routing_stats_timeout_s=10),
        user_config=config)
    ingress = serve.deployment(serve.ingress()(Ingress), name="BankmlIngress", num_replicas=1,
                               ray_actor_options={"num_cpus": 0}, max_ongoing_requests=1000, user_config=config)
    return ingress.bind(replica.bind())


def app_builder(args: dict):
    """`serve run bankml.ray.serving:app_builder flags="-m model.gguf -np 1 -t 1" replicas=2` (or a Serve config
    file's `import_path` with these args)."""
    import shlex
    return application(shlex.split(args.get("flags", "")), replicas=int(args.get("replicas", 1)),
                       replica_cpus=int(args.get("replica_cpus", 1)))
