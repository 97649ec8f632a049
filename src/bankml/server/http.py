"""llama-server's HTTP surface that every route shares (tools/server/server-http.cpp, server-common.cpp).

- `json_response(obj, status)`: the body as llama-server writes it: compact, keys in insertion order
  (nlohmann::ordered_json), raw UTF-8, invalid UTF-8 replaced by U+FFFD (`safe_json_to_str` / dump_safe), doubles in
  nlohmann's shortest round-trip form (bankml.cxx.nljson.dump); `Content-Type: application/json; charset=utf-8`.
- `Refusal(status, message, type, **extra)`: every answer that refuses a request (bankml.server's one exception
  for it: the request step raises it, the worker's Error event carries it, bankml.EngineError is one), and
  `Refusal.json()`, the one place it becomes llama-server's `format_error_response` body
  ({"error": {"code", "message", "type", ...extra}}; the type defaults by status as llama-server's error types do).
  `error_body` / `error_response(message, status, type)` build one on the spot; the router's own errors
  (`router_error`: key order message, type, code: 404 File Not Found, 401, 503) keep their own order.
- `LlamaHTTP`: the ASGI middleware of cpp-httplib + llama-server's pre-routing handler: `Server: llama.cpp`,
  CORS (`--cors-origins` / credentials / methods / headers; OPTIONS answered at once), the model-loading 503, the
  API key check (public paths /health and /v1/health), then the payload limit: 413 (empty body) for a body past
  100 MiB on a known route (an unknown one answers its 404 without reading), refused from its `Content-Length`
  before a byte of it is read, or, without one (chunked), counted as it streams and cut at the limit;
  `Connection: close` on status >= 400 and `Keep-Alive: timeout=5, max=100` otherwise, `Accept-Ranges: bytes` on
  HEAD.
- `off_loop(fn, *args)`: run a step that parses, converts or serializes a request's data on a worker thread,
  so the event loop keeps answering other clients (/health) meanwhile (docs/server.md, "Responsiveness").
"""

from __future__ import annotations

import gc
import threading
from urllib.parse import urlsplit

import anyio
import numpy as np
from starlette.responses import Response
from starlette.routing import Match

from ..cxx import _dtoa, nljson
from ..errors import BankmlError

#: cpp-httplib's CPPHTTPLIB_PAYLOAD_MAX_LENGTH as llama-server builds it
PAYLOAD_MAX = 100 * 1024 * 1024

ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 500: "server_error", 501: "not_supported_error",
               503: "unavailable_error"}

PUBLIC_PATHS = frozenset({"/health", "/v1/health"})

JSON_TYPE = "application/json; charset=utf-8"


def safe_text(s: str) -> str:
    """dump_safe on one string: bytes that are not UTF-8 (kept as surrogates) become U+FFFD."""
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape" if _escapable(s) else "surrogatepass").decode("utf-8", "replace")


def _escapable(s: str) -> bool:
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in s)


#: the size (characters) of the pieces a body's JSON text is built, joined and encoded in
PIECE = 1 << 16


def _pieces(v, out: list) -> None:
    """nljson.dump(v) (compact) as a run of pieces of at most about PIECE characters each: containers member by
    member, long strings slice by slice (its escapes are per character), so that no single join, concatenation
    or encode of a large answer holds the GIL for long (docs/server.md, Responsiveness)."""
    if isinstance(v, dict) and v:
        sep = "{"
        for k, x in v.items():
            out.append(sep + nljson.dump(k) + ":")
            _pieces(x, out)
            sep = ","
        out.append("}")
    elif isinstance(v, (list, tuple)) and v:
        sep = "["
        for x in v:
            out.append(sep)
            _pieces(x, out)
            sep = ","
        out.append("]")
    elif isinstance(v, np.ndarray):
        # a vector of floats (an embedding): each as nlohmann writes a double, in compiled code
        out.append(_dtoa.array_text(v))
    elif isinstance(v, str) and len(v) > PIECE:
        out.append('"')
        for a in range(0, len(v), PIECE):
            out.append(nljson.dump(v[a:a + PIECE])[1:-1])
        out.append('"')
    else:
        out.append(nljson.dump(v))


