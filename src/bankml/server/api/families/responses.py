"""The OpenAI Responses family, POST /v1/responses (/responses), as llama-server b11192 serves it.

llama-server has no Responses engine of its own: it rewrites the body into an OpenAI chat body
(server_chat_convert_responses_to_chatcmpl, tools/server/server-chat.cpp:6-318), runs the OpenAI chat step on it
(oaicompat_chat_params_parse) and writes the results in the Responses shapes
(server_task_result_cmpl_final::to_json_oaicompat_resp / _resp_stream, server-task.cpp:528-675, and
server_task_result_cmpl_partial::to_json_oaicompat_resp, server-task.cpp:1166-1310). Here likewise: `convert` is
the rewrite (its refusals are 400s: std::invalid_argument through ex_wrapper, server.cpp:60-63), the OpenAI chat
family's request step (families.oai_chat) takes the converted body from there, and this family writes the
response object and the stream's events.

Unlike the Anthropic rewrite, every key of the body but `input`, `instructions`, `tools`, `max_output_tokens` and
`reasoning` reaches the chat step as it is (temperature, stream, seed, n_probs, return_progress, tool_choice,
parallel_tool_calls, ...). Function tools become chat tools and take the chat step's path: the tool-call formats it
parses are served (their parsed calls are `function_call` output items, streamed as output_item.added and
function_call_arguments.delta events), the others get its 501; tools of other types are dropped, as llama-server
drops them (with a warning).

The stream is SSE with an `event:` line before each `data:` line and no end marker (format_oai_resp_sse,
server-common.cpp:1639-1655); an error after the stream opened is a bare `data: {"error": {...}}` chunk
(format_oai_sse, server-context.cpp:4438-4447). Its events carry no sequence numbers (b11192 writes none).
The ids (`resp_`, `msg_`, `rs_` + 32 random characters) are drawn once per task (task_result_state,
server-task.cpp:151-155); the non-stream answer's message id is drawn afresh (server-task.cpp:574). A call's item
is `fc_` + its tool call id, its call_id `call_` + the same id.

This module knows the Responses JSON only: no routes, no sockets, no worker.
"""

from __future__ import annotations

import time

from ...generation import Final, Progress, Token
from ...http import Refusal, dumps
from ..info import random_string
from .base import SSE, Family, FamilyRequest, progress_json, text
from .oai_chat import ChatState, OAIChat

_INPUT_PARTS = "'type' must be one of 'input_text', 'input_image', or 'input_file'"


class ConversionError(ValueError):
    """What the rewrite throws: a std::invalid_argument, which llama-server's ex_wrapper answers with 400
    (invalid_request_error)."""

    status = 400


def _str_value(obj, key: str) -> str:
    """json_value(obj, key, std::string()): a string value, else "" (null, another type, no key)."""
    v = obj.get(key) if isinstance(obj, dict) else None
    return v if isinstance(v, str) else ""


def _is_str(obj, key: str) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get(key), str)


def _is_list(obj, key: str) -> bool:
    return isinstance(obj, dict) and isinstance(obj.get(key), list)


def _input_parts(parts: list) -> list:
    """The content parts of an input message (server-chat.cpp:65-95)."""
    out = []
    for part in parts:
        kind = _str_value(part, "type")
        if kind == "input_text":
            if "text" not in part:
                raise ConversionError("'Input text' requires 'text'")
            out.append({"text": part["text"], "type": "text"})
        elif kind == "input_image":
            if "image_url" not in part:
                raise ConversionError("'image_url' is required")
            out.append({"image_url": {"url": part["image_url"]}, "type": "image_url"})
        elif kind == "input_file":
            raise ConversionError("'input_file' is not supported by llamacpp at this moment")
        else:
            raise ConversionError(_INPUT_PARTS)
    return out


def _output_parts(item: dict) -> list:
    """The content parts of an assistant output message (server-chat.cpp:113-150): output_text (or input_text,
    which a string content became) and refusal."""
    out = []
    content = item.get("content")
    if isinstance(content, str):
        out.append({"text": content, "type": "text"})
    elif isinstance(content, list):
        for part in content:
            kind = _str_value(part, "type")
            if kind in ("output_text", "input_text"):
                if not _is_str(part, "text"):
                    raise ConversionError("'Output text' requires 'text'")
                out.append({"text": part["text"], "type": "text"})
            elif kind == "refusal":
                if not _is_str(part, "refusal"):
                    raise ConversionError("'Refusal' requires 'refusal'")
                out.append({"refusal": part["refusal"], "type": "refusal"})
            else:
                raise ConversionError("'type' must be one of 'output_text' or 'refusal'")
    return out


