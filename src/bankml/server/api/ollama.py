"""Ollama's own routes on bankml-serve (server/routes.go GenerateRoutes at v0.13.3): GET|HEAD / and
/api/version, POST /api/chat and /api/generate, and /api/embed, /api/embeddings refused by name until bankml has
embeddings.

Chat and generate follow ChatHandler and GenerateHandler step by step: the body read as gin reads it
(bankml.server.ollama.gojson: `missing request body`, Go's decoder messages, 400), top_logprobs in 0..20, the
name (chat: 400 `model is required`; generate: 404), the model (bankml.server.ollama.catalog; 404 `model '<name>'
not found`), an empty input with keep_alive 0 (unloaded, `done_reason:"unload"`), raw's conflicts, think and the
capabilities, the options (bankml.server.ollama.options; a type error is 500), then the model's lease from the
residency (loaded on the way; keep_alive given or, on a first load, OLLAMA_KEEP_ALIVE's default; more waiting
requests than OLLAMA_MAX_QUEUE: 503), an empty input answered `done_reason:"load"`, the prompt
(bankml.server.ollama.prompt: chatPrompt's truncation over the GGUF's template as llama-server renders it, the
runner's truncation) and the generation, as llama-server b11192 answers the request's meaning: its
/v1/chat/completions for messages, its /completion for a raw prompt or one after a `context`, with every
sampling field sent. The JSON is the Ollama family's (bankml.server.api.families.ollama). The model's lease is
held until the answer, a stream included, is over; a client that leaves stops the generation.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time

import anyio
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from .. import keep_alive as ka
from ..generation import Error, Final
from ..http import Refusal
from ..ollama import gojson, names, options, prompt as oprompt
from ..ollama.catalog import Catalog
from .families.base import Reply
from .families.ollama import OLLAMA_CHAT, OLLAMA_GENERATE, OllamaRequest

log = logging.getLogger("bankml.server")

#: the Ollama release whose API bankml reproduces (version.Version)
OLLAMA_VERSION = "0.13.3"
JSON = "application/json; charset=utf-8"
#: server/sched.go ErrMaxQueue
MAX_QUEUE_MESSAGE = "server busy, please try again.  maximum pending requests exceeded"


def _json(obj, status: int = 200) -> Response:
    return Response(gojson.dumps(obj), status_code=status, media_type=JSON)


def _error(status: int, message: str) -> Response:
    return _json({"error": message}, status)


async def root(request: Request) -> Response:
    # routes.go: r.GET("/", ...) / r.HEAD("/", ...): "Ollama is running"
    return PlainTextResponse("Ollama is running")


async def version(request: Request) -> Response:
    # gin's c.JSON: compact, "application/json; charset=utf-8"
    return _json({"version": OLLAMA_VERSION})


def max_queue(environ=None) -> int:
    """envconfig.MaxQueue: $OLLAMA_MAX_QUEUE as an unsigned integer, else 512."""
    environ = os.environ if environ is None else environ
    s = environ.get("OLLAMA_MAX_QUEUE", "").strip().strip("\"'")
    if s.isdigit():
        return int(s)
    return 512


class _Queue:
    """The requests waiting for their model (the scheduler's pendingReqCh, OLLAMA_MAX_QUEUE long)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.waiting = 0

    def enter(self) -> bool:
        with self.lock:
            if self.waiting >= max_queue():
                return False
            self.waiting += 1
            return True

    def leave(self) -> None:
        with self.lock:
            self.waiting -= 1


def _queue(request) -> _Queue:
    st = request.app.state
    q = getattr(st, "ollama_queue", None)
    if q is None:
        q = st.ollama_queue = _Queue()
    return q


def _empty_answer(model: str, chat: bool, reason: str) -> dict:
    out = {"model": model, "created_at": gojson.go_time()}
    if chat:
        out["message"] = {"role": "assistant", "content": ""}
    else:
        out["response"] = ""
    out["done"] = True
    out["done_reason"] = reason
    return out


def _has_tools(ctx) -> bool:
    """The tools capability of the GGUF's template (Ollama's: the template reads .Tools)."""
    caps = ctx.templates.caps()
    return bool(caps.get("supports_tools") or caps.get("supports_tool_calls"))


async def chat(request: Request) -> Response:
    return await _handle(request, True)


async def generate(request: Request) -> Response:
    return await _handle(request, False)


async def _handle(request: Request, chat: bool) -> Response:
    t0 = time.time_ns()
    try:
        req = gojson.bind(await request.body(), "ChatRequest" if chat else "GenerateRequest")
    except gojson.BindError as e:
        return _error(400, "missing request body" if e.eof else e.message)
    top = req.get("top_logprobs", 0)
    if top < 0 or top > 20:
        return _error(400, "top_logprobs must be between 0 and 20")
    model_name = req.get("model", "")
    n = names.parse(model_name)
    residency = request.app.state.residency
    if residency is None:
        return _error(503, "the server is starting")
    m = Catalog(residency).find(model_name) if n.valid else None
    if not n.valid or m is None:
        if chat and not n.valid:
            return _error(400, "model is required")
        return _error(404, f"model '{model_name}' not found")
    messages = req.get("messages") or []
    text_prompt = req.get("prompt", "")
    empty = not messages if chat else text_prompt == ""
    keep = req.get("keep_alive")
    keep_ns = ka.from_json(keep) if keep is not None else None
    r = residency.resolve(m.resident)
    if empty and keep_ns == 0:
        if r is not None and r.running:
            residency.unload_soon(r.name)
        return _json(_empty_answer(model_name, chat, "unload"))
    if not chat and req.get("raw") and (req.get("template") or req.get("system") or req.get("context")):
        return _error(400, "raw mode does not support template, system, or context")
    think = req.get("think")
    if not chat and isinstance(think, str):
        return _error(400, f"think value {gojson._go_quote(think)} is not supported for this model")
    if think is True:
        return _error(400, f"{gojson._go_quote(model_name)} does not support thinking")
    full = f"{n.host}/{n.namespace}/{n.model}:{n.tag}"
    if not chat and req.get("suffix"):
        # the GGUF's template is a Jinja text: it has no Go template's .Suffix (CheckCapabilities, images.go)
        return _error(400, f"{full} does not support insert")
    try:
        opts = options.merged(m.parameters, req.get("options"))
    except options.OptionError as e:
        return _error(500, e.message)
    q = _queue(request)
    if not q.enter():
        return _error(503, MAX_QUEUE_MESSAGE)
    try:
        if keep_ns is not None:
            residency.set_keep_alive(r.name, ka.to_seconds(keep_ns))
        elif not r.running:
            residency.set_keep_alive(r.name, ka.to_seconds(ka.default_ns()))
        try:
            ctx = residency.try_acquire(r)
            if ctx is None:
                ctx = await anyio.to_thread.run_sync(residency.acquire, r)
        except Refusal as e:
            return _error(500, e.message)
    finally:
        q.leave()
    t_loaded = time.time_ns()
    release = [True]
    try:
        if empty:
            return _json(_empty_answer(model_name, chat, "load"))
        if chat and req.get("tools"):
            if not _has_tools(ctx):
                return _error(400, f"{full} does not support tools")
            return _error(501, "tool calls are not reproduced by bankml yet")
        try:
            o, limit = _meaning(ctx, req, m, opts, chat, model_name, t0, t_loaded)
        except _Answer as a:
            return a.response
        if req.get("_debug_render_only"):
            return _json(_debug(ctx, o, model_name, chat))
        family = OLLAMA_CHAT if chat else OLLAMA_GENERATE
        from .completion import make_tasks, parents, prepare
        try:
            prep = prepare(ctx, o, family)
        except Refusal as e:
            return _error(e.status if e.status != 500 else 500, e.message)
        prep.ollama = o
        resp = await _answer(request, ctx, prep, family, limit, make_tasks, parents,
                             lambda: residency.release(r))
        release[0] = not isinstance(resp, StreamingResponse)
        return resp
    finally:
        if release[0]:
            residency.release(r)


class _Answer(Exception):
    def __init__(self, response: Response):
        self.response = response


def _render(ctx):
    """The prompt of a message list, as llama-server's chat step renders it (add_generation_prompt)."""
    from ...chat.request import ChatRequestError, parse_chat_request

    def render(msgs: list) -> str:
        try:
            return parse_chat_request({"messages": msgs}, ctx.templates, ctx.chat_options).llama_params["prompt"]
        except ChatRequestError as e:
            raise _Answer(_error(500 if e.status >= 500 else 400, e.message)) from None
    return render


def _llama_messages(msgs: list) -> list:
    out = []
    for mm in msgs:
        e = {"role": mm.get("role", ""), "content": mm.get("content", "")}
        out.append(e)
    return out


def _meaning(ctx, req, m, opts, chat: bool, model_name: str, t0: int, t_loaded: int):
    """(the OllamaRequest of llama-server's body, the request's context) for a request with input."""
    from ..context import slot_context
    tok = ctx.tokenizer
    n_train = ctx.model.n_ctx_train
    num_ctx = options.effective_ctx(opts, n_train, ctx.n_ctx_slot)
    limit = slot_context(num_ctx, 1, False, n_train)[1]
    fields = options.llama_fields(opts, num_ctx)
    stream = req.get("stream", True)
    truncate = req.get("truncate", True)
    render = _render(ctx)

    def tokenize(text: str) -> list[int]:
        return tok.tokenize(text, False, True)

    logprobs = bool(req.get("logprobs"))
    top = req.get("top_logprobs", 0)
    extra = {"stream": stream}
    if logprobs:
        extra["n_probs"] = max(top, 1)
    context_prompt = None
    try:
        if chat:
            msgs = oprompt.chat_messages(m, req.get("messages") or [])
        elif req.get("raw"):
            msgs = None
        else:
            if req.get("template"):
                raise _Answer(_error(501, "Ollama's Go templates are not reproduced by bankml: `template` is "
                                          "refused (the GGUF's own chat template renders every prompt)"))
            msgs = oprompt.generate_messages(m, req.get("system", ""), req.get("prompt", ""),
                                             req.get("images") or [], req.get("context") is not None)
        if msgs is None:
            body = {"prompt": req.get("prompt", ""), **fields, **options.format_fields(req.get("format"), False),
                    **extra}
        else:
            kept, _ = oprompt.chat_prompt(_llama_messages(msgs), render, tokenize, num_ctx, truncate)
            rendered = render(kept)
            prefix = ""
            if req.get("context") is not None:
                prefix = tok.detokenize(req["context"], False, True).decode("utf-8", "replace")
            full_prompt = prefix + rendered
            toks = tok.tokenize(full_prompt, True, True)
            cut = oprompt.runner_truncate(toks, num_ctx, opts["num_keep"], truncate)
            if cut is toks and not prefix:
                body = {"messages": kept, **fields, **options.format_fields(req.get("format"), True), **extra}
            else:
                body = {"prompt": cut if cut is not toks else full_prompt, **fields,
                        **options.format_fields(req.get("format"), False), **extra}
            if not chat:
                context_prompt = full_prompt
    except oprompt.PromptError as e:
        raise _Answer(_error(e.status, e.message)) from None
    except options.FormatError as e:
        raise _Answer(_error(500, e.message)) from None
    o = OllamaRequest(body, chat, model_name, t0, t_loaded, logprobs, top, context_prompt, tokenize)
    return o, limit


def _debug(ctx, o: OllamaRequest, model: str, chat: bool) -> dict:
    """_debug_render_only: the rendered prompt, without running the model."""
    if "messages" in o.body:
        rendered = _render(ctx)(o.body["messages"])
    else:
        p = o.body["prompt"]
        rendered = p if isinstance(p, str) else ctx.tokenizer.detokenize(p, False, True).decode("utf-8", "replace")
    out = {"model": model, "created_at": gojson.go_time()}
    if chat:
        out["message"] = {"role": "", "content": ""}
    else:
        out["response"] = ""
    out["done"] = False
    out["_debug_info"] = {"rendered_template": rendered}
    return out


async def _answer(request, ctx, prep, family, limit, make_tasks, parents, release):
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()

    def emit_for(i):
        return lambda ev: loop.call_soon_threadsafe(events.put_nowait, (i, ev))

    tasks = make_tasks(ctx, prep, emit_for)
    for t in tasks:
        t.n_ctx = limit
    for t in parents(tasks, prep):
        ctx.worker.submit_completion(t)
    reply = Reply.start(family, ctx, prep)
    state = {"stopped": False}

    def cancel():
        if not state["stopped"]:
            state["stopped"] = True
            for _ in tasks:
                ctx.worker.new_id()
        for t in tasks:
            t.cancelled.set()

    if not prep.stream:
        while True:
            try:
                i, ev = await asyncio.wait_for(events.get(), timeout=1.0)
            except asyncio.TimeoutError:
                if await request.is_disconnected():
                    cancel()
                    return Response(status_code=499)
                continue
            if isinstance(ev, Error):
                cancel()
                return _error(ev.status, ev.message)
            if isinstance(ev, Final):
                state["stopped"] = True
                return _json(reply.final(i, ev))

    first = await events.get()
    if isinstance(first[1], Error):
        cancel()
        return _error(first[1].status, first[1].message)
    framing = family.framing

    async def gen():
        pending = [first]
        try:
            while True:
                i, ev = pending.pop(0) if pending else await events.get()
                if isinstance(ev, Error):
                    yield framing.chunk(family.refused(ev))
                    return
                for c in reply.chunks(i, ev):
                    yield framing.chunk(c)
                if isinstance(ev, Final):
                    state["stopped"] = True
                    return
        finally:
            cancel()
            release()

    return StreamingResponse(gen(), status_code=200, headers=dict(framing.headers))


async def _no_embeddings(request: Request) -> Response:
    return _error(501, "embeddings are not reproduced by bankml yet")


routes = [Route("/", root, methods=["GET", "HEAD"]), Route("/api/version", version, methods=["GET", "HEAD"]),
          Route("/api/chat", chat, methods=["POST"]), Route("/api/generate", generate, methods=["POST"]),
          Route("/api/embed", _no_embeddings, methods=["POST"]),
          Route("/api/embeddings", _no_embeddings, methods=["POST"])]
