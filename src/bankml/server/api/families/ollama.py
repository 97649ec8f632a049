"""Ollama's chat and generate answers (api/types.go ChatResponse / GenerateResponse at v0.13.3, server/routes.go
ChatHandler / GenerateHandler): the request step turns an Ollama request, already read into its meaning by
bankml.server.api.ollama (kept messages or a prompt, llama-server sampling fields), into llama-server's own request
(the OpenAI chat step for messages: the GGUF's template as llama-server renders it; /completion's for a raw or
`context` prompt), and the events of bankml.server.generation become Ollama's objects: chunks
`{model, created_at, message|response, done:false}` and the final object with done_reason, the metrics in integer
nanoseconds and generate's `context`. Framing: NDJSON (one object a line; an error after the stream opened is one
`{"error": ...}` line). JSON is Go's (bankml.server.ollama.gojson), objects in the Go structs' field order.
"""

from __future__ import annotations

import time

from ...generation import Final, Token
from ...http import Refusal
from ...ollama import gojson
from .base import Family, FamilyRequest, Framing, finish_reason, logarithm, text
from .oai_chat import ChatState, OAIChat


class NDJSON(Framing):
    """streamResponse (server/routes.go): each object json.Marshal'ed and a newline; no keep-alive, no end."""

    headers = {"Content-Type": "application/x-ndjson"}

    def chunk(self, obj) -> bytes:
        return gojson.dumps(obj) + b"\n"


class OllamaRequest:
    """What bankml.server.api.ollama hands the family: the llama-server body of the request's meaning, whether it
    is a chat, the model name the client gave, the times of its arrival and of its model's lease, the logprobs
    asked for, and for generate the prompt text whose tokens start `context` (None: no context, raw)."""

    def __init__(self, body: dict, chat: bool, model: str, t0: int, t_loaded: int, logprobs: bool = False,
                 top_logprobs: int = 0, context_prompt: str | None = None, tokenize=None):
        self.body, self.chat, self.model = body, chat, model
        self.t0, self.t_loaded = t0, t_loaded
        self.logprobs, self.top_logprobs = logprobs, top_logprobs
        self.context_prompt = context_prompt
        self.tokenize = tokenize            # text -> ids (Ollama's Tokenize), for `context`


def _token_logprob(piece: bytes, p: float) -> dict:
    # api.TokenLogprob: token, logprob (float64), bytes (omitempty: the token's UTF-8 bytes)
    tok = text(piece)
    out = {"token": tok, "logprob": float(logarithm(p))}
    b = list(tok.encode("utf-8"))
    if b:
        out["bytes"] = b
    return out


def logprobs_json(probs: list, top: int) -> list:
    """toAPILogprobs (server/logprob.go) of llama-server's per-token probabilities (pre-sampling: the
    log-softmax of the raw logits, as Ollama's calculateLogprobs reads them)."""
    out = []
    for e in probs:
        lp = _token_logprob(e.text, e.prob)
        if top > 0 and e.probs:
            lp["top_logprobs"] = [_token_logprob(piece, p) for _, piece, p in e.probs[:top]]
        out.append(lp)
    return out


def _metrics(res: Final, o: OllamaRequest) -> dict:
    """api.Metrics, omitempty: total and load durations from the handler's checkpoints, the runner's counts
    (numPromptInputs: the whole prompt; numPredicted: every sampled token, the EOS one included) and times."""
    now = time.time_ns()
    stats = res.stats or {}
    m = {"total_duration": now - o.t0, "load_duration": o.t_loaded - o.t0,
         "prompt_eval_count": res.n_prompt_tokens,
         "prompt_eval_duration": int(round(stats.get("prompt_ms", 0.0) * 1e6)),
         "eval_count": res.n_decoded,
         "eval_duration": int(round(stats.get("predicted_ms", 0.0) * 1e6))}
    return {k: v for k, v in m.items() if v}


class OllamaState:
    """Per-request state: the chat parser's (a JSON schema's content), the text and logprobs sent so far."""

    def __init__(self, chat_state):
        self.chat = chat_state
        self.generated = b""


class Ollama(Family):
    """/api/chat (chat=True) and /api/generate."""

    framing = NDJSON()

    def __init__(self, chat: bool):
        self.chat = chat
        self.name = "ollama_chat" if chat else "ollama_generate"
        self._oai = OAIChat()

    def read(self, ctx, o: OllamaRequest) -> FamilyRequest:
        if "messages" in o.body:
            req = self._oai.read(ctx, o.body)
            return FamilyRequest(req.data, req.fmt, req.prefix)
        return FamilyRequest(o.body)

    def refused(self, refusal: Refusal) -> dict:
        return {"error": refusal.message}

    def state(self, prep):
        return OllamaState(ChatState(prep.fmt, prep.prefix))

    def _head(self, reply, content: str) -> dict:
        o = reply.prep.ollama
        head = {"model": o.model, "created_at": gojson.go_time()}
        if self.chat:
            head["message"] = {"role": "assistant", "content": content}
        else:
            head["response"] = content
        return head

    def chunks(self, reply, i, ev):
        o, st = reply.prep.ollama, reply.states[i]
        if isinstance(ev, Token):
            st.generated += ev.text
            if self.chat:
                content = st.chat.diff(ev.text) or ""
            else:
                content = text(ev.text)
            lps = logprobs_json([ev.probs], o.top_logprobs) if (o.logprobs and ev.probs is not None) else []
            if not content and not lps:
                return []
            c = self._head(reply, content)
            c["done"] = False
            if lps:
                c["logprobs"] = lps
            return [c]
        if isinstance(ev, Final):
            return [self._final(reply, ev, "", [], st.generated)]
        return []

    def final(self, reply, i, ev):
        o, st = reply.prep.ollama, reply.states[i]
        content = st.chat.parse(ev.content, False) if self.chat else text(ev.content)
        lps = logprobs_json(ev.probs, o.top_logprobs) if o.logprobs else []
        return self._final(reply, ev, content, lps, ev.content)

    def _final(self, reply, res: Final, content: str, lps: list, output: bytes) -> dict:
        o = reply.prep.ollama
        out = self._head(reply, content)
        out["done"] = True
        out["done_reason"] = finish_reason(res.stop)
        if self.chat:
            if lps:
                out["logprobs"] = lps
            out.update(_metrics(res, o))
            return out
        if o.context_prompt is not None:
            # the returned context: the final prompt and the whole output, tokenized again (Tokenize: specials
            # parsed, none added)
            out["context"] = o.tokenize(o.context_prompt + text(output))
        out.update(_metrics(res, o))
        if lps:
            out["logprobs"] = lps
        return out

    def merge(self, bodies):
        return bodies[0]


OLLAMA_CHAT = Ollama(chat=True)
OLLAMA_GENERATE = Ollama(chat=False)
