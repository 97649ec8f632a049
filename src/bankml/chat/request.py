"""A chat request → the prompt and the completion parameters, as llama-server b11192 does it.

Mirrors tools/server's `oaicompat_chat_params_parse` (server-common.cpp), calling chat.cpp's message / tool
parsing (bankml.chat.messages) and the template step (bankml.chat.template): the same checks in the same order,
the same error texts and HTTP statuses (400 where the reference throws std::invalid_argument, 500 for anything
else, as its ex_wrapper maps them). Used by /v1/chat/completions, /apply-template and
/v1/chat/completions/input_tokens.
Must not know: how templates are chosen or rendered, tokens, HTTP itself (the server routes write the answers).

    req = parse_chat_request(body, templates, ServerChatOptions())
    req.prompt            # the rendered prompt (str)
    req.llama_params      # the completion parameters llama-server hands on (prompt, stop, n_probs, ... and every
                          # body field the template step did not produce, copied through)

What is passed through and not handled here: `json_schema` (from `json_schema` or `response_format`; the grammar
step converts it; note that llama-server's chat grammar wraps the schema rule in the template's reasoning prefix
and an optional ```json fence), `grammar`, tools (rendered into the prompt, but llama-server also builds a
tool-call grammar and output parser: `req.has_tools` tells the caller), the serialized chat output parser
(`chat_parser`, not produced: `req.chat.format` / `generation_prompt` say which parser applies).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cxx import nljson
from .errors import ChatRequestError, TemplateError
from .errors import invalid_argument as _bad
from .errors import runtime_error as _fail
from .messages import (CONTINUE_AUTO, CONTINUE_CONTENT, CONTINUE_NONE, CONTINUE_REASONING, ChatInputs, ChatParams,
                       parse_messages, parse_tools)
from .template import SERVER_TEMPLATE_KWARGS, ChatTemplates

_FORMAT_IDS = {"content-only": 0, "peg-simple": 1, "peg-native": 2, "peg-gemma4": 3, "peg-minimax-m3": 4}
_REASONING_FORMATS = ("none", "auto", "deepseek", "deepseek-legacy")


@dataclass
class ServerChatOptions:
    """The server's side of the step (server_chat_params), as bankml-serve runs llama-server:
    `--jinja --reasoning off`, no multimodal projector, assistant prefill on (`use_jinja` False: --no-jinja)."""
    use_jinja: bool = True
    prefill_assistant: bool = True
    reasoning_format: str = "auto"
    chat_template_kwargs: dict[str, str] = field(default_factory=lambda: dict(SERVER_TEMPLATE_KWARGS))
    allow_image: bool = False
    allow_audio: bool = False
    allow_video: bool = False
    enable_thinking: bool = False
    reasoning_budget: int = -1
    reasoning_budget_message: str = ""
    force_pure_content: bool = False


@dataclass
class ChatRequest:
    prompt: str
    chat: ChatParams
    inputs: ChatInputs
    llama_params: dict
    has_tools: bool = False
    json_schema: object = None           # the parsed schema handed to the grammar step, or None


# ---------------------------------------------------------------------------------------------------------------
# json_value and friends

def _json_value(body, key: str, default, kind=None):
    """json_value: the field when present, not null and of the wanted type, else the default."""
    if not isinstance(body, dict) or key not in body or body[key] is None:
        return default
    v = body[key]
    kind = kind or type(default)
    if kind is object:
        return v
    if kind is bool:
        return v if isinstance(v, bool) else default
    if kind is str:
        return v if isinstance(v, str) else default
    if kind is int:
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, int):
            return v
        if isinstance(v, float):
            return int(v)
        return default
    if kind is dict:
        return v
    if kind is list:
        return v
    return v


def _items(v):
    """json::items(): objects by key, arrays by index as text, anything else one item with an empty key."""
    if isinstance(v, dict):
        return list(v.items())
    if isinstance(v, list):
        return [(str(i), x) for i, x in enumerate(v)]
    return [("", v)]


def parse_continuation(v) -> str:
    if v is True:
        return CONTINUE_AUTO
    if v == "reasoning_content":
        return CONTINUE_REASONING
    if v == "content":
        return CONTINUE_CONTENT
    return CONTINUE_NONE


# ---------------------------------------------------------------------------------------------------------------
# the server step

_MEDIA_HINT = " input is not supported - hint: if this is unexpected, you may need to provide the mmproj"

# Tools, tool calls and chat_template_kwargs reach the chat template, whose renderer (bankml.jinja) walks values
# recursively (tojson, loops): bankml refuses them nested deeper than this, with a 400 that names the limit, where
# llama-server answers up to a few ten thousand levels and then crashes on a stack overflow. docs/json_schema.md,
# "Depth and size limits".
MAX_TEMPLATE_DEPTH = 256
TEMPLATE_DEPTH_MESSAGE = (f"tools, tool calls and chat_template_kwargs nested deeper than {MAX_TEMPLATE_DEPTH} "
                          "levels are not supported (bankml's limit)")


def _check_template_depth(body, tools, messages) -> None:
    deepest = max(nljson.depth(tools), nljson.depth(_json_value(body, "chat_template_kwargs", None, object)))
    for msg in messages:
        if isinstance(msg, dict):
            deepest = max(deepest, nljson.depth(msg.get("tool_calls")))
    if deepest > MAX_TEMPLATE_DEPTH:
        raise _bad(TEMPLATE_DEPTH_MESSAGE)


def parse_chat_request(body, templates: ChatTemplates, opt: ServerChatOptions | None = None, *,
                       now: float | None = None, localtime=None) -> ChatRequest:
    """oaicompat_chat_params_parse. `body` is the decoded request JSON. Raises ChatRequestError."""
    opt = opt or ServerChatOptions()
    params: dict = {}

    tools = _json_value(body, "tools", None, object)
    has_tools = isinstance(tools, list) and len(tools) > 0
    stream = _json_value(body, "stream", False)
    tool_choice = _json_value(body, "tool_choice", "auto")
    if not opt.use_jinja:
        if has_tools:
            raise _fail("tools param requires --jinja flag")
        if tool_choice != "auto":
            raise _fail("tool_choice param requires --jinja flag")

    if nljson.contains(body, "stop") and isinstance(body["stop"], str):
        params["stop"] = [body["stop"]]
    else:
        params["stop"] = _json_value(body, "stop", [], object)

    json_schema = _json_value(body, "json_schema", None, object)
    grammar = _json_value(body, "grammar", "")
    if json_schema is not None and grammar:
        raise _fail("Cannot use both json_schema and grammar")

    if nljson.contains(body, "response_format"):
        rf = _json_value(body, "response_format", {}, object)
        rtype = _json_value(rf, "type", "")
        if rtype == "json_object":
            if nljson.contains(rf, "schema") or _nl_empty(json_schema):
                json_schema = _json_value(rf, "schema", {}, object)
        elif rtype == "json_schema":
            wrapper = _json_value(rf, "json_schema", {}, object)
            json_schema = _json_value(wrapper, "schema", {}, object)
        elif rtype and rtype != "text":
            raise _bad('response_format type must be one of "text" or "json_object", but got: ' + rtype)
    if isinstance(json_schema, dict) and not json_schema:
        json_schema = {"type": "object"}

    if not nljson.contains(body, "messages"):
        raise _bad("'messages' is required")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise _bad("Expected 'messages' to be an array")
    for msg in messages:
        role = _json_value(msg, "role", "")
        if role != "assistant" and not nljson.contains(msg, "content"):
            raise _bad("All non-assistant messages must contain 'content'")
        if role == "assistant":
            if not nljson.contains(msg, "content") and not nljson.contains(msg, "tool_calls"):
                raise _bad("Assistant message must contain either 'content' or 'tool_calls'!")
            if not nljson.contains(msg, "content"):
                continue
        content = msg["content"]
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, list):
            raise _bad("Expected 'content' to be a string or an array")
        for p in content:
            ptype = _json_value(p, "type", "")
            if ptype == "image_url":
                if not opt.allow_image:
                    raise _fail("image" + _MEDIA_HINT)
            elif ptype == "input_audio":
                if not opt.allow_audio:
                    raise _fail("audio" + _MEDIA_HINT)
            elif ptype in ("input_video", "video_url"):
                if not opt.allow_video:
                    raise _fail("video" + _MEDIA_HINT)
            elif ptype != "text":
                raise _bad("unsupported content[].type")
            if ptype != "text":
                raise ChatRequestError("media input is not supported by bankml", 501)

    _check_template_depth(body, tools, messages)
    caps = templates.caps()
    inputs = ChatInputs(now=now, localtime=localtime)
    inputs.messages = parse_messages(messages)
    inputs.tools = parse_tools(tools)
    if tool_choice not in ("auto", "none", "required"):
        raise _bad("Invalid tool_choice: " + tool_choice)
    inputs.tool_choice = tool_choice
    inputs.json_schema = "" if json_schema is None else nljson.dump(json_schema)
    inputs.grammar = grammar
    inputs.use_jinja = opt.use_jinja
    inputs.parallel_tool_calls = _json_value(body, "parallel_tool_calls", caps["supports_parallel_tool_calls"])
    inputs.add_generation_prompt = _json_value(body, "add_generation_prompt", True)
    inputs.continue_final_message = (parse_continuation(body["continue_final_message"])
                                     if "continue_final_message" in body else CONTINUE_NONE)
    if inputs.continue_final_message == CONTINUE_NONE and opt.prefill_assistant and inputs.messages \
            and inputs.messages[-1].role == "assistant":
        if len(inputs.messages) >= 2 and inputs.messages[-2].role == "assistant":
            raise _bad("Cannot have 2 or more assistant messages at the end of the list.")
        inputs.continue_final_message = CONTINUE_AUTO
        inputs.add_generation_prompt = False
    if inputs.continue_final_message != CONTINUE_NONE and inputs.add_generation_prompt:
        raise _bad("Cannot set both add_generation_prompt and continue_final_message to true.")
    if inputs.continue_final_message != CONTINUE_NONE and inputs.messages \
            and inputs.messages[-1].role == "assistant" and inputs.messages[-1].tool_calls:
        raise _bad("Cannot continue an assistant message that contains tool calls.")

    inputs.reasoning_format = opt.reasoning_format
    if "reasoning_format" in body:
        rf_name = body["reasoning_format"]
        if not isinstance(rf_name, str):
            raise _fail(nljson.type_must_be("string", rf_name).message)
        if rf_name not in _REASONING_FORMATS:
            raise _fail("Unknown reasoning format: " + rf_name)
        inputs.reasoning_format = rf_name
    inputs.enable_thinking = opt.enable_thinking
    if inputs.tools and inputs.tool_choice != "none":
        if "grammar" in body:
            raise _bad("Cannot use custom grammar constraints with tools.")
        params["parse_tool_calls"] = True

    kwargs = dict(opt.chat_template_kwargs)
    for k, v in _items(_json_value(body, "chat_template_kwargs", {}, object)):
        kwargs[k] = nljson.dump(v)
    et = kwargs.get("enable_thinking", "")
    if et == "true":
        inputs.enable_thinking = True
    elif et == "false":
        inputs.enable_thinking = False
    elif et.startswith('"'):
        raise _bad('invalid type for "enable_thinking" (expected boolean, got string)')
    if "reasoning_effort" in body:
        effort = _json_value(body, "reasoning_effort", "")
        if effort == "none":
            inputs.enable_thinking = False
            kwargs.pop("reasoning_effort", None)
        elif effort:
            kwargs["reasoning_effort"] = nljson.dump(effort)
    inputs.chat_template_kwargs = kwargs
    if opt.force_pure_content:
        raise ChatRequestError("--skip-chat-parsing is not supported by bankml", 501)

    try:
        chat = templates.apply(inputs)
    except TemplateError as e:
        raise ChatRequestError(e.message, e.status) from None
    except RecursionError:  # a tool call's JSON text nested deep: the same refusal, never Python's text
        raise _bad(TEMPLATE_DEPTH_MESSAGE) from None

    params["chat_format"] = _FORMAT_IDS[chat.format]
    params["prompt"] = chat.prompt
    if not inputs.use_jinja:
        legacy_grammar = _legacy_grammar(inputs)
        if legacy_grammar:
            params["grammar"] = legacy_grammar
            params["grammar_type"] = "tool_calls"
    params["grammar_lazy"] = False
    params["grammar_triggers"] = []
    params["preserved_tokens"] = []
    params["generation_prompt"] = chat.generation_prompt
    if chat.additional_stops:
        if params["stop"] is None:
            params["stop"] = []
        if not isinstance(params["stop"], list):
            raise _fail("[json.exception.type_error.308] cannot use push_back() with "
                        + nljson.type_name(params["stop"]))
        params["stop"] = list(params["stop"]) + chat.additional_stops
    params["message_delimiters"] = [{"role": r, "delimiter": d} for r, d in chat.message_delimiters]
    if chat.thinking_end_tags:
        budget = _json_value(body, "reasoning_budget_tokens", _json_value(body, "thinking_budget_tokens", -1))
        if budget == -1:
            budget = opt.reasoning_budget
        params["reasoning_budget_tokens"] = budget
        params["reasoning_budget_start_tag"] = chat.thinking_start_tag
        params["reasoning_budget_end_tags"] = list(chat.thinking_end_tags)
        params["reasoning_budget_message"] = _json_value(body, "reasoning_budget_message",
                                                         opt.reasoning_budget_message)
        params["reasoning_control"] = _json_value(body, "reasoning_control", False)

    if _json_value(body, "logprobs", False):
        if has_tools and stream:
            raise _bad("logprobs is not supported with tools + stream")
        params["n_probs"] = _json_value(body, "top_logprobs", 20, int)
    elif nljson.contains(body, "top_logprobs") and body["top_logprobs"] is not None:
        raise _bad("top_logprobs requires logprobs to be set to true")

    if isinstance(body, dict):
        for k, v in body.items():
            if k not in params or k == "n_predict":
                params[k] = v

    return ChatRequest(prompt=chat.prompt, chat=chat, inputs=inputs, llama_params=params,
                       has_tools=bool(inputs.tools), json_schema=json_schema)


def _legacy_grammar(inputs: ChatInputs) -> str:
    """common_chat_templates_apply_legacy's grammar: the JSON schema converted, else the request's grammar
    (json_schema_to_grammar's errors are std::invalid_argument: HTTP 400)."""
    if not inputs.json_schema:
        return inputs.grammar
    from ..errors import SchemaError
    from ..grammar import json_schema as js
    try:
        return js.to_gbnf(nljson.loads(inputs.json_schema))
    except SchemaError as e:
        raise _bad(e.message) from None


def _nl_empty(v) -> bool:
    """json::empty(): null, [] and {} are empty, any other value is not."""
    return v is None or (isinstance(v, (list, dict)) and not v)


def error_body(e: ChatRequestError) -> dict:
    """llama-server's error object for a refused request (format_error_response)."""
    return {"error": {"code": e.status, "message": e.message, "type": e.error_type}}


__all__ = ["ChatRequest", "ChatRequestError", "ServerChatOptions", "parse_chat_request", "parse_messages",
           "parse_tools", "error_body"]
