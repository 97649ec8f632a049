"""The Anthropic Messages family, POST /v1/messages, as llama-server b11192 serves it.

llama-server does not implement Anthropic's API on its own: it rewrites the body into an OpenAI chat request
(server_chat_convert_anthropic_to_oai, tools/server/server-chat.cpp:348-620), runs the OpenAI chat step on it
and answers the results in Anthropic's shapes (server_task_result_cmpl_final::to_json_anthropic /
to_json_anthropic_stream, server_task_result_cmpl_partial::to_json_anthropic, tools/server/server-task.cpp:731-983
and 1324-1460). Here likewise: `convert` is the rewrite, the OpenAI chat family's request step (families.oai_chat)
takes it from there (tools included: the tool-call formats it parses, else its 501), and this family writes the
message object and the stream's events: parsed tool calls become `tool_use` blocks (their input the arguments'
JSON, `{}` when they do not parse), streamed as content_block_start and input_json_delta events.

The stream is SSE with an `event:` line before each `data:` line and no end marker (format_anthropic_sse,
tools/server/server-common.cpp:1657); an error after the stream opened is `event: error` with the bare error
object (server-context.cpp:4414-4421). Errors before it are llama-server's usual `{"error": {...}}` bodies.
"""

from __future__ import annotations

from ...generation import STOP_EOS, STOP_WORD, Final, Token
from ...http import dumps
from .base import SSE, Family, FamilyRequest, text
from .oai_chat import ChatState, OAIChat

# the keys passed through as they are (server-chat.cpp:592-596)
_PASSED = ("temperature", "top_p", "top_k", "stream", "chat_template_kwargs")
_BILLING = "x-anthropic-billing-header:"


def _value(obj, key, default):
    """json_value: obj[key] when obj is an object holding a non-null value of the default's type, else the
    default (a value of another type is the default too)."""
    if not isinstance(obj, dict) or obj.get(key) is None:
        return default
    v = obj[key]
    if isinstance(default, str) and not isinstance(v, str):
        return default
    if isinstance(default, dict) and not isinstance(v, dict):
        return default
    if isinstance(default, bool) != isinstance(v, bool):
        return default
    if isinstance(default, int) and not isinstance(default, bool):
        # get<int>: a number converts (a float is cut toward zero), anything else is the default
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default
    return v


def _any(obj, key, default):
    """json_value with a json default: obj[key] of any type when present and not null."""
    v = obj.get(key) if isinstance(obj, dict) else None
    return default if v is None else v


def _billing(s: str) -> str:
    """normalize_anthropic_billing_header (server-chat.cpp:326-346): in a system text that starts with Claude
    Code's billing header, the five characters after `cch=` become `fffff` when a `;` follows them (the stamp
    changes per request and would defeat the prompt cache)."""
    if not s.startswith(_BILLING):
        return s
    i = s.find("cch=", len(_BILLING))
    if i < 0:
        return s
    j = i + 4
    # compared in UTF-8 bytes, as std::string does
    b = s.encode("utf-8", "surrogateescape")
    j = len(s[:j].encode("utf-8", "surrogateescape"))
    if j + 5 < len(b) and b[j + 5:j + 6] == b";":
        b = b[:j] + b"fffff" + b[j + 5:]
        return b.decode("utf-8", "surrogateescape")
    return s


def _image_url(source) -> dict | None:
    st = _value(source, "type", "")
    if st == "base64":
        url = "data:" + _value(source, "media_type", "image/jpeg") + ";base64," + _value(source, "data", "")
    elif st == "url":
        url = _value(source, "url", "")
    else:
        return None
    return {"type": "image_url", "image_url": {"url": url}}


def _tool_result(block) -> dict:
    rid = _value(block, "tool_use_id", "")
    rc = block.get("content") if isinstance(block, dict) else None
    if isinstance(rc, str):
        content = rc
    elif isinstance(rc, list):
        joined, parts, images = "", [], False
        for c in rc:
            ct = _value(c, "type", "")
            if ct == "text":
                t = _value(c, "text", "")
                joined += t
                parts.append({"type": "text", "text": t})
            elif ct == "image":
                images = True
                part = _image_url(_value(c, "source", {}))
                if part is not None:
                    parts.append(part)
        content = parts if images else joined
    else:
        content = ""
    return {"role": "tool", "tool_call_id": rid, "content": content}


