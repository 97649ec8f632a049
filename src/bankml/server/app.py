"""bankml-serve's Starlette app: llama-server b11192's routes over one loaded model.

    app = build_app(["-m", path, "-c", "4096", "-np", "1"])   # llama-server's flags; nothing loaded yet
    app = build_app(ctx=ServerContext.load(cfg))              # or over a loaded context
    with TestClient(app) as c: ...                            # the lifespan runs: load, slots, worker thread

The model is loaded (and verified) and the worker thread started in the app's lifespan, which runs before any
connection is served (bankml-serve enters it before it starts listening), so the app answers at once once it
answers at all; a request that reaches it before (an ASGI server without lifespan) gets llama-server's 503
"Loading model". Routes: bankml.server.api.info (/health, /props, /models), tokenize_api, template_api,
completion_api (the rows of bankml.server.api.families.TABLE: /completion, /v1/completions,
/v1/chat/completions), slots_api (/slots, /metrics), stream_sessions (/v1/stream, /v1/streams/lookup). Unknown
paths and wrong methods answer llama-server's 404; an exception a handler did not turn into llama-server's answer
becomes its 500 body (ex_wrapper), never a traceback. bankml.server.http.LlamaHTTP adds the headers, CORS, the API
key check and the body limit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..cxx import nljson
from ..errors import BankmlError
from .api import info as info_api, template as template_api, tokenize as tokenize_api
from .context import ServerContext
from .flags import ServerConfig, parse_flags
from .http import CollectorPolicy, LlamaHTTP, Refusal, error_response, not_found, off_loop
from .residency import Residency
from .routing import ModelScope, context_of

log = logging.getLogger("bankml.server")


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s", request.url.path)
    return error_response(str(exc) or type(exc).__name__, 500)


async def _refused(request: Request, exc: Refusal) -> Response:
    return exc.response()


async def _refusal(request: Request, exc: BankmlError) -> Response:
    # something bankml does not reproduce: say so (501), never a guess
    return error_response(str(exc), 501)


async def _no_route(request: Request, exc: Exception) -> Response:
    """An unknown path, or a known one with another method: llama-server's 404 body, except under Ollama's paths
    (`/`, `/api/...`), where gin's router answers (routes.go:1490 HandleMethodNotAllowed): `404 page not found` or
    `405 method not allowed`, text/plain."""
    from .routing import is_ollama
    if is_ollama(request.url.path):
        code = getattr(exc, "status_code", 404)
        text = b"405 method not allowed" if code == 405 else b"404 page not found"
        return Response(text, status_code=405 if code == 405 else 404, headers={"content-type": "text/plain"})
    return await not_found(request, exc)


def _not_supported(message: str):
    async def handler(request: Request) -> Response:
        return error_response(message, 501)
    return handler


async def _infill(request: Request) -> Response:
    h = context_of(request).header
    err = "".join(f"{what} token is missing. " for key, what in (("prefix", "prefix"), ("suffix", "suffix"),
                                                                  ("middle", "middle"))
                  if h.get({"prefix": "tokenizer.ggml.fim_pre_token_id", "suffix": "tokenizer.ggml.fim_suf_token_id",
                            "middle": "tokenizer.ggml.fim_mid_token_id"}[key]) is None)
    if err:
        return error_response("Infill is not supported by this model: " + err, 501)
    return error_response("/infill is not reproduced by bankml yet", 501)


_LATER = _not_supported("this endpoint is not reproduced by bankml yet")

other_routes = [Route("/infill", _infill, methods=["POST"])] + [
    Route(p, _LATER, methods=["POST"]) for p in (
        "/v1/audio/transcriptions", "/audio/transcriptions",
        "/v1/chat/completions/control", "/lora-adapters")] + [
    Route("/lora-adapters", _LATER, methods=["GET"]),
    Route("/chat/completions/input_tokens", template_api.input_tokens, methods=["POST"])]


def _routes(router: bool = False):
    from .api import completion as completion_api, embeddings as embeddings_api, ollama as ollama_api, \
        ollama_models, slots as slots_api, stream_sessions
    from .agent import cors_proxy, tools
    if router:
        from .api import router as router_api
        first = router_api.routes
    else:
        first = []
    return (first + info_api.routes + tokenize_api.routes + template_api.routes + completion_api.routes
            + embeddings_api.routes + slots_api.routes + stream_sessions.routes + cors_proxy.routes + tools.routes
            + other_routes
            + ollama_api.routes + ollama_models.routes)


def _json_error(raw: bytes) -> Response:
    # template_api's fallback for a body Python's json refused: nlohmann's parse error, 500
    try:
        nljson.loads(raw)
    except nljson.JSONParseError as e:
        return error_response(str(e), 500)
    return error_response("invalid JSON body", 500)


def build_app(argv: list[str] | None = None, *, ctx: ServerContext | None = None,
              cfg: ServerConfig | None = None) -> Starlette:
    """The app for llama-server-style `argv` (or a parsed `cfg`, or a loaded `ctx`). Nothing is loaded here: the
    app's lifespan loads the model (unless `ctx` is given, or in router mode, where models load on demand), makes
    the residency (bankml.server.residency) that holds it, and on shutdown closes what it loaded (a given `ctx`
    stays its owner's to close)."""
    from .agent import mcp, tools
    from .api.stream_sessions import StreamSessions
    cfg = ctx.cfg if ctx is not None else (cfg if cfg is not None else parse_flags(list(argv or [])))
    # llama-server reads its MCP config and sets its tools up before it loads the model
    mcp_servers = mcp.Manager.from_flags(cfg) if cfg.mcp_servers_config or cfg.mcp_servers_json else None
    tools.check(cfg.server_tools)
    router = ctx is None and cfg.router_mode

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        app.state.mcp = mcp_servers
        try:
            if mcp_servers is not None:
                await off_loop(mcp_servers.start)       # warmup: each server's tools listed, the process stopped
            residency = _residency(cfg, ctx)
            app.state.collector = CollectorPolicy()    # full collector passes only between requests
            try:
                app.state.ctx = ctx          # a given context (tests); else None: routes read the request's own
                app.state.residency = residency
                yield
            finally:
                app.state.residency = None
                app.state.collector.close()
                app.state.collector = None
                residency.close()
        finally:
            if mcp_servers is not None:
                await off_loop(mcp_servers.close)       # every MCP server process killed

    from .api import gcp
    try:
        gcp_params = gcp.Params.from_env()
    except ValueError:                   # a bad AIP_HTTP_PORT: bankml-serve says so and stops before serving
        gcp_params = gcp.Params(False, "", "/predict", 8080)
    app = Starlette(routes=_routes(router) + gcp.make_routes(gcp_params), lifespan=lifespan, exception_handlers={
        404: _no_route, 405: _no_route, Refusal: _refused, BankmlError: _refusal, Exception: _server_error})
    app.state.ctx = None
    app.state.mcp = None                 # the lifespan's MCP servers (bankml.server.agent.mcp), when configured
    app.state.residency = None           # until the lifespan ran: llama-server's 503 "Loading model"
    app.state.cfg = cfg
    app.state.router = router
    app.state.streams = StreamSessions()
    app.state.parse_json = nljson.loads
    app.state.parse_json_body = _json_error
    # Vertex AI's routes (AIP_MODE=PREDICTION): /predict takes no lease (each instance takes its own), and the
    # health alias is /health (bankml.server.routing.ModelScope reads both)
    app.state.unleased = {("POST", gcp_params.path_predict)} if gcp_params.enabled else set()
    app.state.route_aliases = ({("GET", gcp_params.path_health): ("GET", "/health")}
                               if gcp_params.enabled and gcp_params.path_health else {})
    app.add_middleware(ModelScope, residency=lambda: app.state.residency, router=router,
                       autoload=cfg.models_autoload)
    app.state.collector = None
    from .agent import guard
    from .ollama import cors as ollama_cors
    app.add_middleware(LlamaHTTP, cfg=cfg, ready=lambda: app.state.residency is not None,
                       collector=lambda: app.state.collector, browser_gate=ollama_cors.verdict,
                       withholds_cors=guard.withholds_cors)
    return app


def _residency(cfg: ServerConfig, ctx: ServerContext | None) -> Residency:
    """Single-model mode: the one model, loaded now (or the given context); router mode: the models directory's
    models, none loaded yet."""
    if ctx is None and cfg.router_mode:
        from ..models.registry import Registry
        if not os.path.isdir(cfg.models_dir):
            raise Refusal(500, f"failed to initialize router models: error: '{cfg.models_dir}' does not exist or "
                               "is not a directory")
        # llama-server's router lists the directory's models by its own names only (no aliases)
        entries = [e for e in Registry(models_dirs=[cfg.models_dir]).entries() if e.source == "models_dir"]
        models = {e.name: e.path for e in entries}
        default = None
        if cfg.model:           # bankml's -m beside --models-dir: the default model, loaded (and verified) now
            mine = os.path.realpath(cfg.model)
            default = next((n for n, p in models.items() if os.path.realpath(p) == mine), None)
            if default is None:
                default = os.path.basename(cfg.model).replace(".gguf", "")
                models[default] = cfg.model
        res = Residency(cfg, models, default, models_max=cfg.models_max, sleep_idle=cfg.sleep_idle_seconds,
                        loader=_router_loader,
                        fake_timing=bool(os.environ.get("LLAMA_SERVER_DEBUG_FAKE_TIMING")))
        if default is not None:
            res.load(default, wait=True)
            r = res.resolve(default)
            if r.failure is not None:
                res.close()
                raise Refusal(500, f"{cfg.model}: {r.failure}")
        return res
    owned = ctx is None
    loaded = ServerContext.load(cfg) if owned else ctx
    try:
        loaded.start()
    except BaseException:
        if owned:
            loaded.close()
        raise
    res = Residency(cfg, {}, loaded.meta.name, models_max=cfg.models_max, sleep_idle=cfg.sleep_idle_seconds,
                    loader=_loader)
    default = res.adopt(loaded.meta.name, loaded, aliases=loaded.meta.aliases, owned=owned)
    _add_registry(res, default)
    return res


def _add_registry(res: Residency, default) -> None:
    """The registry's other models (bankml.models.registry: the models directory and the pins), which the APIs
    that name their model (Ollama's) may switch to; the llama-server routes serve the startup model only. The
    registry's names of the startup model's own file become its aliases, so it is never held twice."""
    from ..models.registry import Registry
    try:
        entries = Registry().entries()
    except OSError as e:
        log.warning("the models directory cannot be read: %s", e)
        return
    mine = os.path.realpath(default.path)
    for e in entries:
        if os.path.realpath(e.path) == mine:
            default.aliases = tuple(dict.fromkeys(default.aliases + (e.name,) + tuple(e.aliases)))
        elif res.resolve(e.name) is None:
            res.add(e.name, str(e.path), e.aliases)


def _loader(cfg: ServerConfig, path: str, name: str) -> ServerContext:
    """The one model's context again (a wake from sleep)."""
    loaded = ServerContext.load(cfg, path=path)
    loaded.start()
    return loaded


def _router_loader(cfg: ServerConfig, path: str, name: str) -> ServerContext:
    """A routed model's context: the router's flags with `-m PATH --alias NAME`, as llama-server starts its
    children."""
    return _loader(dataclasses.replace(cfg, model=path, aliases=[name], models_dir=""), path, name)
