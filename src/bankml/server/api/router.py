"""llama-server's router endpoints (server-models.cpp, router mode: `--models-dir` without -m): GET /props
(the router's own object), GET /models and /v1/models (every model with its status), POST /models/load and
POST /models/unload, answered from bankml.server.residency. Requests for a model are routed by
bankml.server.routing; here are only the routes that answer for the whole server.

bankml runs each model in this process instead of a child llama-server, so `status.args` is the command line a
child would have been given (the router's flags, rendered as llama-server renders a preset:
bankml.server.flags.child_args) with this server's own port, and `status.preset` its ini text.
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...cxx import nljson
from ..flags import child_args, child_preset
from ..http import JSON_TYPE, NOT_FOUND, Refusal, error_response, json_response
from ..context import ModelMeta
from ..residency import UNLOADED
from . import info as info_api

BUILD_INFO = ModelMeta.build_info        # what a single-model server reports too


async def props(request: Request) -> Response:
    if request.query_params.get("model"):       # routed to the model (bankml.server.routing): its own /props
        return await info_api.props(request)
    cfg = request.app.state.cfg
    return json_response({
        "role": "router", "max_instances": cfg.models_max, "models_autoload": cfg.models_autoload,
        "model_alias": "llama-server", "model_path": "none",
        "default_generation_settings": {"params": None, "n_ctx": 0},
        "ui_settings": {}, "build_info": BUILD_INFO, "cors_proxy_enabled": cfg.ui_mcp_proxy})


def model_entry(cfg, r, now: int) -> dict:
    status = {"value": r.status, "args": child_args(cfg, r.path, r.name, r.port),
              "preset": child_preset(cfg, r.path, r.name)}
    if r.status == UNLOADED and r.failure is not None:
        status["exit_code"] = 1
        status["failed"] = True
    entry = {"id": r.name, "aliases": [], "tags": [], "object": "model", "owned_by": "llamacpp", "created": now,
             "status": status, "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
             "source": "models_dir", "can_remove": False}
    if r.running and r.info is not None:
        entry["meta"] = r.info
    return entry


async def models(request: Request) -> Response:
    res = request.app.state.residency
    cfg = request.app.state.cfg
    now = int(time.time())
    return json_response({"data": [model_entry(cfg, r, now) for r in sorted(res.models.values(),
                                                                            key=lambda m: m.name)],
                          "object": "list"})


async def _named(request: Request):
    """(residency, the entry the body's "model" names or None, None), or (None, None, the 500 answer of a body
    that is not JSON: nlohmann's parse error)."""
    try:
        body = nljson.loads(await request.body())
    except nljson.JSONParseError as e:
        return None, None, error_response(str(e), 500)
    name = body.get("model", "") if isinstance(body, dict) else ""
    res = request.app.state.residency
    return res, res.models.get(name) if isinstance(name, str) else None, None


async def load(request: Request) -> Response:
    res, r, bad = await _named(request)
    if bad is not None:
        return bad
    if r is None:          # llama-server's not-found error goes through its 404 formatter: "File Not Found"
        return Response(NOT_FOUND, status_code=404, media_type=JSON_TYPE)
    if r.running:
        return error_response("model is already running", 400)
    try:
        res.load(r.name)
    except Refusal as e:
        return e.response()
    return json_response({"success": True})


async def unload(request: Request) -> Response:
    res, r, bad = await _named(request)
    if bad is not None:
        return bad
    if r is None:
        return error_response("model is not found", 400)
    if not r.running:
        return error_response("model is not running", 400)
    res.unload_soon(r.name)
    return json_response({"success": True})


async def not_downloaded(request: Request) -> Response:
    return error_response("bankml does not download models from a hub: `bankml pull` fetches pinned models from "
                          "package registries into the models directory", 501)


routes = [
    Route("/props", props, methods=["GET"]),
    Route("/models", models, methods=["GET"]),
    Route("/v1/models", models, methods=["GET"]),
    Route("/models/load", load, methods=["POST"]),
    Route("/models/unload", unload, methods=["POST"]),
    Route("/models", not_downloaded, methods=["POST", "DELETE"]),
]