def _message(msg) -> list:
    """One Anthropic message as OpenAI chat messages (server-chat.cpp:378-512)."""
    role = _value(msg, "role", "")
    if not isinstance(msg, dict) or "content" not in msg:
        return [] if role == "assistant" else [msg]
    content = msg["content"]
    if not isinstance(content, list):
        return [msg]
    calls, parts, results, reasoning = [], [], [], ""
    for block in content:
        kind = _value(block, "type", "")
        if kind == "text":
            parts.append(block)
        elif kind == "thinking":
            reasoning += _value(block, "thinking", "")
        elif kind == "image":
            part = _image_url(_value(block, "source", {}))
            if part is not None:
                parts.append(part)
        elif kind == "tool_use":
            calls.append({"id": _value(block, "id", ""), "type": "function",
                          "function": {"name": _value(block, "name", ""),
                                       "arguments": dumps(_any(block, "input", {})).decode()}})
        elif kind == "tool_result":
            results.append(_tool_result(block))
    out = []
    if parts or calls or reasoning:
        m = {"role": role, "content": parts if parts else ""}
        if calls:
            m["tool_calls"] = calls
        if reasoning:
            m["reasoning_content"] = reasoning
        out.append(m)
    return out + results


class ConversionError(Exception):
    """What the rewrite throws (a std::runtime_error: llama-server's ex_wrapper answers 500)."""


def convert(body) -> dict:
    """server_chat_convert_anthropic_to_oai: the OpenAI chat body of an Anthropic Messages body."""
    messages = []
    system = body.get("system") if isinstance(body, dict) else None
    if system is not None:
        s = ""
        if isinstance(system, str):
            s = _billing(system)
        elif isinstance(system, list):
            for block in system:
                if _value(block, "type", "") == "text":
                    s += _billing(_value(block, "text", ""))
        messages.append({"role": "system", "content": s})
    if not isinstance(body, dict) or "messages" not in body:
        raise ConversionError("'messages' is required")
    if isinstance(body["messages"], list):
        for msg in body["messages"]:
            messages += _message(msg)
    out = {"messages": messages}
    tools = body.get("tools")
    if isinstance(tools, list):
        out["tools"] = [{"type": "function", "function": {
            "name": _value(t, "name", ""), "description": _value(t, "description", ""),
            "parameters": t["input_schema"] if isinstance(t, dict) and "input_schema" in t else {}}}
            for t in tools]
    tc = body.get("tool_choice")
    if isinstance(tc, dict):
        kind = _value(tc, "type", "")
        if kind == "auto":
            out["tool_choice"] = "auto"
        elif kind in ("any", "tool"):
            out["tool_choice"] = "required"
    if "stop_sequences" in body:
        out["stop"] = body["stop_sequences"]
    out["max_tokens"] = body["max_tokens"] if "max_tokens" in body else 4096
    for k in _PASSED:
        if k in body:
            out[k] = body[k]
    if "thinking" in body:
        th = _value(body, "thinking", {})
        if _value(th, "type", "") == "enabled":
            out["thinking_budget_tokens"] = _value(th, "budget_tokens", 10000)
    if "metadata" in body:
        uid = _value(_value(body, "metadata", {}), "user_id", "")
        if uid:
            out["__metadata_user_id"] = uid
    return out


# --- answers ----------------------------------------------------------------------------------------------------

def stop_reason(res: Final, calls=()) -> str:
    if res.stop in (STOP_WORD, STOP_EOS):
        return "tool_use" if calls else "end_turn"
    return "max_tokens"


def _usage(n_prompt: int, n_cached: int, n_out: int) -> dict:
    return {"cache_read_input_tokens": n_cached, "input_tokens": n_prompt - n_cached, "output_tokens": n_out}


def _input(arguments: str):
    """A tool_use block's input: the arguments' JSON value, an empty object where they do not parse."""
    from ....cxx import nljson
    try:
        return nljson.loads(arguments)
    except Exception:
        return {}