def dumps(obj) -> bytes:
    """The JSON text of a body (compact, ordered, raw UTF-8, dump_safe): nljson.dump's text, built and encoded
    in pieces."""
    pieces: list[str] = []
    _pieces(obj, pieces)
    groups, group, size = [], [], 0
    for p in pieces:
        group.append(p)
        size += len(p)
        if size >= PIECE:
            groups.append("".join(group))
            group, size = [], 0
    groups.append("".join(group))
    try:
        return b"".join([g.encode("utf-8") for g in groups])
    except UnicodeEncodeError:
        return safe_text("".join(groups)).encode("utf-8")


def json_response(obj, status: int = 200, headers: dict | None = None) -> Response:
    return Response(dumps(obj), status_code=status, media_type=JSON_TYPE, headers=headers)


async def off_loop(fn, *args):
    """fn(*args) on a worker thread (anyio's pool): the steps that parse, render, tokenize, compile or serialize
    a request's data run there, never on the event loop. Exceptions come back to the caller."""
    return await anyio.to_thread.run_sync(fn, *args)


class Refusal(BankmlError):
    """A request llama-server refuses: its HTTP status, message, error type (by default the status's) and any
    extra fields of the error object (exceed_context_size_error's n_prompt_tokens, n_ctx)."""

    def __init__(self, status: int, message: str, etype: str | None = None, **extra):
        self.status = status
        self.message = message
        self.type = etype or ERROR_TYPES.get(status, "server_error")
        self.extra = extra
        super().__init__(message)

    def json(self) -> dict:
        """format_error_response: {"error": {"code", "message", "type", ...extra}}."""
        err = {"code": self.status, "message": self.message, "type": self.type}
        err.update(self.extra)
        return {"error": err}

    def response(self) -> Response:
        return json_response(self.json(), self.status)


def error_body(message: str, status: int = 500, etype: str | None = None, **extra) -> dict:
    return Refusal(status, message, etype, **extra).json()


def error_response(message: str, status: int = 500, etype: str | None = None, **extra) -> Response:
    return Refusal(status, message, etype, **extra).response()


def feature_disabled() -> Response:
    """llama-server's answer on a route whose feature is off (/cors-proxy without --ui-mcp-proxy, /tools without
    --tools): 403, {"error": {"message": "this feature is disabled", "type": "feature_disabled"}}."""
    return json_response({"error": {"message": "this feature is disabled", "type": "feature_disabled"}}, 403)


def router_error(message: str, etype: str, status: int) -> bytes:
    # the middleware's own errors keep the key order message, type, code
    return dumps({"error": {"message": message, "type": etype, "code": status}})


NOT_FOUND = router_error("File Not Found", "not_found_error", 404)
INVALID_KEY = router_error("Invalid API Key", "authentication_error", 401)
LOADING = router_error("Loading model", "unavailable_error", 503)


def origin_is_localhost(origin: str) -> bool:
    """llama-server's origin_is_localhost: scheme://host[:port] with host localhost, 127.0.0.1 or [::1]."""
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        return False
    return host in ("localhost", "127.0.0.1", "::1")


def wire_name(name: bytes) -> bytes:
    """A header name as cpp-httplib writes llama-server's: each dash-separated word capitalised
    (b"access-control-allow-origin" -> b"Access-Control-Allow-Origin"); clients that keep headers in a plain
    dict see the same keys."""
    return b"-".join(w[:1].upper() + w[1:].lower() for w in name.split(b"-"))


