"""llama-server b11192's embedding and rerank routes (tools/server/server-context.cpp handle_embeddings_impl and
post_rerank; server-common.cpp format_embeddings_response_oaicompat, format_response_rerank, format_prompt_rerank).

    POST /embedding, /embeddings        llama-server's shape: [{"index", "embedding": [[...], ...]}, ...]
    POST /v1/embeddings                 OpenAI's: {"model", "object": "list", "usage", "data": [...]} (float / base64)
    POST /rerank, /reranking, /v1/rerank, /v1/reranking   Jina's shape ({"model", ..., "results"}), or TEI's (a
                                        plain array, "score", return_text) when the body has "texts"

The checks in llama-server's order: --embeddings (--reranking with rank pooling for rerank), else its 501;
/v1/embeddings refuses pooling none (400); the body (nlohmann's parse errors, 500); "input" (or "content", which
answers llama-server's own shape), encoding_format, tokenization as tokenize_input_prompts does it (add_special and
parse_special on; its errors are 500s here: the handler has no try), "Input content cannot be empty", embd_normalize
(get<int>). Each input is one task on the slots (bankml.server.embeddings); the answer waits for all of them, and a
client that goes away cancels them.

Several inputs at once with more than one slot: llama-server gives each input its own slot and decodes the prompts
that fit n_batch together, several sequences in one ubatch, and that changes the bits: mean and cls vectors (at -np N
split_equal cuts unequal sequences into equal chunks), rank scores (sequence i's score is element i of the ubatch's
first pooled row), and even last-token rows once cached prefixes mix with new tokens (the attention path follows the
ubatch's size). bankml runs those steps too (bankml.server.embeddings.run_group), on a split KV cache (-np N without
-kvu) and on a unified one (-kvu, -np auto: one stream, Model.embed_unified); where it cannot (a unified cache of
another graph than llama's) such a request is refused with a 501 that says why. With one slot (-np 1) the inputs run
one after another, as there.
"""

from __future__ import annotations

import asyncio
import base64

import numpy as np
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...cxx import nljson
from ...cxx._stl import std_sort
from .. import embeddings
from ..batching import unbatched_reason
from ..generation import Error
from ..http import Refusal, json_response, off_loop
from ..routing import context_of
from .completion import next_event, parse_body, tokenize_prompts

NOT_SUPPORTED = "not_supported_error"


def _floats(vec) -> np.ndarray:
    # a float vector in nlohmann's json: each float widened to double (bankml.server.http writes such an array in
    # compiled code)
    return np.asarray(vec, dtype=np.float32).astype(np.float64)


def _get_int(v) -> int:
    """get<int>(): a number (a float cut toward zero) or a boolean, else nlohmann's type error."""
    if isinstance(v, (bool, int, float)):
        return int(v)
    raise nljson.type_must_be("number", v)


def _server_error(e: Exception) -> Refusal:
    """ex_wrapper: an exception thrown inside the handler is a 500 with its message."""
    if isinstance(e, Refusal):
        return Refusal(500, e.message, "server_error")
    return Refusal(500, getattr(e, "message", None) or str(e), "server_error")


