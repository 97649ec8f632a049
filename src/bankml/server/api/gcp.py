"""Google Cloud (Vertex AI) prediction compatibility, as llama-server b11192 has it (tools/server/server-http.cpp:83
gcp_params, :758 path_to_gcp_format, :780 parse_gcp_predict_response, :797 register_gcp_compat).

    AIP_MODE=PREDICTION bankml-serve -m model.gguf          # AIP_HTTP_PORT (8080) replaces --port
    POST /predict {"instances": [{"@requestFormat": "chatCompletions", "messages": [...]}, ...]}
    -> {"predictions": [<what POST /v1/chat/completions answers>, ...]}

The environment decides, as Vertex AI's custom-container contract sets it: `AIP_MODE=PREDICTION` turns it on,
`AIP_PREDICT_ROUTE` (default /predict) and `AIP_HEALTH_ROUTE` (default: none, /health stays) name the routes (a
missing leading slash is added), `AIP_HTTP_PORT` (default 8080) is the port, replacing `--port` with a warning.

Each instance is dispatched to one of llama-server's routes, in-process, through the whole app (the API key, the
model's lease, the route itself), all instances at once (llama-server: one std::async each):
- `@requestFormat` is a route's camelCase alias ("/v1/chat/completions" -> "chatCompletions", "/apply-template" ->
  "applyTemplate": a leading /v1 and / dropped, each '/', '-', '_' capitalizes the next character, a ':' ends it)
  or a route's path itself. llama-server builds the alias table by iterating its std::unordered_map of handlers,
  so where two paths share an alias, its hash order picks one; measured on b11192: "completions" is
  /v1/completions, "embeddings" /v1/embeddings, "slots" GET /slots (`ALIAS_WINNERS`). A path registered for GET
  and POST is its GET handler (the map keeps the first registration).
- The instance without `@requestFormat` is the body; a `stream` field becomes false. The route's answer is
  parsed as JSON (its text when it is not JSON, null when empty), whatever its status: a route's refusal is its
  error object in `predictions`.
- Refused, as llama-server refuses them: a body that is not JSON (400, nlohmann's message), not an object, without
  an `instances` array, or with more than 128 instances (400); an instance that is not an object, without a string
  `@requestFormat`, or naming no route (that instance's {"error": ...}).

Only llama-server's own routes registered before the compat routes are reachable (not /cors-proxy, /tools, nor
Ollama's or bankml's own). Must not know what a route does: it dispatches bytes.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...cxx import nljson
from ..http import Refusal, error_body, json_response
from ..routing import replay_body

log = logging.getLogger("bankml.server")

MAX_INSTANCES = 128

#: llama-server's routes (server.cpp:251-310, single-model mode) in the order they are registered, before
#: register_gcp_compat: (method, path)
LLAMA_ROUTES = (
    ("GET", "/health"), ("GET", "/v1/health"), ("GET", "/metrics"), ("GET", "/props"), ("POST", "/props"),
    ("GET", "/models"), ("GET", "/v1/models"), ("POST", "/completion"), ("POST", "/completions"),
    ("POST", "/v1/completions"), ("POST", "/chat/completions"), ("POST", "/v1/chat/completions"),
    ("POST", "/v1/chat/completions/control"), ("POST", "/v1/responses"), ("POST", "/responses"),
    ("POST", "/v1/audio/transcriptions"), ("POST", "/audio/transcriptions"), ("POST", "/v1/messages"),
    ("POST", "/infill"), ("POST", "/embedding"), ("POST", "/embeddings"), ("POST", "/v1/embeddings"),
    ("POST", "/rerank"), ("POST", "/reranking"), ("POST", "/v1/rerank"), ("POST", "/v1/reranking"),
    ("POST", "/tokenize"), ("POST", "/detokenize"), ("POST", "/apply-template"),
    ("POST", "/chat/completions/input_tokens"), ("POST", "/v1/chat/completions/input_tokens"),
    ("POST", "/responses/input_tokens"), ("POST", "/v1/responses/input_tokens"),
    ("POST", "/v1/messages/count_tokens"), ("GET", "/lora-adapters"), ("POST", "/lora-adapters"),
    ("GET", "/slots"), ("POST", "/slots/:id_slot"), ("GET", "/v1/stream"), ("POST", "/v1/streams/lookup"),
    ("DELETE", "/v1/stream"))

#: aliases shared by paths of different handlers, and the path llama-server b11192's hash order gives each
#: (observed: AIP_MODE=PREDICTION on the oracle build, one instance per alias)
ALIAS_WINNERS = {"completions": "/v1/completions", "embeddings": "/v1/embeddings", "slots": "/slots"}


@dataclass(frozen=True)
class Params:
    """gcp_params: read from the environment once."""
    enabled: bool
    path_health: str
    path_predict: str
    port: int

    @classmethod
    def from_env(cls, env=None) -> "Params":
        env = os.environ if env is None else env

        def var(name: str, default: str, slash: bool = False) -> str:
            v = env.get(name) or ""
            if not v:
                return default
            return v if not slash or v.startswith("/") else "/" + v

        port = var("AIP_HTTP_PORT", "8080")
        try:
            port_n = int(port.strip().split()[0]) if port.strip() else None
        except ValueError:
            port_n = None
        if port_n is None:
            raise ValueError(f"AIP_HTTP_PORT: not a port number: {port!r}")
        return cls(var("AIP_MODE", "") == "PREDICTION", var("AIP_HEALTH_ROUTE", "", True),
                   var("AIP_PREDICT_ROUTE", "/predict", True), port_n)


def alias_of(path: str) -> str:
    """path_to_gcp_format: "/v1/chat/completions" -> "chatCompletions"."""
    s = path[3:] if len(path) > 3 and path.startswith("/v1") else path
    s = s[1:] if s.startswith("/") else s
    out, cap = [], False
    for c in s:
        if c == ":":
            break
        if c in "/-_":
            cap = True
        else:
            out.append(c.upper() if cap and c.isascii() else c)
            cap = False
    return "".join(out)


def handler_paths(params: Params) -> dict[str, str]:
    """path -> the method of the handler llama-server's map holds for it (the first registered), with the
    health alias (registered before /predict) and /predict itself (registered last, reachable by its path)."""
    paths: dict[str, str] = {}
    for method, path in LLAMA_ROUTES:
        paths.setdefault(path, method)
    if params.path_health:
        paths.setdefault(params.path_health, "GET")
    return paths


def alias_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for _, path in LLAMA_ROUTES:
        table.setdefault(alias_of(path), path)
    table.update(ALIAS_WINNERS)
    return table


def _bad(message: str) -> Response:
    return json_response(error_body(message, 400, "invalid_request_error"), 400)


def _instance_error(message: str, status: int) -> dict:
    return error_body(message, status, "invalid_request_error" if status == 400 else "server_error")


async def _dispatch(request: Request, method: str, path: str, body: bytes):
    """The route's answer to (method, path, body), through the whole app: (status, content-type, bytes)."""
    headers = [(k, v) for k, v in request.scope["headers"] if k not in (b"content-length", b"transfer-encoding")]
    headers.append((b"content-length", str(len(body)).encode()))
    scope = dict(request.scope, method=method, path=path, raw_path=path.encode(), headers=headers)
    for key in ("route", "endpoint", "path_params", "bankml.resident", "bankml.ctx"):
        scope.pop(key, None)

    async def nothing_more():
        await asyncio.Event().wait()       # the instance's answer is not a stream: no disconnect to pass on
        return {"type": "http.disconnect"}

    receive = replay_body(body, nothing_more)
    status, ctype, chunks = 500, "", []

    async def send(message):
        nonlocal status, ctype
        if message["type"] == "http.response.start":
            status = message["status"]
            for k, v in message.get("headers", []):
                if k.lower() == b"content-type":
                    ctype = v.decode("latin-1")
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await request.app(scope, receive, send)
    return status, ctype, b"".join(chunks)


