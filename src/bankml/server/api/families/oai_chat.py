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
    """task_result_state for a chat answer: the text sent so far and the message parsed from it. `fmt` (a
    bankml.grammar ChatResponseFormat) extracts the content of a JSON-schema answer; `tools` (a
    bankml.grammar.chat_tools ChatToolCalls) parses content and tool calls."""

    def __init__(self, fmt=None, prefix: str = "", tools=None):
        self.fmt = fmt
        self.prefix = prefix          # an assistant prefill: the parser reads it before the generated text
        self.tools = tools
        self.generated = b""
        self.content = ""
        self.msg = None               # with tools: the last non-empty parsed message (a ToolMessage)
        self.ids: list[str] = []      # the tool calls' ids, by index (gen_tool_call_id, kept across parses)

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

    def _tool_msg(self, generated: bytes, partial: bool):
        generated = generated[:validate_utf8(generated)]
        msg = self.tools.parse(generated, partial)
        if msg is None or msg.empty():
            return None
        for i, call in enumerate(msg.tool_calls):   # set_tool_call_ids
            if i >= len(self.ids):                    # the parsed id, or a random one
                self.ids.append(call.id or tool_call_id())
            call.id = self.ids[i]
        return msg

    def final_message(self, generated: bytes):
        """The final message (update_chat_msg, not partial): a ToolMessage, or None where nothing parsed."""
        msg = self._tool_msg(generated, False)
        if msg is not None:
            self.msg = msg
        return self.msg

    def deltas(self, added: bytes) -> list[dict]:
        """The chunks' deltas for `added` text (common_chat_msg_diff::compute_diffs, one delta a diff)."""
        if self.tools is None:
            d = self.diff(added)
            return [] if d is None else [{"content": d}]
        self.generated += added
        try:
            new = self._tool_msg(self.generated, True)
        except Exception:
            return []
        if new is None:
            return []
        old = self.msg if self.msg is not None else type(new)()
        self.msg = new
        return tool_diffs(old, new)

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


def tool_call_id() -> str:
    """gen_tool_call_id: 32 random letters and digits (no seed reaches it)."""
    import secrets
    import string
    abc = string.digits + string.ascii_uppercase + string.ascii_lowercase
    return "".join(secrets.choice(abc) for _ in range(32))


def tool_diffs(old, new) -> list[dict]:
    """compute_diffs between two parsed messages, each diff as its delta (server_chat_msg_diff_to_json_oaicompat):
    the reasoning's, the content's, then the last known call's (its arguments' growth), then each new call
    whole."""
    from ....errors import SchemaError
    from ....grammar.chat import content_delta
    out = []
    if old.reasoning_content != new.reasoning_content:
        d = content_delta(old.reasoning_content, new.reasoning_content)
        out.append({"reasoning_content": d} if d else {})
    if old.content != new.content:
        d = content_delta(old.content, new.content)
        out.append({"content": d} if d else {})
    if len(new.tool_calls) < len(old.tool_calls):
        raise SchemaError("Invalid diff: now finding less tool calls!")

    def call_delta(i, cid, name, args) -> dict:
        tc = {"index": i}
        if cid:
            tc["id"] = cid
            tc["type"] = "function"
        if name or args:
            fn = {}
            if name:
                fn["name"] = name
            if args:
                fn["arguments"] = args
            tc["function"] = fn
        return {"tool_calls": [tc]}

    if old.tool_calls:
        i = len(old.tool_calls) - 1
        p, n = old.tool_calls[i], new.tool_calls[i]
        if p.name != n.name and p.name and n.name and not n.name.startswith(p.name):
            raise SchemaError("Invalid diff: tool call mismatch!")
        args = content_delta(p.arguments, n.arguments)
        if args or p.id != n.id or p.name != n.name:
            changed = p.id != n.id or p.name != n.name
            out.append(call_delta(i, n.id if changed else "", n.name if changed else "", args))
    for i in range(len(old.tool_calls), len(new.tool_calls)):
        c = new.tool_calls[i]
        out.append(call_delta(i, c.id, c.name, c.arguments))
    return out


def _message_json(msg) -> dict:
    """common_chat_msg::to_json_oaicompat for a parsed message with tool calls."""
    out = {"role": "assistant", "content": msg.content}
    if msg.reasoning_content:
        out["reasoning_content"] = msg.reasoning_content
    if msg.tool_calls:
        out["tool_calls"] = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments},
                              **({"id": c.id} if c.id else {})} for c in msg.tool_calls]
    return out


def _finish(res: Final, state) -> str:
    reason = finish_reason(res.stop)
    if reason == "stop" and state.tools is not None and state.msg is not None and state.msg.tool_calls:
        return "tool_calls"
    return reason


