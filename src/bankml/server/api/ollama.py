"""Ollama's own routes on bankml-serve: GET|HEAD / and /api/version; POST /api/chat and /api/generate (the checks
in the order of server/routes.go's ChatHandler and GenerateHandler at v0.13.3, the model's lease, the prompt of
bankml.server.ollama.prompt, the options of bankml.server.ollama.options, the answer of
bankml.server.api.families.ollama); POST /api/embed and /api/embeddings are refused by name until embeddings
exist. Every answer is computed by bankml's generation path (bankml.server.api.completion's prepare / make_tasks)
exactly as llama-server answers the request's meaning. The body's bind, the prompt's rendering and tokenization
and the answers' JSON run on a worker thread (bankml.server.http.off_loop), never on the event loop."""

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

from .. import embeddings as engine_embeddings
from .. import keep_alive as ka
from ..context import slot_context
from ..generation import Error, Final, Token
from ..http import Refusal, off_loop
from ..ollama import gojson
from ..ollama import embed as oembed
from ..ollama import options as oopts
from ..ollama import prompt as oprompt
from ..ollama.catalog import Catalog
from ..ollama import names

log = logging.getLogger("bankml.server")

#: the Ollama release whose API bankml reproduces (version.Version)
OLLAMA_VERSION = "0.13.3"
JSON_TYPE = "application/json; charset=utf-8"


async def root(request: Request) -> Response:
    # routes.go: r.GET("/", ...) / r.HEAD("/", ...): "Ollama is running"
    return PlainTextResponse("Ollama is running")


async def version(request: Request) -> Response:
    # gin's c.JSON: compact, "application/json; charset=utf-8"
    return Response(b'{"version":"' + OLLAMA_VERSION.encode() + b'"}', media_type="application/json; charset=utf-8")


# --- answers -----------------------------------------------------------------------------------------------------

class Answer(Exception):
    """An Ollama error answer: status and message (`{"error": message}`); `streamed`: it comes from the
    completion's goroutine of a streaming request, so streamResponse writes it (routes.go:1708: its
    `application/json` header stays, gin's c.JSON adds no charset)."""

    def __init__(self, status: int, message: str, streamed: bool = False):
        super().__init__(message)
        self.status, self.message, self.streamed = status, message, streamed


def _json(obj, status: int = 200, media_type: str = JSON_TYPE) -> Response:
    return Response(gojson.dumps(obj), status_code=status, media_type=media_type)


def _error(status: int, message: str, streamed: bool = False) -> Response:
    return _json({"error": message}, status, "application/json" if streamed else JSON_TYPE)


class _Queue:
    """OLLAMA_MAX_QUEUE (envconfig/config.go:248, default 512): requests waiting for a model beyond it are
    refused with sched.go:64's ErrMaxQueue (503, server/routes.go:2361)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.waiting = 0

    @staticmethod
    def limit() -> int:
        try:
            return int(os.environ.get("OLLAMA_MAX_QUEUE", "512").strip().strip("\"'"))
        except ValueError:
            return 512


_QUEUE = _Queue()
MAX_QUEUE_MESSAGE = "server busy, please try again.  maximum pending requests exceeded"


async def _lease(request: Request, r):
    """The model's lease (acquire on a thread; a client gone meanwhile gives its place up). Raises Answer."""
    residency = request.app.state.residency
    ctx = residency.try_acquire(r)
    if ctx is not None:
        return ctx
    with _QUEUE.lock:
        if _QUEUE.waiting >= _QUEUE.limit():
            raise Answer(503, MAX_QUEUE_MESSAGE)
        _QUEUE.waiting += 1
    cancelled = threading.Event()
    try:
        return await anyio.to_thread.run_sync(residency.acquire, r, True, cancelled)
    except Refusal as e:
        raise Answer(500, e.message) from None
    finally:
        with _QUEUE.lock:
            _QUEUE.waiting -= 1


