"""Which model a request is for, and the lease that holds it while the request runs (llama-server's
create_response / wait_until_no_sleep in single-model mode, and its router's proxy_get / proxy_post with
router_validate_model).

    app.add_middleware(ModelScope, residency=res, router=False)
    ctx = context_of(request)          # in a route: the ServerContext the request was given (None: asleep)

Single-model mode: every request is for the one model. GET /health, /props, /models (/v1/...) and /metrics
answer without waking a sleeping model (they read what it cached before sleeping); every other known route wakes
it first. Router mode (`--models-dir` without -m): the router's own routes (/health, /props without ?model=,
/models, /models/load, /models/unload) answer for the whole server; every other route is for the model named by
its JSON body's `model` (POST) or its `?model=` (GET), loaded on the way unless autoload is off (the server's
`--no-models-autoload`, or `?autoload=`). A path no route knows is llama-server's 404 and never loads anything.
"""

from __future__ import annotations

import logging
import threading

import anyio
from starlette.routing import Match

from ..cxx import nljson
from .http import Refusal, dumps
from .residency import LOADED, SLEEPING, Cancelled, LoadFailed

log = logging.getLogger("bankml.server")

#: the routes that never wake a sleeping model (server-context.cpp: create_response(true))
BYPASS_SLEEP = frozenset({("GET", "/health"), ("GET", "/v1/health"), ("GET", "/props"), ("GET", "/models"),
                          ("GET", "/v1/models"), ("GET", "/metrics")})
HEALTH = frozenset({("GET", "/health"), ("GET", "/v1/health")})       # never a model's: always answered
#: the router's own routes (server.cpp, router mode)
ROUTER_OWN = frozenset({("GET", "/health"), ("GET", "/v1/health"), ("GET", "/models"), ("GET", "/v1/models"),
                        ("POST", "/models"), ("DELETE", "/models"), ("POST", "/models/load"),
                        ("POST", "/models/unload"), ("GET", "/models/sse"),
                        # registered by server.cpp itself in either mode, not proxied to a model (the MCP servers
                        # and built-in tools are the router's own)
                        ("GET", "/tools"), ("POST", "/tools")})


def is_ollama(path: str) -> bool:
    """Ollama's routes (bankml.server.api.ollama, ollama_models): they name their model in Ollama's way and take
    its lease themselves, so this middleware passes them through untouched."""
    return path == "/" or path.startswith("/api/")


def context_of(request):
    """The ServerContext this request runs on (None: its model sleeps and the route does not wake it)."""
    if "bankml.resident" in request.scope:
        return request.scope.get("bankml.ctx")
    return getattr(request.app.state, "ctx", None)


def tokenizer_of(request):
    """The tokenizer of this request's model (a bare app of tokenize routes sets app.state.tokenizer)."""
    ctx = context_of(request) if "bankml.resident" in request.scope else None
    return ctx.tokenizer if ctx is not None else request.app.state.tokenizer


def templates_of(request):
    """The chat templates of this request's model (or app.state.template on a bare app of template routes)."""
    ctx = context_of(request) if "bankml.resident" in request.scope else None
    return ctx.templates if ctx is not None else request.app.state.template


def chat_options_of(request):
    ctx = context_of(request) if "bankml.resident" in request.scope else None
    return ctx.chat_options if ctx is not None else getattr(request.app.state, "chat_options", None)


def resident_of(request):
    """The residency entry of this request's model (bankml.server.residency.Resident), or None."""
    return request.scope.get("bankml.resident")


def _query(scope) -> dict[str, str]:
    from urllib.parse import parse_qsl
    return dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True))