class Embeddings:
    """A request to /embedding(s) or /v1/embeddings after the HTTP-thread steps."""

    def __init__(self, ctx, raw: bytes, oai: bool):
        cfg = ctx.cfg
        if not cfg.embedding:
            raise Refusal(501, "This server does not support embeddings. Start it with `--embeddings`",
                          NOT_SUPPORTED)
        self.pooling = embeddings.pooling_of(cfg, ctx.header)
        if oai and self.pooling == "none":
            raise Refusal(400, "Pooling type 'none' is not OAI compatible. Please use a different pooling type",
                          "invalid_request_error")
        body = parse_body(raw)
        try:
            if nljson.contains(body, "input"):
                prompt = body["input"]
            elif nljson.contains(body, "content"):
                oai = False                 # "content" is not OpenAI's field: llama-server's own shape
                prompt = body["content"]
            else:
                raise Refusal(400, "\"input\" or \"content\" must be provided", "invalid_request_error")
            use_base64 = False
            if nljson.contains(body, "encoding_format"):
                fmt = nljson.get_str(body["encoding_format"])
                if fmt == "base64":
                    use_base64 = True
                elif fmt != "float":
                    raise Refusal(400, "The format to return the embeddings in. Can be either float or base64",
                                  "invalid_request_error")
            try:
                token_lists = tokenize_prompts(ctx.tokenizer, prompt)
            except (Refusal, nljson.NLError) as e:
                raise _server_error(e) from None
            if any(not t for t in token_lists):
                raise Refusal(400, "Input content cannot be empty", "invalid_request_error")
            normalize = cfg.embd_normalize
            if nljson.contains(body, "embd_normalize"):
                normalize = _get_int(body["embd_normalize"])
        except nljson.NLError as e:
            raise _server_error(e) from None
        if self.pooling == "rank":
            # send_embedding reads n_embd floats of a rank-pooled sequence, which holds n_cls_out (1): past its end
            raise Refusal(501, "embeddings with --pooling rank are not reproduced by bankml: llama-server reads past "
                               "the rank score's buffer there (use /rerank)", NOT_SUPPORTED)
        _one_at_a_time(ctx, len(token_lists))
        self.body, self.oai, self.base64 = body, oai, use_base64
        self.token_lists, self.normalize = token_lists, normalize
        self.model_name = ctx.meta.name

    def answer(self, results: list) -> object:
        if not self.oai:
            return [{"index": r.index, "embedding": [_floats(v) for v in r.vectors]} for r in results]
        data, n_tokens = [], 0
        for i, r in enumerate(results):
            if self.base64:
                raw = np.asarray(r.vectors[0], dtype="<f4").tobytes()
                data.append({"embedding": base64.b64encode(raw).decode("ascii"), "index": i, "object": "embedding",
                             "encoding_format": "base64"})
            else:
                data.append({"embedding": _floats(r.vectors[0]), "index": i, "object": "embedding"})
            n_tokens += r.n_tokens
        return {"model": _model(self.body, self.model_name), "object": "list",
                "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}, "data": data}


def _model(body, default: str) -> str:
    v = body.get("model") if isinstance(body, dict) else None
    return v if isinstance(v, str) else default


def _one_at_a_time(ctx, n_inputs: int) -> None:
    """Refuses several inputs on several slots that bankml cannot decode together as llama-server does (the reason
    batching.unbatched_reason gives: a graph other than llama's)."""
    if n_inputs > 1 and ctx.n_slots > 1 and not embeddings.batched(ctx):
        why = unbatched_reason(ctx)
        raise Refusal(501, f"{n_inputs} inputs with {ctx.n_slots} slots: llama-server decodes their prompts together "
                           f"(several sequences in one ubatch), which changes the vectors and scores, and bankml does "
                           f"not reproduce that with {why}; send one input per request, or serve with -np 1 (or -np "
                           "N without -kvu)", NOT_SUPPORTED)


def _string_list(v):
    # get<std::vector<std::string>>(), or None where nlohmann would throw
    if isinstance(v, list) and all(isinstance(e, str) for e in v):
        return v
    return None


class Rerank:
    """A request to /rerank (and its aliases) after the HTTP-thread steps."""

    def __init__(self, ctx, raw: bytes):
        cfg = ctx.cfg
        if not cfg.embedding or embeddings.pooling_of(cfg, ctx.header) != "rank":
            raise Refusal(501, "This server does not support reranking. Start it with `--reranking`", NOT_SUPPORTED)
        body = parse_body(raw)
        self.tei = nljson.contains(body, "texts")
        if not (isinstance(body, dict) and "query" in body):
            raise Refusal(400, "\"query\" must be provided", "invalid_request_error")
        query = body["query"]
        if not isinstance(query, str):
            raise Refusal(400, "\"query\" must be a string", "invalid_request_error")
        texts = _string_list(body.get("texts")) if body.get("texts") is not None else None
        docs = _string_list(body.get("documents")) if body.get("documents") is not None else None
        documents = docs if docs is not None else (texts if texts is not None else [])
        if not documents:
            raise Refusal(400, "\"documents\" must be a non-empty string array", "invalid_request_error")
        top_n = body.get("top_n")
        self.top_n = _get_int(top_n) if isinstance(top_n, (bool, int, float)) else len(documents)
        self.top_n = ((self.top_n + (1 << 31)) % (1 << 32)) - (1 << 31)       # an int
        self.return_text = self.tei and body.get("return_text") is True
        self.token_lists = [prompt_tokens(ctx, query, d) for d in documents]
        _one_at_a_time(ctx, len(self.token_lists))
        self.body, self.documents, self.model_name = body, documents, ctx.meta.name

    def answer(self, results: list) -> object:
        label = "score" if self.tei else "relevance_score"
        elements, n_tokens = [], 0
        for r in results:
            elem = {"index": r.index, label: r.score}
            n_tokens += r.n_tokens
            if self.return_text:
                elem["text"] = self.documents[r.index]
            elements.append(elem)
        std_sort(elements, lambda e: e[label])
        if self.top_n < 0:
            # elements.resize(size_t(top_n)): more than a vector can hold
            raise Refusal(500, "vector::_M_default_append", "server_error")
        elements = elements[:min(self.top_n, len(elements))]
        if self.tei:
            return elements
        return {"model": _model(self.body, self.model_name), "object": "list",
                "usage": {"prompt_tokens": n_tokens, "total_tokens": n_tokens}, "results": elements}


def prompt_tokens(ctx, query: str, doc: str) -> list[int]:
    """format_prompt_rerank: the GGUF's rerank template with {query} and {document} filled in (specials parsed),
    else BOS? query EOS? SEP? document EOS? as the vocabulary adds them (the texts without specials)."""
    tok = ctx.tokenizer
    tmpl = ctx.header.get("tokenizer.chat_template.rerank")
    if isinstance(tmpl, str):
        return tok.tokenize(tmpl.replace("{query}", query).replace("{document}", doc), False, True)
    eos = tok.eos_id if tok.eos_id is not None and tok.eos_id >= 0 else tok.sep_id
    out = [tok.bos_id] if tok.add_bos else []
    out += tok.tokenize(query, False, False)
    if tok.add_eos:
        out.append(eos)
    if tok.add_sep:
        out.append(tok.sep_id)
    out += tok.tokenize(doc, False, False)
    if tok.add_eos:
        out.append(eos)
    return out


async def _run(request: Request, ctx, req, rerank: bool) -> Response:
    """Post one task per input and wait for all of them (rd.wait_for_all): the first error answers; a client that
    goes away cancels the rest."""
    loop = asyncio.get_running_loop()
    events: asyncio.Queue = asyncio.Queue()
    tasks = embeddings.make_tasks(req.token_lists, getattr(req, "pooling", "rank"), getattr(req, "normalize", 2),
                                  rerank, lambda i: lambda ev: loop.call_soon_threadsafe(events.put_nowait, ev))

    def cancel():
        for t in tasks:
            t.cancelled.set()

    embeddings.submit(ctx, tasks)
    results = {}
    while len(results) < len(tasks):
        ev = await next_event(request, events, cancel)
        if ev is None:
            return Response(status_code=499)
        if isinstance(ev, Error):
            cancel()
            return ev.response()
        results[ev.index] = ev
    ordered = [results[i] for i in range(len(tasks))]
    return await off_loop(lambda: json_response(req.answer(ordered)))


def _route(make, rerank: bool):
    async def handler(request: Request) -> Response:
        ctx = context_of(request)
        raw = await request.body()
        try:
            req = await off_loop(make, ctx, raw)
        except Refusal as e:
            return e.response()
        return await _run(request, ctx, req, rerank)
    return handler


_embedding = _route(lambda ctx, raw: Embeddings(ctx, raw, oai=False), False)
_embedding_oai = _route(lambda ctx, raw: Embeddings(ctx, raw, oai=True), False)
_rerank = _route(Rerank, True)

routes = [Route("/embedding", _embedding, methods=["POST"]), Route("/embeddings", _embedding, methods=["POST"]),
          Route("/v1/embeddings", _embedding_oai, methods=["POST"])] + [
    Route(p, _rerank, methods=["POST"]) for p in ("/rerank", "/reranking", "/v1/rerank", "/v1/reranking")]