def _keep_alive(request: Request, m, req: dict, was_running: bool) -> None:
    """sched.go:379/:407: a request's keep_alive replaces the model's; a model loaded by a request without one
    gets OLLAMA_KEEP_ALIVE's (5 minutes)."""
    residency = request.app.state.residency
    if "keep_alive" in req:
        residency.set_keep_alive(m.resident, ka.to_seconds(ka.from_json(req["keep_alive"])))
    elif not was_running:
        residency.set_keep_alive(m.resident, ka.to_seconds(ka.default_ns()))


def _has_tools(ctx) -> bool:
    """The tools capability (images.go:112): here, whether the GGUF's chat template takes tool calls."""
    try:
        return bool(ctx.templates.caps().get("supports_tool_calls"))
    except Exception:
        return False


# --- the handlers -----------------------------------------------------------------------------------------------

async def _bind(request: Request, struct: str):
    """gin's ShouldBindJSON into the api struct (on a worker thread): the request's fields, or the 400 answer
    (io.EOF: `missing request body`; else Go's decode error)."""
    try:
        return await off_loop(gojson.bind, await request.body(), struct)
    except gojson.BindError as e:
        return _error(400, "missing request body" if e.eof else e.message)


async def chat(request: Request) -> Response:
    return await _handle(request, chat=True)


async def generate(request: Request) -> Response:
    return await _handle(request, chat=False)


async def _handle(request: Request, chat: bool) -> Response:
    t_start = time.monotonic_ns()
    req = await _bind(request, "ChatRequest" if chat else "GenerateRequest")
    if isinstance(req, Response):
        return req
    top = req.get("top_logprobs", 0)
    if top < 0 or top > 20:
        return _error(400, "top_logprobs must be between 0 and 20")
    name = req.get("model", "")
    n = names.parse(name)
    if not n.valid:
        # routes.go:1873 (chat) / :194 (generate)
        return _error(400, "model is required") if chat else _error(404, f"model '{name}' not found")
    m = Catalog(request.app.state.residency).find(name)
    if m is None:
        return _error(404, f"model '{name}' not found")
    residency = request.app.state.residency
    r = residency.resolve(m.resident)
    empty = not req.get("messages") if chat else not req.get("prompt")
    ka_ns = ka.from_json(req["keep_alive"]) if "keep_alive" in req else None
    if empty and ka_ns == 0:
        # routes.go:1902 / :298: expire the runner
        if r is not None and r.running:
            await anyio.to_thread.run_sync(residency.unload, r.name)
        return _json(_done_only(chat, name, "unload"))
    if not chat:
        if req.get("raw") and (req.get("template") or req.get("system") or req.get("context")):
            return _error(400, "raw mode does not support template, system, or context")
        if isinstance(req.get("think"), str):
            return _error(400, f"think value {gojson.go_quote(req['think'])} is not supported for this model")
    think = req.get("think")
    if think is True or isinstance(think, str):
        # SmolLM2-like templates have no thinking tags (routes.go:1999 / :345)
        return _error(400, f"{gojson.go_quote(name)} does not support thinking")
    if not chat and req.get("suffix"):
        # the insert capability needs a template with .Suffix (images.go:117); a GGUF's Jinja template has none
        return _error(400, f"{n} does not support insert")
    try:
        opts = oopts.merged(m.parameters, req.get("options"))
    except oopts.OptionError as e:
        return _error(500, e.message)
    was_running = r.running
    try:
        ctx = await _lease(request, r)
    except Answer as e:
        return _error(e.status, e.message)
    released = False

    def release():
        nonlocal released
        if not released:
            released = True
            residency.release(r)
    try:
        _keep_alive(request, m, req, was_running)
        if chat and req.get("tools") and not _has_tools(ctx):
            release()
            return _error(400, f"{n} does not support tools")
        t_loaded = time.monotonic_ns()
        if empty:
            release()
            return _json(_done_only(chat, name, "load"))
        resp = await _run(request, ctx, m, req, opts, chat, name, t_start, t_loaded, release)
        return resp
    except Answer as e:
        release()
        return _error(e.status, e.message, e.streamed)
    except BaseException:
        release()
        raise


