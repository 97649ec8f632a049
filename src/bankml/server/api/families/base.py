"""What every response family shares: the Family interface, stream framings, the per-request Reply, and the JSON
pieces llama-server's result objects have in common (server-task.cpp: completion_token_output's probability
lists, the usage object, finish reasons, response_fields).

A family (one module each in this package) owns the JSON of one API: its final object, its stream chunks, how
its stream is framed and how the results of several tasks (several prompts, n > 1 choices) merge into one
answer; optionally its own request step (`read`: the chat parser for OpenAI chat). It reads bankml.server's
generation events (Final, Token, Progress) and knows nothing of HTTP routes, sockets or the worker.
Text is bytes until it is written (invalid UTF-8 becomes U+FFFD when the JSON is written, as dump_safe does; the
`token` of a probability entry is cut before a trailing incomplete UTF-8 sequence, `bytes` keeps all).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...generation import STOP_EOS, STOP_WORD, TokenProbs, validate_utf8
from ...http import Refusal, dumps
from ..info import random_string

BUILD_INFO = "b0-unknown"
FLT_LOWEST = -3.4028234663852886e38


# --- framings --------------------------------------------------------------------------------------------------

class Framing:
    """How a stream's chunks go on the wire: each chunk's bytes (an error after the stream opened is a chunk of
    the family's error object), the keep-alive while nothing comes (None: none), the end marker, and the response
    headers."""

    headers: dict = {}

    def chunk(self, obj) -> bytes:
        raise NotImplementedError

    def ping(self) -> bytes | None:
        return None

    def end(self) -> bytes:
        return b""


class SSE(Framing):
    """Server-sent events as llama-server writes them (server_sent_event, tools/server/server-common.cpp):
    `data: <json>\\n\\n` per chunk (an error too: `data: {"error": {...}}`), a `:` comment as the keep-alive
    (every --sse-ping-interval seconds), and, with `done`, `data: [DONE]` at the end (the OpenAI shapes)."""

    # no "; charset=..." (Starlette would add one to a media type)
    headers = {"Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}

    def __init__(self, done: bool):
        self.done = done

    def chunk(self, obj) -> bytes:
        return b"data: " + dumps(obj) + b"\n\n"

    def ping(self) -> bytes:
        return b":\n\n"

    def end(self) -> bytes:
        return b"data: [DONE]\n\n" if self.done else b""


# --- a family --------------------------------------------------------------------------------------------------

@dataclass
class FamilyRequest:
    """What a family's request step hands on: the fields the prompt and sampling steps read (`data`), the chat
    response format of a JSON-schema answer (`fmt`) and an assistant prefill the parser reads first (`prefix`)."""
    data: object
    fmt: object = None
    prefix: str = ""


class Family:
    """One API's answers (see the module doc). `framing`: its stream's Framing."""

    name = ""
    framing: Framing
    parses_tool_calls = False   # a chat family that answers parsed tool calls (OpenAI chat, Anthropic, Responses)
    parses_reasoning_with_tools = False   # ... and the reasoning parsed beside them (OpenAI chat)

    def read(self, ctx, body) -> FamilyRequest:
        """The family's own request step before the prompt is read (raises Refusal); by default the body is
        the request."""
        return FamilyRequest(body)

    def refused(self, refusal: Refusal) -> dict:
        """The error object this API answers a refusal with, before or during a stream: llama-server's
        (Refusal.json()) for every family so far."""
        return refusal.json()

    def state(self, prep):
        """Per-task state that lives as long as the request (the chat parser's), None by default."""
        return None

    def final(self, reply: "Reply", i: int, ev) -> dict:
        raise NotImplementedError

    def chunks(self, reply: "Reply", i: int, ev) -> list:
        """The stream chunks of task i's event ev (a Token, a Progress or the Final)."""
        raise NotImplementedError

    def merge(self, bodies: list):
        """The answer of several tasks' final objects (result index order)."""
        raise NotImplementedError


@dataclass
class Reply:
    """One request's answer in its family: the request (bankml.server.api.completion.Prepared), the model name
    and each task's state."""
    family: Family
    prep: object
    model: str
    states: list = field(default_factory=list)

    @classmethod
    def start(cls, family: Family, ctx, prep) -> "Reply":
        return cls(family, prep, ctx.meta.name, [family.state(prep) for _ in prep.inputs])

    def final(self, i: int, ev) -> dict:
        return self.family.final(self, i, ev)

    def chunks(self, i: int, ev) -> list:
        return self.family.chunks(self, i, ev)

    def merge(self, bodies: list):
        return bodies[0] if len(bodies) == 1 else self.family.merge(bodies)


# --- shared JSON -----------------------------------------------------------------------------------------------

def completion_id() -> str:
    """gen_chatcmplid."""
    return "chatcmpl-" + random_string(32)


def text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def logarithm(p: float) -> float:
    """completion_token_output::logarithm: std::log(float) (glibc's logf, which is not always the correctly
    rounded ln p: bankml.sampling.probs.logprob calls it), FLT lowest for p = 0."""
    from ....sampling.probs import logprob
    return FLT_LOWEST if p == 0.0 else logprob(p)


def _prob_key(post: bool, p: float):
    return ("prob", p) if post else ("logprob", logarithm(p))


def probs_to_json(probs: list[TokenProbs], post: bool) -> list:
    """completion_token_output::probs_vector_to_json."""
    out = []
    for e in probs:
        k, v = _prob_key(post, e.prob)
        top = []
        for tid, piece, p in e.probs:
            k2, v2 = _prob_key(post, p)
            top.append({"id": tid, "token": text(piece[:validate_utf8(piece)]), "bytes": list(piece), k2: v2})
        out.append({"id": e.tok, "token": text(e.text[:validate_utf8(e.text)]), "bytes": list(e.text), k: v,
                    ("top_probs" if post else "top_logprobs"): top})
    return out


def finish_reason(stop: str) -> str:
    return "stop" if stop in (STOP_WORD, STOP_EOS) else "length"


def nested_values(paths: list[str], js: dict) -> dict:
    """json_get_nested_values: response_fields ("a/b" paths), keyed by the path string."""
    out = {}
    for path in paths:
        cur, ok = js, True
        for k in path.split("/"):
            if ok and isinstance(cur, dict) and k in cur:
                cur = cur[k]
            else:
                ok = False
        if ok:
            out[path] = cur
    return out


def progress_json(ev) -> dict:
    return {"total": ev.total, "cache": ev.cache, "processed": ev.processed, "time_ms": ev.time_ms}


def usage(res) -> dict:
    return {"completion_tokens": res.n_decoded, "prompt_tokens": res.n_prompt_tokens,
            "total_tokens": res.n_decoded + res.n_prompt_tokens,
            "prompt_tokens_details": {"cached_tokens": res.n_prompt_cached}}