def _prediction(ctype: str, data: bytes):
    """parse_gcp_predict_response: the JSON, else the text, None for nothing; a stream is refused."""
    if ctype.startswith("text/event-stream"):
        raise Refusal(400, "predict route does not support streaming responses")
    if not data:
        return None
    try:
        return nljson.loads(data)
    except (nljson.JSONParseError, ValueError, UnicodeDecodeError):
        return data.decode("utf-8", "replace")


def make_routes(params: Params) -> list[Route]:
    if not params.enabled:
        return []
    paths = handler_paths(params)
    aliases = alias_table()

    async def one(request: Request, instance):
        if not isinstance(instance, dict):
            return _instance_error("each instance must be a JSON object", 400)
        fmt = instance.get("@requestFormat")
        if not isinstance(fmt, str):
            return _instance_error("each instance must include a string @requestFormat", 400)
        try:
            payload = {k: v for k, v in instance.items() if k != "@requestFormat"}
            if "stream" in payload:
                log.warning("ignoring client-provided stream field in instance, streaming is not supported in "
                            "predict route")
                payload["stream"] = False
            if fmt in aliases:
                path = aliases[fmt]
            elif fmt in paths or fmt == params.path_predict:
                path = fmt
            else:
                return _instance_error("no handler registered for @requestFormat: " + fmt, 400)
            method = "POST" if path == params.path_predict else paths[path]
            status, ctype, data = await _dispatch(request, method, path, nljson.dump(payload).encode("utf-8"))
            return _prediction(ctype, data)
        except Refusal as e:
            return _instance_error(e.message, e.status)
        except Exception as e:            # llama-server: any other exception is that instance's server error
            log.exception("predict instance failed")
            return _instance_error(str(e) or "unknown error", 500)

    async def predict(request: Request) -> Response:
        raw = await request.body()
        try:
            data = nljson.loads(raw)
        except nljson.JSONParseError as e:
            return _bad(str(e))
        if not isinstance(data, dict):
            return _bad("request body must be a JSON object")
        instances = data.get("instances")
        if not isinstance(instances, list):
            return _bad("request body must include an array field named instances")
        if len(instances) > MAX_INSTANCES:
            return _bad(f"instances array exceeds maximum size of {MAX_INSTANCES}")
        predictions = await asyncio.gather(*(one(request, i) for i in instances))
        return json_response({"predictions": list(predictions)})

    routes = []
    if params.path_health:
        from .info import health
        routes.append(Route(params.path_health, health, methods=["GET"]))
    routes.append(Route(params.path_predict, predict, methods=["POST"]))
    return routes


def conflicts(params: Params) -> bool:
    """register_gcp_compat refuses a predict route that is already one of llama-server's (exit 1)."""
    return params.enabled and params.path_predict in handler_paths(Params(False, "", "", 0))
