"""llama-server b11192's response objects, built from bankml.server.generation's events (server-task.cpp:
server_task_result_cmpl_final / _partial `to_json_*`, completion_token_output, task_result_state).

One function per shape, plain dicts in llama-server's key order; `created` is the time of serialisation, `id` the
request's "chatcmpl-" + 32 random characters (shared by every chunk and choice), `system_fingerprint` the oracle's
build_info. Text is bytes until it is written (invalid UTF-8 becomes U+FFFD when the JSON is written, as dump_safe
does; the `token` of a probability entry is cut before a trailing incomplete UTF-8 sequence, `bytes` keeps all).
"""

from __future__ import annotations

import time

from ..cxx.cfloat import f32
from .generation import STOP_EOS, STOP_WORD, Final, Token, TokenProbs, validate_utf8
from .api.info import random_string

BUILD_INFO = "b0-unknown"
FLT_LOWEST = -3.4028234663852886e38


def completion_id() -> str:
    """gen_chatcmplid."""
    return "chatcmpl-" + random_string(32)


def text(b: bytes) -> str:
    return b.decode("utf-8", "replace")




def logarithm(p: float) -> float:
    """completion_token_output::logarithm: std::log(float) (glibc's logf, which is not always the correctly
    rounded ln p: bankml.sampling.probs.logprob calls it), FLT lowest for p = 0."""
    from ..sampling.probs import logprob
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


def _finish_reason(stop: str) -> str:
    return "stop" if stop in (STOP_WORD, STOP_EOS) else "length"


def _stats_set(stats: dict | None) -> bool:
    return stats is not None


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


# --- /completion ---------------------------------------------------------------------------------------------

def completion_final(res: Final, params, model: str, index: int = 0) -> dict:
    body = {
        "index": index,
        "content": text(res.content),
        "tokens": res.tokens,
        "id_slot": res.id_slot,
        "stop": True,
        "model": model,
        "tokens_predicted": res.n_decoded,
        "tokens_evaluated": res.n_prompt_tokens,
        "generation_settings": params.to_json(),
        "prompt": text(res.prompt),
        "has_new_line": res.has_new_line,
        "truncated": res.truncated,
        "stop_type": res.stop,
        "stopping_word": res.stopping_word,
        "tokens_cached": res.n_tokens_cached,
        "timings": res.stats,
    }
    if not params.stream and res.probs:
        body["completion_probabilities"] = probs_to_json(res.probs, params.post_sampling_probs)
    fields = list(getattr(params, "response_fields", None) or [])
    return nested_values(fields, body) if fields else body


def completion_partial(ev, params, index: int = 0) -> dict:
    """A /completion stream chunk: a Token, or a Progress."""
    from .generation import Progress
    if isinstance(ev, Progress):
        body = {"index": index, "content": "", "tokens": [0], "stop": False, "id_slot": -1, "tokens_predicted": 0,
                "tokens_evaluated": ev.total}
        if ev.stats is not None:
            body["timings"] = ev.stats
        body["prompt_progress"] = progress_json(ev)
        return body
    body = {"index": index, "content": text(ev.text), "tokens": [ev.tok], "stop": False, "id_slot": -1,
            "tokens_predicted": ev.n_decoded, "tokens_evaluated": ev.n_prompt_tokens}
    if ev.stats is not None:
        body["timings"] = ev.stats
    if ev.probs is not None and ev.probs.probs:
        body["completion_probabilities"] = probs_to_json([ev.probs], params.post_sampling_probs)
    return body


def progress_json(ev) -> dict:
    return {"total": ev.total, "cache": ev.cache, "processed": ev.processed, "time_ms": ev.time_ms}


# --- /v1/completions -----------------------------------------------------------------------------------------

def usage(res: Final) -> dict:
    return {"completion_tokens": res.n_decoded, "prompt_tokens": res.n_prompt_tokens,
            "total_tokens": res.n_decoded + res.n_prompt_tokens,
            "prompt_tokens_details": {"cached_tokens": res.n_prompt_cached}}


def oai_completion_final(res: Final, params, model: str, cmpl_id: str, index: int = 0) -> dict:
    logprobs = None
    if not params.stream and res.probs:
        logprobs = {"content": probs_to_json(res.probs, params.post_sampling_probs)}
    body = {
        "choices": [{"text": text(res.content), "index": index, "logprobs": logprobs,
                     "finish_reason": _finish_reason(res.stop)}],
        "created": int(time.time()), "model": model, "system_fingerprint": BUILD_INFO,
        "object": "text_completion", "usage": usage(res), "id": cmpl_id,
    }
    if params.verbose:
        body["__verbose"] = completion_final(res, params, model, index)
    if res.stats is not None:
        body["timings"] = res.stats
    return body


