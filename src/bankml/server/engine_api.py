"""`bankml.Engine`: bankml-serve's answers in-process, with no HTTP in between.

    with bankml.Engine(["-m", path, "-c", "4096", "-np", "1"]) as eng:     # llama-server's flags (default model
        answer = eng.chat({"messages": [...], "temperature": 0})          #  when there is no -m)
        for chunk in eng.chat_stream({"messages": [...]}):                 # the SSE chunks, as dicts
            ...
        eng.completion({"prompt": "..."}) ; eng.completions({...})         # /completion and /v1/completions

Each call goes through the same request step, worker thread, slots and response shapes as the HTTP routes
(bankml.server.api.completion), so `chat()` returns the object /v1/chat/completions would answer (its created,
id and timings are this call's). A refusal raises EngineError carrying llama-server's status and error body.
"""

from __future__ import annotations

import queue

from ..errors import BankmlError
from .generation import Error, Final


class EngineError(BankmlError):
    """A request llama-server would refuse: `status` and `body` ({"error": {...}}) as the HTTP answer has them."""

    def __init__(self, status: int, body: dict):
        self.status = status
        self.body = body
        super().__init__(f"{status}: {body['error']['message']}")


class Engine:
    def __init__(self, argv: list[str] | None = None):
        from .context import ServerContext
        from .flags import parse_flags
        self.ctx = ServerContext.load(parse_flags(list(argv or [])))
        self.ctx.start()

    # -- requests
    def chat(self, body: dict) -> dict:
        return self._answer(dict(body, stream=False), "chat")

    def chat_stream(self, body: dict):
        return self._stream(dict(body, stream=True), "chat")

    def completion(self, body: dict):
        return self._answer(dict(body, stream=False), "completion")

    def completion_stream(self, body: dict):
        return self._stream(dict(body, stream=True), "completion")

    def completions(self, body: dict) -> dict:
        return self._answer(dict(body, stream=False), "oai")

    def completions_stream(self, body: dict):
        return self._stream(dict(body, stream=True), "oai")

    # -- plumbing
    def _submit(self, body: dict, kind: str):
        from .api import completion as api
        try:
            prep = api.prepare(self.ctx, body, kind)
        except api.RequestFailure as e:
            from .http import error_body
            raise EngineError(e.status, error_body(e.message, e.status, e.etype, **e.extra)) from None
        events: queue.Queue = queue.Queue()
        tasks = api.make_tasks(self.ctx, prep, lambda i: (lambda ev: events.put((i, ev))))
        for t in api.parents(tasks, prep):
            self.ctx.worker.submit_completion(t)
        return prep, tasks, events, api.Formatter(self.ctx, prep)

    def _answer(self, body: dict, kind: str):
        from .api.completion import error_json
        prep, tasks, events, fmt = self._submit(body, kind)
        finals = {}
        while len(finals) < len(tasks):
            i, ev = events.get()
            if isinstance(ev, Error):
                for t in tasks:
                    t.cancelled.set()
                raise EngineError(ev.status, error_json(ev))
            if isinstance(ev, Final):
                finals[i] = ev
        return fmt.merge([fmt.final(i, finals[i]) for i in range(len(tasks))])

    def _stream(self, body: dict, kind: str):
        from .api.completion import error_json
        prep, tasks, events, fmt = self._submit(body, kind)
        n_final = 0
        try:
            while n_final < len(tasks):
                i, ev = events.get()
                if isinstance(ev, Error):
                    raise EngineError(ev.status, error_json(ev))
                yield from fmt.stream_chunks(i, ev)
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