def _without(item: dict, *keys) -> dict:
    return {k: v for k, v in item.items() if k not in keys}


def _tool_output(item: dict) -> dict:
    """A function_call_output item as a tool message (server-chat.cpp:196-232)."""
    output = item["output"]
    if isinstance(output, str):
        return {"content": output, "role": "tool", "tool_call_id": item["call_id"]}
    parts = []
    for part in output:
        if not isinstance(part, dict) or "type" not in part:
            raise ConversionError("Output of tool call missing 'type' field")
        kind = part["type"]
        if kind not in ("input_text", "input_image"):
            raise ConversionError("Output of tool call should be 'Input text' or 'Input image'")
        part = dict(part)
        if kind == "input_text":
            part["type"] = "text"
        else:
            if "image_url" not in part:
                raise ConversionError("'image_url' is required")
            part["type"] = "image_url"
            part["image_url"] = {"url": part["image_url"]}
        parts.append(part)
    return {"content": parts, "role": "tool", "tool_call_id": item["call_id"]}


def _messages(items: list) -> list:
    """The input item list as chat messages (server-chat.cpp:33-266). An assistant item (output message,
    function call, reasoning) that follows an assistant message joins it: its text parts extend the content, a
    call extends tool_calls, a reasoning text replaces reasoning_content."""
    msgs: list = []
    for item in items:
        merge = bool(msgs) and msgs[-1].get("role") == "assistant"
        if _is_str(item, "content"):
            # a string content: one input_text part (an easy input message, or an output message's text)
            item = dict(item)
            item["content"] = [{"text": item["content"], "type": "input_text"}]
        role = item.get("role") if isinstance(item, dict) else None
        kind = item.get("type") if isinstance(item, dict) else None
        if _is_list(item, "content") and role in ("user", "system", "developer"):
            m = _without(item, "type", "status")
            m["content"] = _input_parts(item["content"])
            msgs.append(m)
        elif role == "assistant" and kind == "message":
            parts = _output_parts(item)
            if merge:
                prev = msgs[-1]
                if not isinstance(prev.get("content"), list):
                    prev["content"] = []
                prev["content"] += parts
            else:
                m = _without(item, "type", "status")
                m["content"] = parts
                msgs.append(m)
        elif (_is_str(item, "arguments") and _is_str(item, "call_id") and _is_str(item, "name")
              and kind == "function_call"):
            call = {"function": {"arguments": item["arguments"], "name": item["name"]}, "id": item["call_id"],
                    "type": "function"}
            if merge:
                prev = msgs[-1]
                if not isinstance(prev.get("tool_calls"), list):
                    prev["tool_calls"] = []
                prev["tool_calls"].append(call)
            else:
                msgs.append({"role": "assistant", "tool_calls": [call]})
        elif (_is_str(item, "call_id") and (_is_str(item, "output") or _is_list(item, "output"))
              and kind == "function_call_output"):
            msgs.append(_tool_output(item))
        elif _is_list(item, "summary") and kind == "reasoning":
            content = item.get("content")
            if not isinstance(content, list):
                raise ConversionError("item['content'] is not an array")
            if not content:
                raise ConversionError("item['content'] is empty")
            if not _is_str(content[0], "text"):
                raise ConversionError("item['content']['text'] is not a string")
            if merge:
                msgs[-1]["reasoning_content"] = content[0]["text"]
            else:
                msgs.append({"role": "assistant", "content": [], "reasoning_content": content[0]["text"]})
        else:
            raise ConversionError("Cannot determine type of 'item'")
    return msgs


def convert(body) -> dict:
    """server_chat_convert_responses_to_chatcmpl: the OpenAI chat body of a Responses body (raises
    ConversionError)."""
    if not isinstance(body, dict) or "input" not in body:
        raise ConversionError("'input' is required")
    if _str_value(body, "previous_response_id"):
        raise ConversionError("llama.cpp does not support 'previous_response_id'.")
    value = body["input"]
    out = {k: v for k, v in body.items() if k != "input"}
    msgs = []
    if "instructions" in body:
        msgs.append({"role": "system", "content": _str_value(body, "instructions")})
        del out["instructions"]
    if isinstance(value, str):
        msgs.append({"role": "user", "content": value})
    elif isinstance(value, list):
        msgs += _messages(value)
    else:
        raise ConversionError("'input' must be a string or array of objects")
    out["messages"] = msgs
    if "tools" in body:
        if not isinstance(body["tools"], list):
            raise ConversionError("'tools' must be an array of objects")
        tools = []
        for t in body["tools"]:
            if _str_value(t, "type") != "function":
                continue    # a tool of another type has no chat equivalent: skipped (server-chat.cpp:274-279)
            fn = _without(t, "type")
            fn.setdefault("strict", True)
            tools.append({"type": "function", "function": fn})
        del out["tools"]
        if tools:
            out["tools"] = tools
    if "max_output_tokens" in body:
        del out["max_output_tokens"]
        out["max_tokens"] = body["max_output_tokens"]
    if "reasoning" in body:
        r = body["reasoning"]
        if isinstance(r, dict) and "effort" in r:
            out["reasoning_effort"] = r["effort"]
        del out["reasoning"]
    return out


