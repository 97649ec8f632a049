"""Ollama's chat and generate answers (api/types.go at v0.13.3: ChatResponse, GenerateResponse, Metrics, Logprob):
the NDJSON framing, each chunk and the final object, in the field order of Go's structs, from bankml's generation
events. The route (bankml.server.api.ollama) writes them with bankml.server.ollama.gojson.

    fam = OllamaFamily(chat=True, model_name, t_start_ns, t_loaded_ns, ...)
    fam.chunk(ev)           # a stream chunk for a Token (None: nothing to send; Ollama sends non-empty text only)
    fam.final(ev, stream)   # the done object for the Final

Metrics (runner/ollamarunner/runner.go:969, server/routes.go:2197): prompt_eval_count is the prompt's tokens,
eval_count the tokens sampled, prompt_eval_duration and eval_duration llama-server's prompt_ms and predicted_ms
in nanoseconds, total_duration from the request's start, load_duration the wait for the model. Zero metrics are
left out (omitempty). This module knows no HTTP and no route.
"""

from __future__ import annotations

import time

from ...generation import STOP_EOS, STOP_WORD, Final, Token
from ..families.base import Framing, logarithm, text
from ..families.oai_chat import ChatState


class NDJSON(Framing):
    """One JSON object a line (server/routes.go:1688 streamResponse)."""

    headers = {"Content-Type": "application/x-ndjson"}

    def __init__(self, dumps):
        self.dumps = dumps

    def chunk(self, obj) -> bytes:
        return self.dumps(obj) + b"\n"


def done_reason(stop: str) -> str:
    # llm/server.go:1436: stop (EOS, stop word) or length (num_predict, the context)
    return "stop" if stop in (STOP_WORD, STOP_EOS) else "length"


def logprobs_json(probs: list, tokenizer, top: int) -> list:
    """toAPILogprobs (server/logprob.go:9) from llama-server's pre-sampling probabilities: each token's piece,
    its bytes (left out when empty), log p, and the top `top` alternatives. An end-of-generation token has none
    (runner.go:765 computes them after the EOS check)."""
    out = []
    for e in probs:
        if tokenizer.is_eog(e.tok):
            continue
        piece = text(tokenizer.token_to_piece(e.tok, False))
        entry = _tlp(piece, logarithm(e.prob))
        if top > 0:
            entry["top_logprobs"] = [_tlp(text(p), logarithm(q)) for _, p, q in e.probs[:top]]
        out.append(entry)
    return out


def _tlp(token: str, lp: float) -> dict:
    d = {"token": token, "logprob": lp}
    b = list(token.encode("utf-8"))
    if b:
        d["bytes"] = b
    return d


class OllamaReply:
    """One chat or generate answer's JSON."""

    def __init__(self, chat: bool, model: str, t_start: int, t_loaded: int, tokenizer, *, fmt=None,
                 logprobs: bool = False, top_logprobs: int = 0, context_of=None, parsed: bool | None = None):
        self.chat = chat
        self.model = model
        self.t_start, self.t_loaded = t_start, t_loaded
        self.tokenizer = tokenizer
        # an answer of llama-server's chat step (chat, and generate without raw or context) is its message's content
        # as the chat parser reads it (a JSON answer's markdown fence, ...); a /completion answer is the text
        self.state = ChatState(fmt) if (chat if parsed is None else parsed) else None
        self.logprobs, self.top = logprobs, top_logprobs
        self.context_of = context_of          # generate: (generated text) -> the `context` tokens, or None (raw)
        self.sent = b""

    def _head(self, ts: str, content: str) -> dict:
        d = {"model": self.model, "created_at": ts}
        if self.chat:
            d["message"] = {"role": "assistant", "content": content}
        else:
            d["response"] = content
        return d

    def chunk(self, ev: Token, ts: str) -> dict | None:
        if self.state is not None:
            d = self.state.diff(ev.text)
            content = d or ""
        else:
            content = text(ev.text)
        self.sent += ev.text
        lps = []
        if self.logprobs and ev.probs is not None:
            lps = logprobs_json([ev.probs], self.tokenizer, self.top)
        if not content and not lps:
            return None
        body = self._head(ts, content)
        body["done"] = False
        if lps:
            body["logprobs"] = lps
        return body

    def final(self, res: Final, ts: str, stream: bool) -> dict:
        if stream:
            content = ""
        elif self.state is not None:
            content = self.state.parse(res.content, False)
        else:
            content = text(res.content)
        if self.state is not None:
            generated = (self.state.content if stream else content).encode("utf-8", "surrogateescape")
        else:
            generated = self.sent if stream else res.content
        body = self._head(ts, content)
        body["done"] = True
        body["done_reason"] = done_reason(res.stop)
        if not self.chat and self.context_of is not None:
            ctx = self.context_of(text(generated))
            if ctx:
                body["context"] = ctx
        now = time.monotonic_ns()
        metrics = [("total_duration", now - self.t_start), ("load_duration", self.t_loaded - self.t_start),
                   ("prompt_eval_count", res.n_prompt_tokens),
                   ("prompt_eval_duration", int(res.stats["prompt_ms"] * 1e6)),
                   ("eval_count", res.n_decoded), ("eval_duration", int(res.stats["predicted_ms"] * 1e6))]
        lps = logprobs_json(res.probs, self.tokenizer, self.top) if (self.logprobs and not stream) else []
        if self.chat:
            if lps:
                body["logprobs"] = lps
            for k, v in metrics:
                if v:
                    body[k] = v
        else:
            for k, v in metrics:
                if v:
                    body[k] = v
            if lps:
                body["logprobs"] = lps
        return body
