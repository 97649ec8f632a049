"""The generation routes: llama-server's handle_completions_impl (server-context.cpp) over
bankml.server.generation, one route per (paths, family) row of bankml.server.api.families.TABLE.

    prepared = prepare(ctx, body, family)   # family: a families.base.Family; raises bankml.server.http.Refusal
    tasks = make_tasks(ctx, prepared, emit_for); parents(tasks, prepared) go to ctx.worker
    reply = Reply.start(family, ctx, prepared)    # the family's JSON for the events that come back

The order of llama-server's checks: the body is parsed (nlohmann's errors: 500), the family's request step (the
chat step, bankml.chat.request: its statuses), then, for every prompt, tokenization (`prompt` as a string, token
ids, a mixed array, {"prompt_string": ...}, or an array of those: one task each) and the request fields
(bankml.sampling.from_request): any failure here is a 400 with the exception's text. Then the worker: slot choice,
"Prompt contains invalid tokens", "Failed to initialize samplers: ...", the context check, generation.

Non-stream: the answer once every task is final (the family merges several results: an array for several
/completion prompts, merged choices for the OpenAI shapes); the socket is polled every second, a closed one
cancels the tasks. Stream: the first event decides: an error is a plain JSON answer, anything else opens the
stream in the family's framing (SSE: `data: <json>\\n\\n` per chunk, `data: [DONE]` for the OpenAI shapes; its
keep-alive every --sse-ping-interval seconds while waiting); a client that goes away cancels the generation
before its next token. This module knows no family's JSON; bankml.server.engine_api uses the same request step.

The event loop only moves bytes and events: the body's parse and the request step (the chat template, the
schema's grammar, tokenization) run on a worker thread (http.off_loop), and so do the final answer's JSON and
every stream chunk that carries more than a token's text (probabilities, the final chunks).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import anyio

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ... import sampling
from ...cxx import nljson
from ..generation import CompletionTask, Error, Final, Token
from ..http import Refusal, json_response, off_loop
from ..routing import context_of
from .families import TABLE
from .families.base import Family, Reply, completion_id
from .stream_sessions import conv_id_from_headers, tee

log = logging.getLogger("bankml.server")


# --- prompts -------------------------------------------------------------------------------------------------

def _is_int(e) -> bool:
    return isinstance(e, int) and not isinstance(e, bool)


def _tokenize_mixed(tok, p) -> list[int]:
    from .tokenize import to_int32
    if isinstance(p, list):
        out, first = [], True
        for e in p:
            if isinstance(e, str):
                out += tok.tokenize(e, first, True)
            else:
                out.append(to_int32(e))
            first = False
        return out
    if not isinstance(p, str):
        raise nljson.type_must_be("string", p)
    return tok.tokenize(p, True, True)


def _subprompt(tok, p) -> list[int]:
    if isinstance(p, str) or (isinstance(p, list) and any(isinstance(e, str) for e in p)
                              and any(_is_int(e) for e in p)):
        return _tokenize_mixed(tok, p)
    if isinstance(p, list) and all(_is_int(e) for e in p):
        from .tokenize import to_int32
        return [to_int32(e) for e in p]
    if isinstance(p, dict) and "prompt_string" in p:
        if "multimodal_data" in p:
            raise Refusal(400, "Multimodal data provided, but model does not support multimodal requests.")
        return _tokenize_mixed(tok, p["prompt_string"])
    raise Refusal(400, "\"prompt\" elements must be a string, a list of tokens, a JSON object containing a "
                       "prompt string, or a list of mixed strings & tokens.")


def tokenize_prompts(tok, prompt) -> list[list[int]]:
    """tokenize_input_prompts (add_special and parse_special on)."""
    if isinstance(prompt, list) and not any(_is_int(e) for e in prompt):
        out = [_subprompt(tok, p) for p in prompt]
    else:
        out = [_subprompt(tok, prompt)]
    if not out:
        raise Refusal(400, "\"prompt\" must not be empty")
    return out


# --- a request -----------------------------------------------------------------------------------------------

@dataclass
class Prepared:
    """A request after llama-server's HTTP-thread steps: its family, the fields the tasks read, one token list
    and one bankml.sampling.Params per task (result index order: children follow their parent), the groups
    (each parent's result index first, then its children's), the chat response format and assistant prefill,
    the completion id every chunk and choice shares, and whether it streams."""
    family: Family
    data: dict
    inputs: list
    params: list
    groups: list
    fmt: object = None
    prefix: str = ""
    stream: bool = False
    cmpl_id: str = field(default_factory=completion_id)


def parse_body(raw: bytes):
    try:
        return nljson.loads(raw)
    except nljson.JSONParseError as e:
        raise Refusal(500, str(e)) from None


def prepare(ctx, body, family: Family, begin=None) -> Prepared:
    """Everything llama-server does on the HTTP thread before posting the tasks. Raises Refusal.
    `begin()` is called where handle_completions_impl starts (after the family's request step): a stream session
    opens there."""
    req = family.read(ctx, body)
    data = req.data
    if begin is not None:
        begin()
    try:
        if not isinstance(data, dict):
            raise nljson.NLError("[json.exception.type_error.304] cannot use at() with " + nljson.type_name(data))
        if "prompt" not in data:
            raise nljson.key_not_found("prompt")
        inputs = tokenize_prompts(ctx.tokenizer, data["prompt"])
        params = [sampling.from_request(data, ctx.sampling_defaults, ctx.tokenizer) for _ in inputs]
    except Refusal:
        raise
    except sampling.RequestError as e:
        raise Refusal(e.status, e.message) from None
    except Exception as e:  # handle_completions_impl: every exception here is a 400
        raise Refusal(400, getattr(e, "message", None) or str(e)) from None
    groups = [[i] for i in range(len(inputs))]
    if params and params[0].n_cmpl > 1:
        inputs, params, groups = with_children(ctx, inputs, params)
    stream = data.get("stream") if isinstance(data.get("stream"), bool) else False
    return Prepared(family, data, inputs, params, groups, req.fmt, req.prefix, stream)


def with_children(ctx, inputs, params):
    """n_cmpl > 1: each prompt's task gets n_cmpl - 1 children (server_task::add_child): the same prompt and
    fields, id_slot -1, the seed + 1, + 2, ... unless it is the default (random) one; results are indexed parent
    first, then its children, prompt after prompt. Refused (501) where bankml's per-slot caches cannot be
    llama-server's cells: weights the engine says it cannot (Model.supports_multi_choice), a unified KV cache (the
    sequences share one pool and its cell order), several prompts whose groups fit the slots together (llama-server decodes them side by side; bankml runs one request's tasks
    one after the other), and an empty prompt (llama-server answers the parent, the children wait forever)."""
    import copy
    from ...sampling.params import DEFAULT_SEED
    if ctx.kv_unified:
        raise Refusal(501, "n > 1 (several choices) with a unified KV cache (-kvu, or -np auto) is not "
                           "reproduced by bankml yet", "not_supported_error")
    if not ctx.model.supports_multi_choice:
        other = ctx.model.multi_choice_blockers
        raise Refusal(501, f"n > 1 (several choices) with {', '.join(other)} weights is not reproduced by "
                           "bankml yet", "not_supported_error")
    if len(inputs) > 1 and 2 * params[0].n_cmpl <= ctx.n_slots:
        raise Refusal(501, "n > 1 (several choices) for several prompts whose choices run at the same time "
                           "is not reproduced by bankml yet", "not_supported_error")
    if any(not t for t in inputs):
        raise Refusal(501, "n > 1 (several choices) with an empty prompt is not reproduced by bankml yet",
                      "not_supported_error")
    out_inputs, out_params, groups = [], [], []
    for tokens, p in zip(inputs, params):
        group = [len(out_inputs)]
        out_inputs.append(tokens)
        out_params.append(p)
        for j in range(p.n_cmpl - 1):
            c = copy.copy(p)
            c.id_slot = -1
            if p.seed != DEFAULT_SEED:
                c.seed = (p.seed + j + 1) & 0xFFFFFFFF
            group.append(len(out_inputs))
            out_inputs.append(tokens)
            out_params.append(c)
        groups.append(group)
    return out_inputs, out_params, groups


def make_tasks(ctx, prep: Prepared, emit_for) -> list[CompletionTask]:
    """Every task of the request, by result index (children follow their parent; submit the parents only:
    parents(tasks, prep))."""
    from ...sampling.sampler import Sampler
    from ..generation import message_spans
    tasks = []
    # the message spans where context checkpoints are cut (models with sliding-window layers only)
    delims = prep.data.get("message_delimiters") if getattr(ctx, "checkpoints_on", False) else None
    for i, (tokens, params) in enumerate(zip(prep.inputs, prep.params)):
        def make_sampler(params=params):
            return Sampler(params, ctx.tokenizer)
        t = CompletionTask(tokens, params, make_sampler, emit_for(i), index=i, probs=token_probs,
                           tokenizer=ctx.tokenizer,
                           spans=message_spans(ctx.tokenizer, delims, tokens) if delims else [])
        tasks.append(t)
    for g in prep.groups:
        tasks[g[0]].children = [tasks[i] for i in g[1:]]
    return tasks


def parents(tasks: list[CompletionTask], prep: Prepared) -> list[CompletionTask]:
    """The tasks posted to the queue (a parent brings its children)."""
    return [tasks[g[0]] for g in prep.groups]


def token_probs(task, logits, sampler, tok):
    """populate_token_probs through bankml.sampling.probs: (the sampled token's p, the top candidates)."""
    from ...sampling import probs as sprobs
    from ..generation import TokenProbs
    tk = task.tokenizer
    n = task.params.n_probs
    if task.params.post_sampling_probs:
        tp = sampler.post_sampling(n, tok)
    else:
        tp = sprobs.pre_sampling(logits, n, tok)
    return TokenProbs(tok, float(tp.token_prob), b"", [(int(i), tk.token_to_piece(int(i), False), float(p))
                                                       for i, p in zip(tp.ids, tp.probs)])


# --- the HTTP side -------------------------------------------------------------------------------------------

async def _run(request: Request, family: Family) -> Response:
    ctx = context_of(request)
    t0 = time.monotonic()
    streams = request.app.state.streams
    conv_id = conv_id_from_headers(request.scope.get("headers", []))
    opened = []
    # the request step runs on a worker thread: a conversation without a session gets it now, so that a reader
    # who asks for it meanwhile finds it (before, the step ran on the loop and no reader came in between); one
    # whose request is refused before its stream begins is evicted again
    early = streams.create_or_replace(conv_id) if conv_id and streams.get(conv_id) is None else None

    def open_session():
        if early is not None and streams.get(conv_id) is early:
            return early
        return streams.create_or_replace(conv_id)

    def begin():
        # server_res_spipe::set_req: an X-Conversation-Id opens (or replaces) the conversation's stream session
        # (on the loop)
        if conv_id:
            opened.append(anyio.from_thread.run_sync(open_session))

    def evict():
        # on_complete without a stream: the conversation's session is evicted (by its id, as llama-server does)
        if opened or (early is not None and streams.get(conv_id) is early):
            streams.evict(conv_id)

    raw = await request.body()
    try:
        prep = await off_loop(lambda: prepare(ctx, parse_body(raw), family, begin))
    except Refusal as e:
        evict()
        _log(request, e.status, t0)
        return json_response(family.refused(e), e.status)
    try:
        return await _answer(request, ctx, prep, t0, opened[0] if opened else None)
    finally:
        if not (opened and opened[0].on_cancel is not None):
            evict()


async def next_event(request: Request, events: asyncio.Queue, cancel):
    """The next event of a request answered without a stream; the socket is polled every second, and a client
    that has gone cancels the tasks (cancel()) and gets None."""
    while True:
        try:
            return await asyncio.wait_for(events.get(), timeout=1.0)
        except asyncio.TimeoutError:
            if await request.is_disconnected():
                cancel()
                return None


async def _answer(request: Request, ctx, prep: Prepared, t0: float, session) -> Response:
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()

    def emit_for(i):
        return lambda ev: loop.call_soon_threadsafe(events.put_nowait, (i, ev))

    tasks = make_tasks(ctx, prep, emit_for)
    for t in parents(tasks, prep):
        ctx.worker.submit_completion(t)
    reply = Reply.start(prep.family, ctx, prep)

    state = {"stopped": False}

    def cancel():
        # server_response_reader::stop(): unfinished tasks get CANCEL tasks, each numbered by the task queue
        if not state["stopped"]:
            state["stopped"] = True
            for _ in tasks:
                ctx.worker.new_id()
        for t in tasks:
            t.cancelled.set()

    if not prep.stream:
        finals: dict[int, Final] = {}
        while len(finals) < len(tasks):
            got = await next_event(request, events, cancel)
            if got is None:
                return Response(status_code=499)
            i, ev = got
            if isinstance(ev, Error):
                cancel()
                _log(request, ev.status, t0)
                return json_response(prep.family.refused(ev), ev.status)
            if isinstance(ev, Final):
                finals[i] = ev
        state["stopped"] = True
        answer = await off_loop(lambda: json_response(reply.merge([reply.final(i, finals[i])
                                                                   for i in range(len(tasks))])))
        _log(request, 200, t0, finals)
        return answer

    # stream: the first event decides between a JSON error and the SSE stream
    first = await events.get()
    if isinstance(first[1], Error):
        cancel()
        _log(request, first[1].status, t0)
        return json_response(prep.family.refused(first[1]), first[1].status)
    framing = prep.family.framing
    keep_alive = framing.ping()
    ping = ctx.cfg.sse_ping_interval if keep_alive is not None else 0

    def chunk_bytes(i, ev) -> list[bytes]:
        return [framing.chunk(c) for c in reply.chunks(i, ev)]

    async def wire_chunks(i, ev) -> list[bytes]:
        # a token's text (a few hundred bytes) is framed on the loop; its probabilities and the final chunks
        # (which may carry them all) on a worker thread
        if isinstance(ev, Token) and ev.probs is None:
            return chunk_bytes(i, ev)
        return await off_loop(chunk_bytes, i, ev)

    async def gen():
        pending = [first]
        n_final = 0
        finals = {}
        try:
            while True:
                if pending:
                    i, ev = pending.pop(0)
                elif not events.empty():         # already queued: no waiter task for it
                    i, ev = events.get_nowait()
                else:
                    try:
                        i, ev = await asyncio.wait_for(events.get(), timeout=ping if ping > 0 else None)
                    except asyncio.TimeoutError:
                        yield keep_alive
                        continue
                if isinstance(ev, Error):
                    yield framing.chunk(prep.family.refused(ev))
                    return
                for c in await wire_chunks(i, ev):
                    yield c
                if isinstance(ev, Final):
                    finals[i] = ev
                    n_final += 1
                    if n_final == len(tasks):
                        state["stopped"] = True
                        break
            end = framing.end()
            if end:
                yield end
            _log(request, 200, t0, finals)
        finally:
            cancel()

    body = gen() if session is None else tee(session, gen())
    return StreamingResponse(body, status_code=200, headers=dict(framing.headers))


def _log(request: Request, status: int, t0: float, finals: dict | None = None) -> None:
    dt = (time.monotonic() - t0) * 1000
    extra = ""
    if finals:
        n_p = sum(f.n_prompt_tokens for f in finals.values())
        n_c = sum(f.n_prompt_cached for f in finals.values())
        n_g = sum(f.n_decoded for f in finals.values())
        pps = max((f.stats["prompt_per_second"] for f in finals.values()), default=0.0)
        tps = max((f.stats["predicted_per_second"] for f in finals.values()), default=0.0)
        extra = f" prompt {n_p} (cached {n_c}) gen {n_g} | {pps:.1f} pp t/s {tps:.1f} tg t/s"
    log.info("%s %s %d %.1f ms%s", request.method, request.url.path, status, dt, extra)


def handler(family: Family):
    """The route of one response family."""
    async def generate(request: Request) -> Response:
        return await _run(request, family)
    generate.__name__ = family.name
    return generate


routes = [Route(path, handler(family), methods=["POST"]) for paths, family in TABLE for path in paths]