def _chunk(choices, model, cmpl_id, t) -> dict:
    return {"choices": choices, "created": t, "id": cmpl_id, "model": model, "system_fingerprint": BUILD_INFO,
            "object": "chat.completion.chunk"}


def chat_final(res: Final, params, model: str, cmpl_id: str, state: ChatState, index: int = 0) -> dict:
    if state.tools is not None:
        from ....errors import SchemaError
        try:
            msg = state.final_message(res.content)
        except SchemaError as e:        # the final parse failed: llama-server's handler answers 500
            raise Refusal(500, e.message) from None
        message = _message_json(msg) if msg is not None else {"role": "assistant", "content": text(res.content)}
    else:
        message = {"role": "assistant", "content": state.parse(res.content, False)}
    choice = {"finish_reason": _finish(res, state), "index": index, "message": message}
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
        for d in state.deltas(ev.text):
            chunks.append(_chunk([{"finish_reason": None, "index": index, "delta": d}], model, cmpl_id, t))
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
    if state.tools is not None:   # the final update parses the same text, not partial: no new diffs
        try:
            state.final_message(state.generated)
        except Exception:
            pass
    chunks = [_chunk([{"finish_reason": _finish(res, state), "index": index, "delta": {}}], model, cmpl_id, t)]
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
    parses_tool_calls = True
    parses_reasoning_with_tools = True
    framing = SSE(done=True)

    def read(self, ctx, body) -> FamilyRequest:
        """The chat step (oaicompat_chat_params_parse): the template renders the prompt; tools, chat formats
        other than content-only / peg-native, a prefill the generation prompt does not end in and a JSON-schema
        answer after a prefill are refused (501); a JSON schema (under --jinja) becomes the grammar and the
        response format that extracts the answer's content."""
        from ....chat.messages import CONTINUE_NONE
        from ....chat.request import ChatRequestError, parse_chat_request
        from ....grammar import request as greq
        try:
            req = parse_chat_request(body, ctx.templates, ctx.chat_options)
        except ChatRequestError as e:
            raise Refusal(e.status, e.message, e.error_type) from None
        data = dict(req.llama_params)
        tools = None
        if req.has_tools:   # served without a tool-call grammar / parser, or with one bankml reproduces
            from ....chat.tools import refusal, served_with_tool_parser
            caps = ctx.templates.caps()
            why = refusal(req.chat, req.inputs, caps, self.parses_tool_calls, self.parses_reasoning_with_tools)
            if why:
                raise _not_yet(why)
            if self.parses_tool_calls and served_with_tool_parser(req.chat, req.inputs, caps,
                                                                  self.parses_reasoning_with_tools):
                tools = OAIChat._tool_calls(req, data)
        if req.chat.format not in ("content-only", "peg-native"):
            raise _not_yet(f"chat format {req.chat.format} is not reproduced by bankml yet")
        gp, base = req.chat.generation_prompt, ctx.base_generation_prompt()
        if tools is not None and req.inputs.continue_final_message == CONTINUE_NONE:
            prefix = ""                  # the tool parser reads the request's own generation prompt (thinking
            #                              enabled per request changes it)
        elif not gp.startswith(base):
            raise _not_yet("this assistant prefill is not reproduced by bankml yet")
        else:
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
        if tools is not None:
            if prefix:
                raise _not_yet("tool calls after an assistant prefill are not reproduced by bankml yet")
            fmt = tools
        return FamilyRequest(data, fmt, prefix)

    @staticmethod
    def _tool_calls(req, data: dict):
        """The tool-call grammar (lazy under "auto", with its word trigger) into the request's parameters, and
        the parser of the answer (bankml.grammar.chat_tools)."""
        from ....errors import SchemaError
        from ....grammar import chat_tools
        from ....grammar.request import TOOL_CALLS
        chat = req.chat
        thinking = chat_tools.Thinking(chat.reasoning_start, chat.reasoning_end,
                                       req.inputs.reasoning_format != "none") if chat.supports_thinking else None
        try:
            tc = chat_tools.tool_calls(req.inputs.tools, chat.tool_format, chat.generation_prompt,
                                       req.inputs.tool_choice, req.inputs.parallel_tool_calls, thinking)
        except SchemaError as e:
            raise Refusal(400, e.message) from None
        if tc.grammar:
            data["grammar"] = tc.grammar
            data["grammar_type"] = TOOL_CALLS
        data["grammar_lazy"] = tc.lazy
        data["grammar_triggers"] = tc.triggers
        return tc

    def state(self, prep):
        from ....grammar.chat_tools import ChatToolCalls
        if isinstance(prep.fmt, ChatToolCalls):
            return ChatState(None, prep.prefix, prep.fmt)
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
