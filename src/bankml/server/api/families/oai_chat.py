"""The OpenAI chat family, POST /v1/chat/completions (/chat/completions): the chat request step
(bankml.chat.request, then what bankml does not reproduce yet: tools, other chat formats, prefills it cannot
parse), and server_task_result_cmpl_final / _partial `to_json_oaicompat_chat(_stream)` with task_result_state's
message diffs (tools/server/server-task.cpp). Several results merge as choices of one object; the stream is SSE
ending in `data: [DONE]`."""

from __future__ import annotations

import time

from ...generation import Final, Progress, Token, validate_utf8
from ...http import Refusal
from .base import BUILD_INFO, SSE, Family, FamilyRequest, finish_reason, probs_to_json, progress_json, text, usage
from .completion import completion_final
from .oai_completions import merge_choices


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
    choice = {"finish_reason": finish_reason(res.stop), "index": index,
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
    chunks = [_chunk([{"finish_reason": finish_reason(res.stop), "index": index, "delta": {}}], model, cmpl_id, t)]
    if params.include_usage:
        c = _chunk([], model, cmpl_id, t)
        c["usage"] = usage(res)
        chunks.append(c)
    if res.stats is not None:
        chunks[-1]["timings"] = res.stats
    if params.verbose:
        chunks[0]["__verbose"] = completion_final(res, params, model, index)
    return chunks


def _not_yet(message: str) -> Refusal:
    return Refusal(501, message, "not_supported_error")


class OAIChat(Family):
    name = "oai_chat"
    framing = SSE(done=True)

    def read(self, ctx, body) -> FamilyRequest:
        """The chat step (oaicompat_chat_params_parse): the template renders the prompt; tools, chat formats
        other than content-only / peg-native, a prefill the generation prompt does not end in and a JSON-schema
        answer after a prefill are refused (501); a JSON schema (under --jinja) becomes the grammar and the
        response format that extracts the answer's content."""
        from ....chat.request import ChatRequestError, parse_chat_request
        from ....grammar import request as greq
        try:
            req = parse_chat_request(body, ctx.templates, ctx.chat_options)
        except ChatRequestError as e:
            raise Refusal(e.status, e.message, e.error_type) from None
        data = dict(req.llama_params)
        if req.has_tools:   # served where llama-server answers without a tool-call grammar / parser
            from ....chat.tools import refusal
            why = refusal(req.chat, req.inputs, ctx.templates.caps())
            if why:
                raise _not_yet(why)
        if req.chat.format not in ("content-only", "peg-native"):
            raise _not_yet(f"chat format {req.chat.format} is not reproduced by bankml yet")
        gp, base = req.chat.generation_prompt, ctx.base_generation_prompt()
        if not gp.startswith(base):
            raise _not_yet("this assistant prefill is not reproduced by bankml yet")
        prefix = gp[len(base):]
        fmt = None
        if req.json_schema is not None and ctx.chat_options.use_jinja:   # (--no-jinja: a plain grammar)
            if prefix:
                raise _not_yet("a JSON schema answer to an assistant prefill is not reproduced by bankml yet")
            try:
                fmt = greq.chat_response_format(req.json_schema, req.chat.generation_prompt)
            except greq.ConstrainedRequestError as e:
                raise Refusal(e.status, e.message) from None
            data.update(greq.chat_llama_params(body, fmt))
        return FamilyRequest(data, fmt, prefix)

    def state(self, prep):
        return ChatState(prep.fmt, prep.prefix)

    def final(self, reply, i, ev):
        return chat_final(ev, reply.prep.params[i], reply.model, reply.prep.cmpl_id, reply.states[i], i)

    def chunks(self, reply, i, ev):
        p, cid, st = reply.prep.params[i], reply.prep.cmpl_id, reply.states[i]
        if isinstance(ev, Final):
            return chat_stream_final(ev, p, reply.model, cid, st, i)
        if isinstance(ev, (Token, Progress)):
            return chat_partial(ev, p, reply.model, cid, st, i)
        return []

    def merge(self, bodies):
        return merge_choices(bodies)