# --- answers ----------------------------------------------------------------------------------------------------

def _usage(res: Final) -> dict:
    return {"input_tokens": res.n_prompt_tokens, "output_tokens": res.n_decoded,
            "total_tokens": res.n_decoded + res.n_prompt_tokens,
            "input_tokens_details": {"cached_tokens": res.n_prompt_cached}}


def _text_part(content: str) -> dict:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": content}


def _function_call(call, status: str) -> dict:
    """A parsed call as a function_call output item (the final results' key order)."""
    return {"id": "fc_" + call.id, "type": "function_call", "status": status, "arguments": call.arguments,
            "call_id": "call_" + call.id, "name": call.name}


def _final_message(generated: bytes, state: "ResponseState", stream: bool) -> tuple[str, list]:
    """The final parse (update_chat_msg, not partial): (content, tool calls). Without tools, the response
    format's content; with them, the parsed message (the last non-empty one: chat_msg), whose failure answers a
    500 (a stream keeps the message its partial results sent)."""
    if state.tools is None:
        return state.parse(generated, False), []
    from ....errors import SchemaError
    old = state.msg
    try:
        msg = state.final_message(generated)
    except SchemaError as e:
        if not stream:                  # llama-server's handler answers 500
            raise Refusal(500, e.message) from None
        msg = old
    if msg is None:
        return "", []
    return msg.content, list(msg.tool_calls)


def response_final(res: Final, model: str, state: "ResponseState") -> dict:
    """to_json_oaicompat_resp (server-task.cpp:528-597): a message item when there is text (the raw text when
    the parsed message is empty), then a function_call item a parsed call; status completed whatever the stop."""
    content, calls = _final_message(res.content, state, False)
    if not content and not calls:
        content = text(res.content)
    output = []
    if content:
        output.append({"content": [_text_part(content)], "id": "msg_" + random_string(32), "role": "assistant",
                       "status": "completed", "type": "message"})
    output += [_function_call(c, "completed") for c in calls]
    t = int(time.time())
    return {"completed_at": t, "created_at": t, "id": state.resp_id, "model": model, "object": "response",
            "output": output, "status": "completed", "usage": _usage(res)}


def _ev(name: str, data: dict) -> dict:
    return {"event": name, "data": {"type": name, **data}}


def _in_progress(state: "ResponseState", name: str) -> dict:
    return _ev(name, {"response": {"id": state.resp_id, "object": "response", "status": "in_progress"}})


def _diff_events(d: dict, state: "ResponseState") -> list:
    """The events of one diff (an OpenAI delta, oai_chat.tool_diffs): its text opens the message item and its
    output_text part once, then goes as an output_text delta; a delta naming a call opens that call's
    function_call item (and makes it the call the following argument deltas belong to), arguments go as a
    function_call_arguments delta."""
    out = []
    if d.get("content"):
        if not state.text_started:
            out.append(_ev("response.output_item.added", {"item": {
                "content": [], "id": state.message_id, "role": "assistant", "status": "in_progress",
                "type": "message"}}))
            out.append(_ev("response.content_part.added", {"item_id": state.message_id,
                                                           "part": {"type": "output_text", "text": ""}}))
            state.text_started = True
        out.append(_ev("response.output_text.delta", {"item_id": state.message_id, "delta": d["content"]}))
    for tc in d.get("tool_calls", ()):
        fn = tc.get("function", {})
        if fn.get("name"):
            cid = tc.get("id", "")
            out.append(_ev("response.output_item.added", {"item": {
                "id": "fc_" + cid, "arguments": "", "call_id": "call_" + cid, "name": fn["name"],
                "type": "function_call", "status": "in_progress"}}))
            state.fc_id = cid
        if fn.get("arguments"):
            out.append(_ev("response.function_call_arguments.delta", {"delta": fn["arguments"],
                                                                      "item_id": "fc_" + state.fc_id}))
    return out


