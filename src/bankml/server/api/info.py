"""llama-server's read-only endpoints: GET /health (/v1/health), GET /props (POST /props), GET /models and
/v1/models (server-context.cpp: get_health, get_props / get_res_props, get_models / get_res_models).

Every handler reads the request's context (bankml.server.routing.context_of); while the model sleeps /props and
/models answer what it cached before it slept (bankml.server.residency), and /health needs no model.
"""

from __future__ import annotations

import secrets
import string
import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..http import error_response, json_response
from ..routing import context_of, resident_of

_ALNUM = string.digits + string.ascii_letters


def random_string(n: int) -> str:
    """random_string (server-common.cpp): n characters of [0-9A-Za-z]."""
    return "".join(secrets.choice(_ALNUM) for _ in range(n))


async def health(request: Request) -> Response:
    return json_response({"status": "ok"})


def model_info(ctx) -> dict:
    m = ctx.meta
    return {"id": m.name, "aliases": m.aliases, "tags": m.tags, "object": "model", "created": int(time.time()),
            "owned_by": "llamacpp",
            "meta": {"vocab_type": m.vocab_type, "n_vocab": m.n_vocab, "n_ctx": ctx.n_ctx_slot,
                     "n_ctx_train": m.n_ctx_train, "n_embd": m.n_embd, "n_params": m.n_params, "size": m.size,
                     "ftype": m.ftype}}


def models_body(ctx) -> dict:
    m = ctx.meta
    return {
        "models": [{
            "name": m.name, "model": m.name, "modified_at": "", "size": "", "digest": "", "type": "model",
            "description": "", "tags": [""], "capabilities": ["completion"], "parameters": "",
            "details": {"parent_model": "", "format": "gguf", "family": "", "families": [""], "parameter_size": "",
                        "quantization_level": ""}}],
        "object": "list",
        "data": [model_info(ctx)],
    }


def _cached(request: Request, what: str):
    r = resident_of(request)
    return r.cached.get(what) if r is not None else None


async def models(request: Request) -> Response:
    ctx = context_of(request)
    if ctx is None:
        body = _cached(request, "models")
        if body is not None:                    # as it was when the model fell asleep (its created too)
            return json_response(body)
    return json_response(models_body(ctx))


def props_body(ctx) -> dict:
    cfg = ctx.cfg
    m = ctx.meta
    body = {
        "default_generation_settings": {"params": ctx.default_params_json(), "n_ctx": ctx.n_ctx_slot},
        "total_slots": ctx.n_slots,
        "model_alias": m.name,
        "model_ftype": m.ftype,
        "model_path": m.path,
        "modalities": {"vision": False, "video": False, "audio": False},
        "media_marker": ctx.media_marker,
        "endpoint_slots": cfg.endpoint_slots,
        "endpoint_props": cfg.endpoint_props,
        "endpoint_metrics": cfg.endpoint_metrics,
        "ui": False,
        "ui_settings": {},
        "chat_template": ctx.templates.source(),
        "chat_template_caps": ctx.templates.caps(),
        "bos_token": m.bos_token,
        "eos_token": m.eos_token,
        "build_info": m.build_info,
        "is_sleeping": False,
        "cors_proxy_enabled": cfg.ui_mcp_proxy,
    }
    tool_use = ctx.templates.source("tool_use")
    if tool_use and cfg.use_jinja:
        body["chat_template_tool_use"] = tool_use
    return body


async def props(request: Request) -> Response:
    ctx = context_of(request)
    if ctx is None:
        body = _cached(request, "props")
        if body is not None:
            return json_response(body)
    return json_response(props_body(ctx))


async def post_props(request: Request) -> Response:
    if not request.app.state.cfg.endpoint_props:
        return error_response("This server does not support changing global properties. Start it with `--props`",
                              501)
    return json_response({"success": True})


routes = [
    Route("/health", health, methods=["GET"]),
    Route("/v1/health", health, methods=["GET"]),
    Route("/props", props, methods=["GET"]),
    Route("/props", post_props, methods=["POST"]),
    Route("/models", models, methods=["GET"]),
    Route("/v1/models", models, methods=["GET"]),
]
