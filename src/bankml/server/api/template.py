"""llama-server's template endpoints: POST /apply-template and POST /v1/chat/completions/input_tokens.

Both run the chat request step (bankml.chat.request) exactly as /v1/chat/completions does, so they answer with
the same validation errors; /apply-template returns `{"prompt": ...}`, input_tokens counts the prompt's tokens
(tokenized with add_special and parse_special, as llama-server's tokenize_mixed does) and returns
`{"input_tokens": N, "object": "response.input_tokens"}`.

The app provides `app.state.template` (bankml.chat.template.ChatTemplates), `app.state.tokenizer` (for input_tokens)
and optionally `app.state.chat_options` (bankml.chat.request.ServerChatOptions, default: llama-server's with
`--reasoning off`). `routes` is mounted by the server's app.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...chat.request import ChatRequestError, ServerChatOptions, error_body, parse_chat_request
from ...cxx import nljson
from ..routing import chat_options_of, templates_of, tokenizer_of


def _safe(text: str) -> str:
    """llama-server's dump_safe: invalid UTF-8 (kept in bankml's strings via 'surrogateescape') becomes U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _json(payload: dict, status: int = 200) -> Response:
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return Response(body.encode("utf-8"), status_code=status, media_type="application/json; charset=utf-8")


def _error(e: ChatRequestError) -> Response:
    body = error_body(e)
    body["error"]["message"] = _safe(body["error"]["message"])
    return _json(body, e.status)


async def _chat_request(request: Request):
    raw = await request.body()
    try:
        try:
            body = json.loads(raw)
        except RecursionError:  # nested past Python's limit: read as nlohmann reads it (no depth limit)
            body = nljson.loads(raw)
    except ValueError as e:
        # llama-server answers 500 with nlohmann's parse error text; the server's body parser reproduces it
        parse = getattr(request.app.state, "parse_json_body", None)
        if parse is not None:
            return None, parse(raw)
        return None, _error(ChatRequestError(f"invalid JSON body: {e}", 500))
    opt = chat_options_of(request) or ServerChatOptions()
    try:
        return parse_chat_request(body, templates_of(request), opt), None
    except ChatRequestError as e:
        return None, _error(e)


async def apply_template(request: Request) -> Response:
    req, err = await _chat_request(request)
    if err is not None:
        return err
    return _json({"prompt": _safe(req.prompt)})


async def input_tokens(request: Request) -> Response:
    req, err = await _chat_request(request)
    if err is not None:
        return err
    tok = tokenizer_of(request)
    n = len(tok.tokenize(req.prompt, add_special=True, parse_special=True))
    return _json({"input_tokens": n, "object": "response.input_tokens"})


routes = [
    Route("/apply-template", apply_template, methods=["POST"]),
    Route("/v1/chat/completions/input_tokens", input_tokens, methods=["POST"]),
]