def partial_events(ev, state: "ResponseState") -> list:
    """to_json_oaicompat_resp (partial, server-task.cpp:1166-1310) with the state update before it
    (server-task.cpp:985-1023): response.created and .in_progress until a first token or a progress report has
    been seen (another .in_progress per progress report after that), then the events of each diff of the parsed
    message; the last event carries timings and prompt_progress."""
    progress = isinstance(ev, Progress)
    out = []
    if not state.created:
        out += [_in_progress(state, "response.created"), _in_progress(state, "response.in_progress")]
    elif progress:
        out.append(_in_progress(state, "response.in_progress"))
    if progress or ev.n_decoded == 1:
        state.created = True
    if not progress:
        for d in state.deltas(ev.text):
            out += _diff_events(d, state)
    if out:
        data = out[-1]["data"]
        if ev.stats is not None:
            data["timings"] = ev.stats
        if progress:
            data["prompt_progress"] = progress_json(ev)
    return out


def final_events(res: Final, model: str, state: "ResponseState") -> list:
    """to_json_oaicompat_resp_stream (server-task.cpp:599-675): the text's done events and the message item
    when there is text, an output_item.done per parsed call (its function_call item, completed), then
    response.completed with the output and usage (and timings). What the final parse adds is in the done events
    only: no delta is sent for it."""
    content, calls = _final_message(res.content or state.generated, state, True)
    out, output = [], []
    if content:
        part = _text_part(content)
        item = {"type": "message", "status": "completed", "id": state.message_id, "content": [part],
                "role": "assistant"}
        out.append(_ev("response.output_text.done", {"item_id": state.message_id, "text": content}))
        out.append(_ev("response.content_part.done", {"item_id": state.message_id, "part": part}))
        out.append(_ev("response.output_item.done", {"item": item}))
        output.append(item)
    for c in calls:
        item = _function_call(c, "completed")
        out.append(_ev("response.output_item.done", {"item": item}))
        output.append(item)
    out.append(_ev("response.completed", {"response": {
        "id": state.resp_id, "object": "response", "created_at": int(time.time()), "status": "completed",
        "model": model, "output": output, "usage": _usage(res)}}))
    if res.stats is not None:
        out[-1]["data"]["timings"] = res.stats
    return out


class ResponseState(ChatState):
    """task_result_state for a Responses answer: the chat parser's state (with `tools`, the tool-call parser),
    the ids drawn for the task, whether response.created has gone out, whether the message item has been opened
    and the tool call id of the last call item opened (oai_resp_fc_id)."""

    def __init__(self, fmt=None, prefix: str = "", tools=None):
        super().__init__(fmt, prefix, tools)
        self.resp_id = "resp_" + random_string(32)
        self.reasoning_id = "rs_" + random_string(32)
        self.message_id = "msg_" + random_string(32)
        self.created = False
        self.text_started = False
        self.fc_id = ""


class ResponsesSSE(SSE):
    """format_oai_resp_sse: `event: <name>\\ndata: <json>\\n\\n` per event; an error object (the family's
    refusal while streaming) is a plain `data: {"error": ...}` chunk, as format_oai_sse writes it."""

    def __init__(self):
        super().__init__(done=False)

    def chunk(self, obj) -> bytes:
        if "event" not in obj:
            return super().chunk(obj)
        return b"event: " + obj["event"].encode() + b"\ndata: " + dumps(obj["data"]) + b"\n\n"


class OAIResponses(Family):
    name = "oai_responses"
    parses_tool_calls = True
    framing = ResponsesSSE()

    def read(self, ctx, body) -> FamilyRequest:
        try:
            oai = convert(body)
        except ConversionError as e:
            raise Refusal(e.status, str(e)) from None
        return OAIChat.read(self, ctx, oai)

    def state(self, prep):
        from ....grammar.chat_tools import ChatToolCalls
        if isinstance(prep.fmt, ChatToolCalls):
            return ResponseState(None, prep.prefix, prep.fmt)
        return ResponseState(prep.fmt, prep.prefix)

    def final(self, reply, i, ev):
        return response_final(ev, reply.model, reply.states[i])

    def chunks(self, reply, i, ev):
        if isinstance(ev, Final):
            return final_events(ev, reply.model, reply.states[i])
        if isinstance(ev, (Token, Progress)):
            return partial_events(ev, reply.states[i])
        return []

    def merge(self, bodies):
        # several results (n > 1) are not merged for this API: the array of the response objects
        # (server-context.cpp:4376-4379)
        return bodies