def oai_completion_partial(ev, params, model: str, cmpl_id: str, index: int = 0) -> dict:
    """A /v1/completions stream chunk: a Token, or a Progress (no text, its prompt_progress)."""
    from .generation import Progress
    progress = isinstance(ev, Progress)
    logprobs = None
    if not progress and ev.probs is not None and ev.probs.probs:
        logprobs = {"content": probs_to_json([ev.probs], params.post_sampling_probs)}
    body = {
        "choices": [{"text": "" if progress else text(ev.text), "index": index, "logprobs": logprobs,
                     "finish_reason": None}],
        "created": int(time.time()), "model": model, "system_fingerprint": BUILD_INFO,
        "object": "text_completion", "id": cmpl_id,
    }
    if params.verbose:
        body["__verbose"] = completion_partial(ev, params, index)
    if ev.stats is not None:
        body["timings"] = ev.stats
    if progress:
        body["prompt_progress"] = progress_json(ev)
    return body


# --- /v1/chat/completions ------------------------------------------------------------------------------------

class ChatState:
    """task_result_state for a content-only chat answer: the text sent so far and the message parsed from it.
    `fmt` (a bankml.grammar ChatResponseFormat) extracts the content of a JSON-schema answer."""

    def __init__(self, fmt=None, prefix: str = ""):
        self.fmt = fmt
        self.prefix = prefix          # an assistant prefill: the parser reads it before the generated text
        self.generated = b""
        self.content = ""

    def parse(self, generated: bytes, partial: bool) -> str:
        # the parser does not take a multi-byte sequence cut off at the end (a limit stop can leave one)
        generated = generated[:validate_utf8(generated)]
        if self.fmt is None:
            return self.prefix + text(generated)
        if self.fmt is not None:
            try:
                c = self.fmt.content(generated)
            except Exception:
                if partial:
                    return self.content
                raise
            if c is not None:
                return c
            if partial:                   # an empty parse changes nothing while streaming
                return self.content
        return text(generated)

    def diff(self, added: bytes) -> str | None:
        """The content delta of `added` text (None: the parsed message did not change)."""
        self.generated += added
        new = self.parse(self.generated, True)
        if not new and not self.content:
            return None
        old, self.content = self.content, new
        if new == old:
            return None
        return new[len(old):] if new.startswith(old) else new


def _chunk(choices, model, cmpl_id, t) -> dict:
    return {"choices": choices, "created": t, "id": cmpl_id, "model": model, "system_fingerprint": BUILD_INFO,
            "object": "chat.completion.chunk"}


def chat_final(res: Final, params, model: str, cmpl_id: str, state: ChatState, index: int = 0) -> dict:
    content = state.parse(res.content, False)
    choice = {"finish_reason": _finish_reason(res.stop), "index": index,
              "message": {"role": "assistant", "content": content}}
    if not params.stream and res.probs:
        choice["logprobs"] = {"content": probs_to_json(res.probs, params.post_sampling_probs)}
    body = {"choices": [choice], "created": int(time.time()), "model": model, "system_fingerprint": BUILD_INFO,
            "object": "chat.completion", "usage": usage(res), "id": cmpl_id}
    if params.verbose:
        body["__verbose"] = completion_final(res, params, model, index)
    if res.stats is not None:
        body["timings"] = res.stats
    return body


def chat_partial(ev, params, model: str, cmpl_id: str, state: ChatState, index: int = 0) -> list[dict]:
    """The chunks of one stream event (a Token or a Progress): the role chunk on the first token, the content
    delta, logprobs and timings on the last of them."""
    from .generation import Progress
    t = int(time.time())
    chunks = []
    progress = isinstance(ev, Progress)
    if progress or ev.n_decoded == 1:
        chunks.append(_chunk([{"finish_reason": None, "index": index,
                               "delta": {"role": "assistant", "content": None}}], model, cmpl_id, t))
    if not progress:
        d = state.diff(ev.text)
        if d is not None:
            chunks.append(_chunk([{"finish_reason": None, "index": index, "delta": {"content": d}}],
                                 model, cmpl_id, t))
    if chunks:
        last = chunks[-1]
        if not progress:
            if ev.probs is not None and ev.probs.probs:
                last["choices"][0]["logprobs"] = {"content": probs_to_json([ev.probs], params.post_sampling_probs)}
            if ev.stats is not None:
                last["timings"] = ev.stats
        else:
            if ev.stats is not None:
                last["timings"] = ev.stats
            last["prompt_progress"] = progress_json(ev)
    return chunks


def chat_stream_final(res: Final, params, model: str, cmpl_id: str, state: ChatState, index: int = 0) -> list:
    t = int(time.time())
    chunks = [_chunk([{"finish_reason": _finish_reason(res.stop), "index": index, "delta": {}}], model, cmpl_id, t)]
    if params.include_usage:
        c = _chunk([], model, cmpl_id, t)
        c["usage"] = usage(res)
        chunks.append(c)
    if res.stats is not None:
        chunks[-1]["timings"] = res.stats
    if params.verbose:
        chunks[0]["__verbose"] = completion_final(res, params, model, index)
    return chunks
