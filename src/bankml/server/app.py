"""bankml-serve's Starlette app: llama-server b11192's routes over one loaded model.

    app = build_app(["-m", path, "-c", "4096", "-np", "1"])   # llama-server's flags; loads the model now
    app = build_app(ctx=ServerContext.load(cfg))              # or from a loaded context

The model is loaded (and verified) before the app is returned, so the app answers at once (llama-server's
503 "Loading model" window is the time before `bankml-serve` starts listening). Routes: bankml.server.info_api
(/health, /props, /models), tokenize_api, template_api, completion_api (/completion, /v1/completions,
/v1/chat/completions), slots_api (/slots, /metrics). Unknown paths and wrong methods answer llama-server's 404;
an exception a handler did not turn into llama-server's answer becomes its 500 body (ex_wrapper), never a
traceback. bankml.server.http.LlamaHTTP adds the headers, CORS, the API key check and the body limit.
"""

from __future__ import annotations

import logging

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response

from .. import nljson
from ..errors import BankmlError
from . import info_api, template_api, tokenize_api
from .context import ServerContext
from .flags import ServerConfig, parse_flags
from .http import LlamaHTTP, error_response, not_found

log = logging.getLogger("bankml.server")


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s", request.url.path)
    return error_response(str(exc) or type(exc).__name__, 500)


async def _refusal(request: Request, exc: BankmlError) -> Response:
    # something bankml does not reproduce: say so (501), never a guess
    return error_response(str(exc), 501)


def _routes():
    return info_api.routes + tokenize_api.routes + template_api.routes


def _json_error(raw: bytes) -> Response:
    # template_api's fallback for a body Python's json refused: nlohmann's parse error, 500
    try:
        nljson.loads(raw)
    except nljson.JSONParseError as e:
        return error_response(str(e), 500)
    return error_response("invalid JSON body", 500)


def build_app(argv: list[str] | None = None, *, ctx: ServerContext | None = None,
              cfg: ServerConfig | None = None) -> Starlette:
    """The app for llama-server-style `argv` (or a parsed `cfg`, or a loaded `ctx`)."""
    if ctx is None:
        cfg = cfg if cfg is not None else parse_flags(list(argv or []))
        ctx = ServerContext.load(cfg)
    cfg = ctx.cfg

    app = Starlette(routes=_routes(), exception_handlers={
        404: not_found, 405: not_found, BankmlError: _refusal, Exception: _server_error})
    app.state.ctx = ctx
    app.state.tokenizer = ctx.tokenizer
    app.state.template = ctx.templates
    app.state.chat_options = ctx.chat_options
    app.state.parse_json = nljson.loads
    app.state.parse_json_body = _json_error
    app.add_middleware(LlamaHTTP, cfg=cfg)
    return app
