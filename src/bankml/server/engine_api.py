"""`bankml.Engine`: bankml-serve's answers in-process, with no HTTP in between.

    with bankml.Engine(["-m", path, "-c", "4096", "-np", "1"]) as eng:     # llama-server's flags (default model
        answer = eng.chat({"messages": [...], "temperature": 0})          #  when there is no -m)
        for chunk in eng.chat_stream({"messages": [...]}):                 # the SSE chunks, as dicts
            ...
        eng.completion({"prompt": "..."}) ; eng.completions({...})         # /completion and /v1/completions
        eng.embeddings({"input": [...]}) ; eng.rerank({"query": ..., "documents": [...]})   # with --embeddings /
                                                                           #  --reranking: /v1/embeddings, /rerank

Each call goes through the same request step, worker thread, slots and response families as the HTTP routes
(bankml.server.api.completion, bankml.server.api.families), so `chat()` returns the object /v1/chat/completions
would answer (its created, id and timings are this call's). A refusal raises EngineError (a
bankml.server.http.Refusal) carrying llama-server's status and error body.

The model file is checked before every request, as bankml-serve's residency checks it: a file whose identity
(device, inode, size, mtime) moved since the load verified it, or whose map faulted (it was cut under the
engine), is refused with a 500 EngineError; a new Engine verifies the file again.
"""

from __future__ import annotations

import queue

from .api import completion as api
from .api.families import COMPLETION, OAI_CHAT, OAI_COMPLETIONS
from .api.families.base import Family, Reply
from .generation import Error, Final
from ..errors import ModelFileChanged
from .http import Refusal
from .residency import file_identity


class EngineError(Refusal):
    """A request llama-server would refuse: `status` and `body` ({"error": {...}}) as the HTTP answer has them
    (a bankml.server.http.Refusal: `message`, `type` and `extra` too)."""

    def __init__(self, status: int, body: dict):
        err = dict(body["error"])
        message, etype = err.pop("message"), err.pop("type", None)
        err.pop("code", None)
        super().__init__(status, message, etype, **err)
        self.body = body
        self.args = (f"{status}: {message}",)

    @classmethod
    def of(cls, refusal: Refusal) -> "EngineError":
        return cls(refusal.status, refusal.json())

    def __str__(self) -> str:
        return self.args[0]


class Engine:
    def __init__(self, argv: list[str] | None = None):
        from .context import ServerContext
        from .flags import parse_flags
        self.ctx = ServerContext.load(parse_flags(list(argv or [])))
        self._identity = file_identity(self.ctx.path)
        self.ctx.start()

    # -- requests
    def chat(self, body: dict) -> dict:
        return self._answer(dict(body, stream=False), OAI_CHAT)

    def chat_stream(self, body: dict):
        return self._stream(dict(body, stream=True), OAI_CHAT)

    def completion(self, body: dict):
        return self._answer(dict(body, stream=False), COMPLETION)

    def completion_stream(self, body: dict):
        return self._stream(dict(body, stream=True), COMPLETION)

    def completions(self, body: dict) -> dict:
        return self._answer(dict(body, stream=False), OAI_COMPLETIONS)

    def completions_stream(self, body: dict):
        return self._stream(dict(body, stream=True), OAI_COMPLETIONS)

    def embeddings(self, body: dict) -> dict:
        """/v1/embeddings' object (start the Engine with --embeddings)."""
        return self._embed(body, True)

    def embedding(self, body: dict) -> list:
        """/embeddings' list (llama-server's own shape; with pooling none a row per token)."""
        return self._embed(body, False)

    def rerank(self, body: dict):
        """/rerank's object (start the Engine with --reranking), or TEI's list when the body has "texts"."""
        from .api.embeddings import Rerank
        return self._run_embedding(lambda raw: Rerank(self.ctx, raw), body, True)

    # -- plumbing
    def _embed(self, body: dict, oai: bool):
        from .api.embeddings import Embeddings
        return self._run_embedding(lambda raw: Embeddings(self.ctx, raw, oai=oai), body, False)

    def _run_embedding(self, make, body: dict, rerank: bool):
        import json

        from . import embeddings
        self._check_file()
        try:
            req = make(json.dumps(body, ensure_ascii=False).encode())
            results = embeddings.compute(self.ctx, req.token_lists, getattr(req, "pooling", "rank"),
                                         getattr(req, "normalize", 2), rerank)
        except Refusal as e:
            raise EngineError.of(e) from None
        return _plain(req.answer(results))

    def _check_file(self) -> None:
        try:
            self.ctx.model.check_file()
            if file_identity(self.ctx.path) == self._identity:
                return
        except (OSError, ModelFileChanged):
            pass
        raise EngineError.of(Refusal(500, f"the model file {self.ctx.path} changed after it was verified; this "
                                          "engine serves no more requests (a new Engine verifies it again)"))

    def _submit(self, body: dict, family: Family):
        self._check_file()
        try:
            prep = api.prepare(self.ctx, body, family)
        except Refusal as e:
            raise EngineError.of(e) from None
        events: queue.Queue = queue.Queue()
        tasks = api.make_tasks(self.ctx, prep, lambda i: (lambda ev: events.put((i, ev))))
        for t in api.parents(tasks, prep):
            self.ctx.worker.submit_completion(t)
        return tasks, events, Reply.start(family, self.ctx, prep)

    def _answer(self, body: dict, family: Family):
        tasks, events, reply = self._submit(body, family)
        finals = {}
        while len(finals) < len(tasks):
            i, ev = events.get()
            if isinstance(ev, Error):
                for t in tasks:
                    t.cancelled.set()
                raise EngineError.of(ev)
            if isinstance(ev, Final):
                finals[i] = ev
        return reply.merge([reply.final(i, finals[i]) for i in range(len(tasks))])

    def _stream(self, body: dict, family: Family):
        tasks, events, reply = self._submit(body, family)
        n_final = 0
        try:
            while n_final < len(tasks):
                i, ev = events.get()
                if isinstance(ev, Error):
                    raise EngineError.of(ev)
                yield from reply.chunks(i, ev)
                if isinstance(ev, Final):
                    n_final += 1
        finally:
            for t in tasks:
                t.cancelled.set()

    def close(self) -> None:
        self.ctx.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _plain(v):
    """An answer with its numpy vectors as lists of floats (what the HTTP answer's JSON reads back as)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if hasattr(v, "tolist"):
        return v.tolist()
    return v