def _final_message(res_content: bytes, state: "MessageState"):
    """The final parse (update_chat_msg, not partial): (content, tool calls)."""
    if state.tools is None:
        return state.parse(res_content, False), []
    from ....errors import SchemaError
    from ...http import Refusal
    try:
        msg = state.final_message(res_content)
    except SchemaError as e:            # the final parse failed: llama-server's handler answers 500
        raise Refusal(500, e.message) from None
    if msg is None:
        return text(res_content), []
    return msg.content, list(msg.tool_calls)


def message_final(res: Final, model: str, cmpl_id: str, state: "MessageState") -> dict:
    """to_json_anthropic (server-task.cpp:731-795): a text block when the parsed content is not empty, then a
    tool_use block a parsed call."""
    content, calls = _final_message(res.content, state)
    blocks = [{"type": "text", "text": content}] if content else []
    for c in calls:
        blocks.append({"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments)})
    return {"id": cmpl_id, "type": "message", "role": "assistant", "content": blocks, "model": model,
            "stop_reason": stop_reason(res, calls), "stop_sequence": res.stopping_word or None,
            "usage": _usage(res.n_prompt_tokens, res.n_prompt_cached, res.n_decoded)}


def _ev(name: str, data: dict) -> dict:
    return {"event": name, "data": data}


def _block_start(index: int, block: dict) -> dict:
    return _ev("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})


def _block_delta(index: int, delta: dict) -> dict:
    return _ev("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def _text_events(state: "MessageState", delta: str) -> list:
    out = []
    if not state.text_started:
        out.append(_block_start(0, {"type": "text", "text": ""}))
        state.text_started = True
    out.append(_block_delta(0, {"type": "text_delta", "text": delta}))
    return out


def _diff_events(diffs: list[dict], text_started: bool, tool_index, started: set | None) -> tuple[list, bool]:
    """The events of a run of diffs (OpenAI deltas, bankml.server.api.families.oai_chat.tool_diffs): a content
    delta opens the text block (index 0) once, a call's delta goes to block `tool_index(text_started, i)`; a
    call's block opens on a delta naming it (`started` None: the partial results' rule) or on its first delta
    (`started`, a set: the final result's rule, with the call's full id and name)."""
    out = []
    for d in diffs:
        if d.get("content"):
            if not text_started:
                out.append(_block_start(0, {"type": "text", "text": ""}))
                text_started = True
            out.append(_block_delta(0, {"type": "text_delta", "text": d["content"]}))
        for tc in d.get("tool_calls", ()):
            i, fn = tc["index"], tc.get("function", {})
            k = tool_index(text_started, i)
            if started is None:
                if fn.get("name"):
                    out.append(_block_start(k, {"type": "tool_use", "id": tc.get("id", ""), "name": fn["name"]}))
            elif i not in started:
                started.add(i)
                out.append(_block_start(k, {"type": "tool_use", **tool_index.full(i)}))
            if fn.get("arguments"):
                out.append(_block_delta(k, {"type": "input_json_delta", "partial_json": fn["arguments"]}))
    return out, text_started


def partial_events(ev: Token, model: str, cmpl_id: str, state: "MessageState") -> list:
    """server_task_result_cmpl_partial::to_json_anthropic (server-task.cpp:1324-1460): message_start with the
    first token, then per change of the parsed message its events: a text block opened by the first content
    delta, a tool_use block opened by a delta that names its call (index: 1 after a text block, plus the call's)
    and input_json_delta events with the arguments' growth."""
    out = []
    if ev.n_decoded == 1:
        out.append(_ev("message_start", {"type": "message_start", "message": {
            "id": cmpl_id, "type": "message", "role": "assistant", "content": [], "model": model,
            "stop_reason": None, "stop_sequence": None,
            "usage": _usage(ev.n_prompt_tokens, ev.n_prompt_cached, 0)}}))
    if state.tools is None:
        d = state.diff(ev.text)
        if d:
            out += _text_events(state, d)
        return out
    events, state.text_started = _diff_events(state.deltas(ev.text), state.text_started,
                                              lambda text, i: int(text) + i, None)
    return out + events


class _FinalIndex:
    """The final result's block index of call i (after a text block when the final message has content) and
    the call's full id and name."""

    def __init__(self, has_text: bool, calls):
        self.has_text, self.calls = has_text, calls

    def __call__(self, _text_started: bool, i: int) -> int:
        return int(self.has_text) + i

    def full(self, i: int) -> dict:
        return {"id": self.calls[i].id, "name": self.calls[i].name}


def final_events(res: Final, state: "MessageState") -> list:
    """to_json_anthropic_stream (server-task.cpp:797-983): what the final parse adds, the text block's stop
    (when there is text), a stop per tool_use block, message_delta with the stop reason and output tokens,
    message_stop."""
    out = []
    if state.tools is None:
        # a stream's final result carries no text: the message is what the partial results sent
        content = state.parse(res.content or state.generated, False)
        if content != state.content and content.startswith(state.content):
            out += _text_events(state, content[len(state.content):])
        calls = []
    else:
        from .oai_chat import tool_diffs
        from ...http import Refusal
        old = state.msg
        try:
            content, calls = _final_message(state.generated, state)
        except Refusal:                 # as the OpenAI chat stream: the message the partial results sent
            content = old.content if old is not None else state.content
            calls = list(old.tool_calls) if old is not None else []
        new = state.msg
        diffs = tool_diffs(old if old is not None else type(new)(), new) if new is not None and new is not old else []
        # the final result's own run: its text block and call blocks are opened anew (local state)
        events, _ = _diff_events(diffs, False, _FinalIndex(bool(content), calls), set())
        out += events
    if content:
        out.append(_ev("content_block_stop", {"type": "content_block_stop", "index": 0}))
    for i in range(len(calls)):
        out.append(_ev("content_block_stop", {"type": "content_block_stop", "index": int(bool(content)) + i}))
    out.append(_ev("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop_reason(res, calls),
                                               "stop_sequence": res.stopping_word or None},
                                     "usage": {"output_tokens": res.n_decoded}}))
    out.append(_ev("message_stop", {"type": "message_stop"}))
    return out


class MessageState(ChatState):
    """The chat parser's state (with `tools`, the tool-call parser) and whether the text block has been opened."""

    def __init__(self, fmt=None, prefix: str = "", tools=None):
        super().__init__(fmt, prefix, tools)
        self.text_started = False


class AnthropicSSE(SSE):
    """format_anthropic_sse: `event: <name>\\ndata: <json>\\n\\n` per event; an error object (the family's
    refusal while streaming) goes as `event: error` with the bare {code, message, type}."""

    def __init__(self):
        super().__init__(done=False)

    def chunk(self, obj) -> bytes:
        if "event" not in obj and "error" in obj:
            obj = _ev("error", obj["error"])
        return b"event: " + obj["event"].encode() + b"\ndata: " + dumps(obj["data"]) + b"\n\n"


class AnthropicMessages(Family):
    name = "anthropic_messages"
    parses_tool_calls = True
    framing = AnthropicSSE()

    def read(self, ctx, body) -> FamilyRequest:
        from ...http import Refusal
        try:
            oai = convert(body)
        except ConversionError as e:
            raise Refusal(500, str(e)) from None
        return OAIChat.read(self, ctx, oai)

    def state(self, prep):
        from ....grammar.chat_tools import ChatToolCalls
        if isinstance(prep.fmt, ChatToolCalls):
            return MessageState(None, prep.prefix, prep.fmt)
        return MessageState(prep.fmt, prep.prefix)

    def final(self, reply, i, ev):
        return message_final(ev, reply.model, reply.prep.cmpl_id, reply.states[i])

    def chunks(self, reply, i, ev):
        if isinstance(ev, Final):
            return final_events(ev, reply.states[i])
        if isinstance(ev, Token):
            return partial_events(ev, reply.model, reply.prep.cmpl_id, reply.states[i])
        return []

    def merge(self, bodies):
        # one task per request: the converted body has no n
        return bodies[0]

