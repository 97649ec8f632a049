"""Ollama's own routes on bankml-serve: GET|HEAD / and /api/version; POST /api/chat and /api/generate come with
the Ollama family (bankml.server.api.families.ollama)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

#: the Ollama release whose API bankml reproduces (version.Version)
OLLAMA_VERSION = "0.13.3"


async def root(request: Request) -> Response:
    # routes.go: r.GET("/", ...) / r.HEAD("/", ...): "Ollama is running"
    return PlainTextResponse("Ollama is running")


async def version(request: Request) -> Response:
    # gin's c.JSON: compact, "application/json; charset=utf-8"
    return Response(b'{"version":"' + OLLAMA_VERSION.encode() + b'"}', media_type="application/json; charset=utf-8")


routes = [Route("/", root, methods=["GET", "HEAD"]), Route("/api/version", version, methods=["GET", "HEAD"])]