def _empty(chat: bool, name: str, done: bool, role: str = "assistant") -> dict:
    """A ChatResponse / GenerateResponse without text (Go's field order)."""
    d = {"model": name, "created_at": gojson.go_time()}
    if chat:
        d["message"] = {"role": role, "content": ""}
    else:
        d["response"] = ""
    d["done"] = done
    return d


def _done_only(chat: bool, name: str, reason: str) -> dict:
    d = _empty(chat, name, True)
    d["done_reason"] = reason
    return d


def _ollama_msgs(msgs: list) -> list:
    out = []
    for msg in msgs:
        d = {"role": msg.get("role", ""), "content": msg.get("content", "")}
        if msg.get("images"):
            d["images"] = msg["images"]
        out.append(d)
    return out


def _oai(msgs: list) -> list:
    return [{"role": x["role"], "content": x["content"]} for x in msgs]


async def _run(request, ctx, m, req, opts, chat, name, t_start, t_loaded, release) -> Response:
    from ...chat.request import ChatRequestError, parse_chat_request
    from .completion import make_tasks, next_event, parents, prepare
    from .families import OAI_CHAT, COMPLETION
    from .families.ollama import NDJSON, OllamaReply

    def build():
        # everything before the tasks are posted, on a worker thread: the prompt's rendering (chat_prompt renders
        # and tokenizes it once per message it tries), the format's grammar, the request step
        tok = ctx.tokenizer
        num_ctx = oopts.effective_ctx(opts, ctx.meta.n_ctx_train if hasattr(ctx.meta, "n_ctx_train") else 0,
                                      ctx.n_ctx_slot)
        truncate = req.get("truncate", True)
        fields = oopts.llama_fields(opts, num_ctx)

        def render(msgs):
            try:
                return parse_chat_request({"messages": _oai(msgs)}, ctx.templates, ctx.chat_options).prompt
            except ChatRequestError as e:
                raise Answer(500, e.message) from None

        def tokenize(s):
            return tok.tokenize(s, False, True)

        raw = bool(req.get("raw")) if not chat else False
        if not chat and not raw and req.get("template"):
            # routes.go:412 parses and runs a Go template; bankml renders the GGUF's chat template only
            raise Answer(501, "a request template (Go template syntax) is not reproduced by bankml yet")
        context = req.get("context") if not chat else None
        if chat:
            msgs = oprompt.chat_messages(m, _ollama_msgs(req.get("messages") or []))
        else:
            msgs = oprompt.generate_messages(m, req.get("system", ""), req.get("prompt", ""),
                                             req.get("images") or [], context is not None)
        use_chat = not raw and context is None
        if not raw:
            kept, n_images = oprompt.chat_prompt(msgs, render, tokenize, num_ctx, truncate)
            prompt_text = render(kept)
            if context is not None:
                prompt_text = "".join(text_piece(tok, t) for t in context) + prompt_text
        else:
            kept, n_images = msgs, 0
            prompt_text = req.get("prompt", "")
        if req.get("_debug_render_only"):
            d = _empty(chat, name, False, role="")      # routes.go:2076: a zero Message
            dbg = {"rendered_template": prompt_text}
            if n_images:
                dbg["image_count"] = n_images
            d["_debug_info"] = dbg
            return _json(d), None
        stream = req.get("stream", True)
        try:
            # llm/server.go Completion reads the format: inside the handler's goroutine
            fmt_fields = oopts.format_fields(req.get("format"), chat=use_chat)
        except oopts.FormatError as e:
            raise Answer(500, e.message, stream) from None
        body = dict(fields)
        shift, body["n_keep"] = oopts.context_shift(opts, req.get("shift"))
        body.update(fmt_fields)
        body["stream"] = stream
        logprobs = bool(req.get("logprobs"))
        top = req.get("top_logprobs", 0)
        if logprobs:
            body["n_probs"] = max(top, 1)
        if use_chat:
            body["messages"] = _oai(kept)
            family = OAI_CHAT
        else:
            body["prompt"] = prompt_text
            family = COMPLETION
        try:
            prep = prepare(ctx, body, family)
        except Refusal as e:
            raise Answer(e.status, e.message, stream) from None
        # the runner's truncation (runner.go:131), then the context of `-c num_ctx -np 1`
        try:
            prep.inputs[0] = oprompt.runner_truncate(prep.inputs[0], num_ctx, opts["num_keep"], truncate)
        except oprompt.PromptError as e:
            raise Answer(e.status, e.message, stream) from None
        n_ctx_task = min(slot_context(num_ctx, 1, False, ctx.meta.n_ctx_train if hasattr(ctx.meta, "n_ctx_train")
                                      else num_ctx)[1], ctx.n_ctx_slot)

        def context_of(generated: str):
            if raw:
                return None
            return tokenize(prompt_text + generated)

        reply = OllamaReply(chat, name, t_start, t_loaded, tok, fmt=prep.fmt, logprobs=logprobs, top_logprobs=top,
                            context_of=context_of, parsed=use_chat)
        return None, (prep, reply, stream, n_ctx_task, shift)

    shown, built = await off_loop(build)
    if shown is not None:              # _debug_render_only
        release()
        return shown
    prep, reply, stream, n_ctx_task, shift = built
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()
    tasks = make_tasks(ctx, prep, lambda i: (lambda ev: loop.call_soon_threadsafe(events.put_nowait, ev)))
    for t in tasks:
        t.n_ctx = n_ctx_task
        t.ctx_shift = shift
    for t in parents(tasks, prep):
        ctx.worker.submit_completion(t)

    def cancel():
        for t in tasks:
            t.cancelled.set()

    if not stream:
        try:
            while True:
                ev = await next_event(request, events, cancel)
                if ev is None:
                    return Response(status_code=499)
                if isinstance(ev, Error):
                    return _error(ev.status, ev.message)
                if isinstance(ev, Final):
                    return await off_loop(lambda: _json(reply.final(ev, gojson.go_time(), False)))
        finally:
            cancel()
            release()

    first = None
    while True:
        first = await events.get()
        if isinstance(first, Error):
            cancel()
            release()
            return _error(first.status, first.message, True)
        if isinstance(first, (Token, Final)):
            break
    framing = NDJSON(gojson.dumps)

    def token_chunk(ev):
        c = reply.chunk(ev, gojson.go_time())
        return None if c is None else framing.chunk(c)

    def final_chunk(ev):
        return framing.chunk(reply.final(ev, gojson.go_time(), True))

    async def gen():
        ev = first
        try:
            while True:
                if isinstance(ev, Error):
                    yield framing.chunk({"error": ev.message})
                    return
                if isinstance(ev, Token):
                    # a chunk with log probabilities, and the final one, are built on a worker thread
                    c = await off_loop(token_chunk, ev) if ev.probs is not None else token_chunk(ev)
                    if c is not None:
                        yield c
                elif isinstance(ev, Final):
                    yield await off_loop(final_chunk, ev)
                    return
                ev = await events.get()
        finally:
            cancel()
            release()

    return StreamingResponse(gen(), status_code=200, headers=dict(framing.headers))