class CollectorPolicy:
    """The cyclic garbage collector while an app serves: the young generations are collected as usual (their
    passes are short), the old one (a full pass) only when no request is in flight (LlamaHTTP calls begin() /
    end() around each), or once OLD_PASSES_DUE young passes piled up while requests never stopped. A full pass
    walks every live object with the GIL held: during a request holding a large answer (a few million
    probability entries) Python's own policy froze the event loop for up to a second. Nothing is frozen
    (gc.freeze): a model closed on sleep or unload is freed by a full pass (its slots, caches and weights form
    cycles; bankml.server.residency collects them). The first policy of a process sets this up, the last one's
    close() puts Python's back."""

    #: the old generation's threshold while serving (Python's: 10 young passes), and how many young passes bring
    #: a full one even while requests are in flight
    FROZEN_OLD = 1 << 30
    OLD_PASSES_DUE = 1000

    _lock = threading.Lock()
    _open = 0
    _saved = (700, 10, 10)

    def __init__(self):
        self.in_flight = 0
        self.closed = False
        cls = CollectorPolicy
        with cls._lock:
            if cls._open == 0:
                cls._saved = gc.get_threshold()
                gc.set_threshold(cls._saved[0], cls._saved[1], self.FROZEN_OLD)
            cls._open += 1

    def begin(self) -> None:
        with self._lock:
            self.in_flight += 1

    def end(self) -> None:
        with self._lock:
            self.in_flight -= 1
            idle = self.in_flight == 0
        due = gc.get_count()[2]
        if (idle and due > self._saved[2]) or due > self.OLD_PASSES_DUE:
            gc.collect()

    def close(self) -> None:
        cls = CollectorPolicy
        with cls._lock:
            if self.closed:
                return
            self.closed = True
            cls._open -= 1
            if cls._open == 0:
                gc.set_threshold(*cls._saved)


class PayloadTooLarge(Exception):
    """Raised into the app by LlamaHTTP's receive() once a body without Content-Length passes PAYLOAD_MAX (the
    413 has been sent by then; whatever the app answers after it is dropped)."""


def _unlimited(path: str) -> bool:
    # Ollama's blob uploads (POST /api/blobs/:digest) are model files: no payload limit there
    return path.startswith("/api/blobs/")


def _known_route(scope) -> bool:
    """Whether a route of the app takes this method and path (cpp-httplib reads a body only for a route that
    matched, server/httplib.cpp Server::dispatch_request; an unknown one answers its 404 unread)."""
    app = scope.get("app")
    routes = getattr(getattr(app, "router", None), "routes", None)
    if routes is None:
        return True
    return any(route.matches(scope)[0] == Match.FULL for route in routes)