class ModelScope:
    """ASGI middleware: pick the request's model, lease it for the whole answer (a stream included)."""

    def __init__(self, app, residency, router: bool = False, autoload: bool = True):
        self.app = app
        self._residency = residency           # the Residency, or a function returning it (the app's lifespan
        self.router = router                  # makes it)
        self.autoload = autoload
        self._routes = None

    @property
    def residency(self):
        return self._residency() if callable(self._residency) else self._residency

    def _known(self, scope) -> bool:
        if self._routes is None:
            self._routes = scope["app"].router.routes
        return any(route.matches(scope)[0] == Match.FULL for route in self._routes)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        key = (scope["method"], scope["path"])
        state = scope["app"].state
        if is_ollama(scope["path"]) or key in getattr(state, "unleased", ()):
            await self.app(scope, receive, send)
            return
        key = getattr(state, "route_aliases", {}).get(key, key)
        if not self.router:
            r = self.residency.resolve(None)
            if key in HEALTH or (key in BYPASS_SLEEP and r.status in (LOADED, SLEEPING)) or (
                    r.status != LOADED and not self._known(scope)):
                await self._run(scope, receive, send, r, None)   # answered asleep, or a 404 that wakes nothing
                return
            await self._leased(scope, receive, send, r)
            return
        q = _query(scope)
        if key in ROUTER_OWN or (key == ("GET", "/props") and not q.get("model")) or not self._known(scope):
            await self._run(scope, receive, send, None, None)
            return
        if scope["method"] == "GET":
            name = q.get("model", "")
        else:
            body, receive = await _buffer(receive)
            try:
                parsed = await anyio.to_thread.run_sync(nljson.loads, body)     # off the event loop
            except nljson.JSONParseError as e:
                await _answer(send, Refusal(500, str(e), "server_error"))
                return
            name = parsed.get("model", "") if isinstance(parsed, dict) else ""
            if not isinstance(name, str):
                await _answer(send, Refusal(500, str(nljson.type_must_be("string", name)), "server_error"))
                return
        auto = self.autoload
        if "autoload" in q:
            auto = q["autoload"] in ("true", "1")
        if not name and self.residency.default is not None:
            name = self.residency.default      # bankml's -m beside --models-dir
        if not name:
            await _answer(send, Refusal(400, "model name is missing from the request", "invalid_request_error"))
            return
        r = self.residency.resolve(name)
        if r is None:
            await _answer(send, Refusal(400, f"model '{name}' not found", "invalid_request_error"))
            return
        if not auto and not r.running:
            await _answer(send, Refusal(400, "model is not loaded", "invalid_request_error"))
            return
        if key in BYPASS_SLEEP and r.status in (LOADED, SLEEPING):
            await self._run(scope, receive, _routed(send), r, None)   # a sleeping model answers these asleep
            return
        await self._leased(scope, receive, send, r, touch=scope["method"] == "POST", routed=True)

    async def _leased(self, scope, receive, send, r, touch: bool = True, routed: bool = False) -> None:
        if r.status != LOADED:
            # it may wait (a load, a queue for room): a client that leaves meanwhile gives its place up
            body, receive = await _buffer(receive)
            ctx = await self._wait(r, touch, receive_more=receive.original, send=send, routed=routed)
            if ctx is None:
                return
        else:
            # a loaded model: no thread hop unless the residency is busy (a load or a drop holds its lock)
            ctx = self.residency.try_acquire(r, touch)
            if ctx is None:
                ctx = await self._wait(r, touch, None, send, routed)
                if ctx is None:
                    return
        try:
            if routed and self.residency.fake_timing:
                await anyio.sleep(2)           # held (busy) meanwhile, as llama-server's router sleeps
            await self._run(scope, receive, _routed(send) if routed else send, r, ctx)
        finally:
            self.residency.release(r)

    async def _wait(self, r, touch, receive_more, send, routed):
        """acquire() on a thread; while it runs, the client's disconnect (read from `receive_more`) cancels it.
        Returns the context, or None once the refusal is sent."""
        cancelled = threading.Event()

        async def watch():
            while True:
                message = await receive_more()
                if message["type"] == "http.disconnect":
                    cancelled.set()
                    return
        box = {}

        async def take():
            try:
                box["ctx"] = await anyio.to_thread.run_sync(self.residency.acquire, r, touch, cancelled)
            except Refusal as e:
                box["error"] = e
        if receive_more is None:
            await take()
        else:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch)
                await take()
                tg.cancel_scope.cancel()
        try:
            if "error" in box:
                raise box["error"]
            return box["ctx"]
        except Cancelled:
            return None
        except LoadFailed as e:
            log.warning("model %s: %s", r.name, e.reason)
            await _answer(send, Refusal(500, f"model name={r.name} failed to load", "server_error")
                          if routed else e)
            return None
        except Refusal as e:
            await _answer(send, e)
            return None

    async def _run(self, scope, receive, send, r, ctx) -> None:
        scope["bankml.resident"] = r
        scope["bankml.ctx"] = ctx if ctx is not None else (self.residency.peek(r.name) if r is not None else None)
        await self.app(scope, receive, send)


def _routed(send):
    """A routed answer's headers as llama-server's router passes a child's on: X-Accel-Buffering: no on all."""
    async def wrapped(message):
        if message["type"] == "http.response.start":
            hs = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-accel-buffering"]
            message = dict(message, headers=hs + [(b"x-accel-buffering", b"no")])
        await send(message)
    return wrapped


async def _buffer(receive):
    """Read a request's whole body; returns it and a receive() that hands it to the app again."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    replay = replay_body(body, receive)
    replay.original = getattr(receive, "original", receive)
    return body, replay


def replay_body(body: bytes, after):
    """A receive() that gives `body` whole, then whatever `after()` gives (the client's own receive: its
    disconnect)."""
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await after()
    return replay


async def _answer(send, refusal: Refusal) -> None:
    body = dumps(refusal.json())
    await send({"type": "http.response.start", "status": refusal.status,
                "headers": [(b"content-type", b"application/json; charset=utf-8"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