def text_piece(tok, t: int) -> str:
    """Detokenize one token of `context` as Ollama's runner does (a piece, specials as text)."""
    return tok.token_to_piece(int(t), True).decode("utf-8", "replace")


async def embed(request: Request) -> Response:
    """EmbedHandler (server/routes.go:640): the inputs, the model, the options, the lease; no input only loads;
    each input's tokens by the runner's rules (bankml.server.ollama.embed), the vectors computed by the engine as
    llama-server computes them for the model's pooling (unnormalized), then Ollama's normalize and dimensions."""
    return await _embed(request, legacy=False)


async def embeddings(request: Request) -> Response:
    """EmbeddingsHandler (server/routes.go:803): one prompt, an invalid name 400, no prompt only loads; the
    runner's vector unnormalized as float64; every runner error 500."""
    return await _embed(request, legacy=True)


async def _embed(request: Request, legacy: bool) -> Response:
    t_start = time.monotonic_ns()          # checkpointStart (routes.go:641)
    req = await _bind(request, "EmbeddingRequest" if legacy else "EmbedRequest")
    if not isinstance(req, dict):
        return req
    name = req.get("model", "")
    if legacy:
        if not names.parse(name).valid:
            return _error(400, "model is required")              # routes.go:815
        texts = [req["prompt"]] if req.get("prompt") else []
    else:
        try:
            texts = oembed.inputs(req.get("input"))
        except oembed.EmbedError as e:
            return _error(e.status, e.message)
    m = Catalog(request.app.state.residency).find(name)
    if m is None:
        # scheduleRunner's GetModel: os.ErrNotExist -> handleScheduleError (routes.go:2363)
        return _error(404, f"model {gojson.go_quote(name)} not found, try pulling it first")
    try:
        opts = oopts.merged(m.parameters, req.get("options"))
    except oopts.OptionError as e:
        return _error(500, e.message)
    residency = request.app.state.residency
    r = residency.resolve(m.resident)
    was_running = r.running
    try:
        ctx = await _lease(request, r)
    except Answer as e:
        return _error(e.status, e.message)
    try:
        _keep_alive(request, m, req, was_running)
        t_loaded = time.monotonic_ns()
        if not texts:
            # routes.go:684 / :829: an empty request loads the model
            return _json({"embedding": []} if legacy else {"model": name, "embeddings": []})

        def run():
            header = ctx.header
            pooling = oembed.pooling(header)
            if pooling == "rank":
                raise oembed.EmbedError(501, "a ranking model's embeddings are not reproduced by bankml")
            n_train = int(getattr(ctx.meta, "n_ctx_train", 0) or 0)
            runner = oembed.Runner(ctx.tokenizer, header, opts["num_ctx"],
                                   oopts.effective_ctx(opts, n_train, ctx.n_ctx_slot))
            truncate = req.get("truncate", True)
            if legacy:
                lists = [runner.sequence(texts[0])]
            else:
                lists = [runner.tokens(t, truncate) for t in texts]
            try:
                results = engine_embeddings.compute(ctx, lists, pooling=pooling, normalize=-1, cache_prompt=False)
            except Refusal as e:
                raise oembed.EmbedError(e.status, e.message.strip()) from None
            vecs = [res.vectors[0] for res in results]
            if legacy:
                return oembed.embedding_body(vecs[0])
            d = req.get("dimensions", 0)
            vecs = [oembed.dimensions(oembed.normalize(v), d) for v in vecs]
            count = sum(len(t) for t in lists)
            return oembed.embed_body(name, vecs, time.monotonic_ns() - t_start, t_loaded - t_start, count)

        try:
            body = await off_loop(run)
        except oembed.EmbedError as e:
            # EmbeddingsHandler answers every runner error 500 (routes.go:833)
            return _error(500 if legacy else e.status, e.message)
        return Response(body, status_code=200, media_type=JSON_TYPE)
    finally:
        residency.release(r)


routes = [Route("/", root, methods=["GET", "HEAD"]), Route("/api/version", version, methods=["GET", "HEAD"]),
          Route("/api/chat", chat, methods=["POST"]), Route("/api/generate", generate, methods=["POST"]),
          Route("/api/embed", embed, methods=["POST"]), Route("/api/embeddings", embeddings, methods=["POST"])]