class LlamaHTTP:
    """ASGI middleware: llama-server's pre-routing handler and cpp-httplib's default headers (see module doc).
    `cfg` is the ServerConfig; `ready()` says whether the model is loaded (503 "Loading model" before);
    `collector()` the app's CollectorPolicy (told of each request's begin and end), or None."""

    def __init__(self, app, cfg, ready=lambda: True, collector=lambda: None, browser_gate=lambda scope: None,
                 withholds_cors=lambda scope, cfg: False):
        self.app = app
        self.cfg = cfg
        self.ready = ready
        self.collector = collector            # () -> the app's CollectorPolicy, or None
        # the app's browser rules (bankml.server.app passes them): browser_gate(scope), Ollama's verdict on its
        # own paths (bankml.server.ollama.cors.verdict) or None; withholds_cors(scope, cfg), whether /tools or
        # /cors-proxy refuse this Origin (bankml.server.agent.guard.withholds_cors)
        self.browser_gate = browser_gate
        self.withholds_cors = withholds_cors

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = self.collector()
        if policy is None:
            await self.handle(scope, receive, send)
            return
        policy.begin()
        try:
            await self.handle(scope, receive, send)
        finally:
            policy.end()

    async def handle(self, scope, receive, send):
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        extra: list[tuple[bytes, bytes]] = [(b"server", b"llama.cpp")]
        cfg = self.cfg
        origin = headers.get("origin", "")
        # Ollama's paths: Ollama's browser rules instead (bankml.server.ollama.cors); /tools and /cors-proxy:
        # never an Origin their guard refuses (bankml.server.agent.guard.withholds_cors)
        gate = self.browser_gate(scope)
        if gate is not None:
            extra += gate.headers
        elif self.withholds_cors(scope, cfg):
            pass
        elif cfg.cors_credentials and cfg.cors_origins == "*":
            extra.append((b"access-control-allow-origin", origin.encode("latin-1")))
        elif cfg.cors_origins == "localhost":
            if origin and origin_is_localhost(origin):
                extra.append((b"access-control-allow-origin", origin.encode("latin-1")))
        else:
            extra.append((b"access-control-allow-origin", cfg.cors_origins.encode("latin-1")))

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                hs = [(k, v) for k, v in message.get("headers", []) if k.lower() not in (b"server",)]
                hs = extra + hs
                if message["status"] >= 400:
                    hs.append((b"connection", b"close"))
                else:
                    hs.append((b"keep-alive", b"timeout=5, max=100"))
                if scope["method"] == "HEAD" and not any(k.lower() == b"accept-ranges" for k, _ in hs):
                    hs.append((b"accept-ranges", b"bytes"))      # cpp-httplib's answer to HEAD
                message = dict(message, headers=[(wire_name(k), v) for k, v in hs])
            await send(message)

        async def answer(status: int, body: bytes, ctype: str | None, more=()):
            hs = ([(b"content-type", ctype.encode())] if ctype else []) + [
                (b"content-length", str(len(body)).encode())] + list(more)
            await send_with_headers({"type": "http.response.start", "status": status, "headers": hs})
            await send_with_headers({"type": "http.response.body", "body": body})

        if gate is not None and gate.status is not None:
            await gate.send(send_with_headers)
            return
        if scope["method"] == "OPTIONS" and gate is None:
            await answer(200, b"", "text/html", [
                (b"access-control-allow-credentials", b"true" if cfg.cors_credentials else b"false"),
                (b"access-control-allow-methods", cfg.cors_methods.encode("latin-1")),
                (b"access-control-allow-headers", cfg.cors_headers.encode("latin-1"))])
            return
        if not self.ready():
            await answer(503, LOADING, JSON_TYPE)
            return
        if cfg.api_keys and scope["path"] not in PUBLIC_PATHS:
            key = headers.get("authorization", "") or headers.get("x-api-key", "")
            if key.startswith("Bearer "):
                key = key[len("Bearer "):]
            if key not in cfg.api_keys:
                await answer(401, INVALID_KEY, JSON_TYPE)
                return
        # the payload limit (cpp-httplib's read_content, httplib.cpp: CPPHTTPLIB_PAYLOAD_MAX_LENGTH, 413 with no
        # body), after the pre-routing handler's 503 and 401 as there. cpp-httplib reads a declared length up to
        # the limit before it refuses; bankml refuses from the header, before reading a byte of the body.
        length = headers.get("content-length")
        limited = not _unlimited(scope["path"])
        if (limited and length is not None and length.isdigit() and int(length) > PAYLOAD_MAX
                and _known_route(scope)):
            await answer(413, b"", None)          # cpp-httplib: no body, no Content-Type
            return
        if not limited or length is not None:
            await self.app(scope, receive, send_with_headers)
            return
        # no Content-Length (chunked): counted as it streams, cut past the limit (read_content_chunked)
        state = {"read": 0, "refused": False, "started": False}

        async def counted():
            message = await receive()
            if message["type"] == "http.request":
                state["read"] += len(message.get("body", b""))
                if state["read"] > PAYLOAD_MAX:
                    if not state["started"]:
                        await answer(413, b"", None)
                    state["refused"] = True
                    raise PayloadTooLarge()
            return message

        async def guarded_send(message):
            if state["refused"]:
                return                            # the 413 went out: the app's own answer is dropped
            if message["type"] == "http.response.start":
                state["started"] = True
            await send_with_headers(message)
        try:
            await self.app(scope, counted, guarded_send)
        except Exception:
            if not state["refused"]:
                raise


async def not_found(request, exc=None) -> Response:
    """Unknown paths and wrong methods: cpp-httplib's 404 with llama-server's body."""
    return Response(NOT_FOUND, status_code=404, media_type=JSON_TYPE)
