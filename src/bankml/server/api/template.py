"""llama-server's template endpoints: POST /apply-template, POST /v1/chat/completions/input_tokens, POST
/v1/responses/input_tokens (/responses/input_tokens: the Responses body rewritten by families.responses.convert
first) and POST /v1/messages/count_tokens (the Anthropic body rewritten by families.anthropic.convert first;
`{"input_tokens": N}` without `object`).

All run the chat request step (bankml.chat.request) exactly as /v1/chat/completions does, so they answer with
the same validation errors; /apply-template returns `{"prompt": ...}`, input_tokens counts the prompt's tokens
(tokenized with add_special and parse_special, as llama-server's tokenize_mixed does) and returns
`{"input_tokens": N, "object": "response.input_tokens"}`.

The app provides `app.state.template` (bankml.chat.template.ChatTemplates), `app.state.tokenizer` (for input_tokens)
and optionally `app.state.chat_options` (bankml.chat.request.ServerChatOptions, default: llama-server's with
`--reasoning off`). `routes` is mounted by the server's app. The parse, the template and the tokenizer run on a
worker thread (bankml.server.http.off_loop), off the event loop.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...chat.request import ChatRequestError, ServerChatOptions, error_body, parse_chat_request
from ...cxx import nljson
from .families import responses
from .families.anthropic import ConversionError, convert
from ..http import off_loop
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


def _chat_request(raw: bytes, parse, templates, opt, convert=None):
    try:
        try:
            body = json.loads(raw)
        except RecursionError:  # nested past Python's limit: read as nlohmann reads it (no depth limit)
            body = nljson.loads(raw)
    except ValueError as e:
        # llama-server answers 500 with nlohmann's parse error text; the server's body parser reproduces it
        if parse is not None:
            return None, parse(raw)
        return None, _error(ChatRequestError(f"invalid JSON body: {e}", 500))
    try:
        if convert is not None:
            body = convert(body)
        return parse_chat_request(body, templates, opt), None
    except ChatRequestError as e:
        return None, _error(e)
    except ConversionError as e:      # the Anthropic rewrite's runtime_error: ex_wrapper's 500
        return None, _error(ChatRequestError(str(e), 500))
    except responses.ConversionError as e:    # the Responses rewrite's invalid_argument: ex_wrapper's 400
        return None, _error(ChatRequestError(str(e), e.status))


async def _answer(request: Request, answer, convert=None) -> Response:
    """answer(the chat request) -> the Response, with the body's parse and the chat step, on a worker thread."""
    raw = await request.body()
    parse = getattr(request.app.state, "parse_json_body", None)
    templates, opt = templates_of(request), chat_options_of(request) or ServerChatOptions()
    tok = tokenizer_of(request) if answer in (_count, _count_anthropic) else None

    def run():
        req, err = _chat_request(raw, parse, templates, opt, convert)
        return err if err is not None else answer(req, tok)
    return await off_loop(run)


def _prompt(req, tok) -> Response:
    return _json({"prompt": _safe(req.prompt)})


def _count(req, tok) -> Response:
    n = len(tok.tokenize(req.prompt, add_special=True, parse_special=True))
    return _json({"input_tokens": n, "object": "response.input_tokens"})


def _count_anthropic(req, tok) -> Response:
    # handle_count_tokens for TASK_RESPONSE_TYPE_ANTHROPIC (server-context.cpp:5488-5534): no "object" key
    return _json({"input_tokens": len(tok.tokenize(req.prompt, add_special=True, parse_special=True))})


async def apply_template(request: Request) -> Response:
    return await _answer(request, _prompt)


async def input_tokens(request: Request) -> Response:
    return await _answer(request, _count)


async def responses_input_tokens(request: Request) -> Response:
    """POST /v1/responses/input_tokens: the Responses body rewritten as /v1/responses rewrites it, then counted
    (handle_count_tokens for TASK_RESPONSE_TYPE_OAI_RESP, server-context.cpp:5488-5534: with `object`)."""
    return await _answer(request, _count, responses.convert)


async def anthropic_count_tokens(request: Request) -> Response:
    """POST /v1/messages/count_tokens: the Anthropic body rewritten as /v1/messages rewrites it, then counted."""
    return await _answer(request, _count_anthropic, convert)


routes = [
    Route("/apply-template", apply_template, methods=["POST"]),
    Route("/v1/chat/completions/input_tokens", input_tokens, methods=["POST"]),
    Route("/v1/responses/input_tokens", responses_input_tokens, methods=["POST"]),
    Route("/responses/input_tokens", responses_input_tokens, methods=["POST"]),
    Route("/v1/messages/count_tokens", anthropic_count_tokens, methods=["POST"]),
]
