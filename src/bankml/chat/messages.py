"""Chat messages as llama.cpp's chat step holds them, and their OpenAI-style JSON parsed into them.

Owns the data of the chat step, the types every other module of bankml.chat passes around:
- ChatMessage / ContentPart / ToolCall (common_chat_msg and its parts), with the JSON a template sees of a
  message (to_json: common_chat_msg's to_json_oaicompat) and content parts joined as chat.cpp joins them;
- Tool, ChatInputs (common_chat_templates_inputs), ChatParams (common_chat_params: what the template step
  hands back), the continuation modes;
- parse_messages / parse_tools: chat.cpp's common_chat_msgs_parse_oaicompat and
  common_chat_tools_parse_oaicompat, with their checks in the reference's order and its error texts.
Must not know: templates, the request body around the messages (bankml.chat.request), tokens, HTTP.

    msgs = parse_messages([{"role": "user", "content": "hi"}])     # [ChatMessage("user", "hi")]
    msgs[0].to_json()                                               # {"role": "user", "content": "hi"}
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..cxx import nljson
from .errors import ChatRequestError, TemplateApplyError
from .errors import invalid_argument as _bad
from .errors import runtime_error as _fail

# continuation modes (common_chat_continuation)
CONTINUE_NONE = "none"
CONTINUE_AUTO = "auto"
CONTINUE_REASONING = "reasoning"
CONTINUE_CONTENT = "content"


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


def _bytes(s: str | bytes) -> bytes:
    return s if isinstance(s, bytes) else s.encode("utf-8", "surrogateescape")


# ---------------------------------------------------------------------------------------------------------------
# messages (common_chat_msg)

@dataclass
class ToolCall:
    name: str
    arguments: str                      # JSON text, as llama.cpp keeps it
    id: str = ""


@dataclass
class ContentPart:
    type: str                           # "text" or "media_marker"
    text: str


@dataclass
class ChatMessage:
    role: str
    content: str = ""
    content_parts: list[ContentPart] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning_content: str = ""
    tool_name: str = ""
    tool_call_id: str = ""

    def empty(self) -> bool:
        return not (self.content or self.content_parts or self.tool_calls or self.reasoning_content
                    or self.tool_name or self.tool_call_id)

    def contains_media(self) -> bool:
        return any(p.type == "media_marker" for p in self.content_parts)

    def render_content(self, delimiter: str = "\n\n") -> str:
        if self.content and self.content_parts:
            raise TemplateApplyError("Cannot specify both content and content_parts")
        if self.content:
            return self.content
        return delimiter.join(p.text for p in self.content_parts if p.type == "text")

    def to_json(self, concat_typed_text: bool = False) -> dict:
        """to_json_oaicompat: the message as the template sees it (unknown fields are gone)."""
        if self.content and self.content_parts:
            raise TemplateApplyError("Cannot specify both content and content_parts")
        m: dict = {"role": self.role}
        if self.content:
            m["content"] = self.content
        elif self.content_parts:
            if concat_typed_text or self.contains_media():
                m["content"] = concat_parts([{"type": p.type, "text": p.text} for p in self.content_parts])
            else:
                m["content"] = [{"type": p.type, "text": p.text} for p in self.content_parts]
        else:
            m["content"] = ""
        if self.reasoning_content:
            m["reasoning_content"] = self.reasoning_content
        if self.tool_name:
            m["name"] = self.tool_name
        if self.tool_call_id:
            m["tool_call_id"] = self.tool_call_id
        if self.tool_calls:
            calls = []
            for tc in self.tool_calls:
                c = {"type": "function", "function": {"name": tc.name, "arguments": tc.arguments}}
                if tc.id:
                    c["id"] = tc.id
                calls.append(c)
            m["tool_calls"] = calls
        return m


def concat_parts(parts: list) -> str:
    """Join content parts with "\\n", never next to a media marker; other part types are skipped."""
    text = ""
    last_media = False
    for p in parts:
        ptype = p.get("type", "") if isinstance(p, dict) else ""
        if ptype == "text":
            nl = not last_media and text != ""
            last_media = False
        elif ptype == "media_marker":
            nl = False
            last_media = True
        else:
            continue
        if nl:
            text += "\n"
        t = p.get("text", "")
        text += t if isinstance(t, str) else ""
    return text


@dataclass
class Tool:
    name: str
    description: str = ""
    parameters: str = "{}"              # JSON text


@dataclass
class ChatInputs:
    """common_chat_templates_inputs, as llama-server fills it for a chat request."""
    messages: list[ChatMessage] = field(default_factory=list)
    add_generation_prompt: bool = True
    continue_final_message: str = CONTINUE_NONE
    tools: list[Tool] = field(default_factory=list)
    tool_choice: str = "auto"
    json_schema: str = ""               # JSON text ("" = none)
    grammar: str = ""
    parallel_tool_calls: bool = False
    enable_thinking: bool = True
    chat_template_kwargs: dict[str, str] = field(default_factory=dict)   # name → JSON text
    reasoning_format: str = "none"
    use_jinja: bool = True              # False: llama-server's --no-jinja path (bankml.chat.legacy)
    now: float | None = None            # POSIX seconds for the date variables (default: the time of the call)
    localtime: object = None            # struct_time maker for `now` (default time.localtime)


@dataclass
class ChatParams:
    """What llama-server takes from the template step (common_chat_params)."""
    prompt: str                          # invalid UTF-8 (a template slicing bytes) kept via 'surrogateescape'
    generation_prompt: str
    format: str                          # "peg-native", "peg-gemma4", "peg-minimax-m3"; "content-only" (legacy)
    handler: str                         # "generic", the family handler chat.cpp picked, or "legacy"
    additional_stops: list[str] = field(default_factory=list)
    supports_thinking: bool = False
    thinking_start_tag: str = ""
    thinking_end_tags: list[str] = field(default_factory=list)
    # the autoparser's reasoning markers with their whitespace (the parser's optional spaces around them)
    reasoning_start: str = ""
    reasoning_end: str = ""
    # (role, text) pairs marking message starts in the prompt; the server places context checkpoints with them
    message_delimiters: list[tuple[str, str]] = field(default_factory=list)
    # the autoparser's tool-call format (bankml.chat.analysis.ToolFormat) on the generic path, for a request
    # with tools on a template that supports tool calls; None otherwise
    tool_format: object = None

    @property
    def prompt_bytes(self) -> bytes:
        return _bytes(self.prompt)


def parse_messages(messages) -> list[ChatMessage]:
    """common_chat_msgs_parse_oaicompat; errors are "Failed to parse messages: ..." (HTTP 500)."""
    try:
        return _parse_messages(messages)
    except (nljson.NLError, ChatRequestError) as e:
        raise _fail("Failed to parse messages: " + e.message) from None


def _parse_messages(messages) -> list[ChatMessage]:
    if not isinstance(messages, list):
        raise _bad("Expected 'messages' to be an array, got " + nljson.dump(messages))
    out = []
    for message in messages:
        if not isinstance(message, dict):
            raise _bad("Expected 'message' to be an object, got " + nljson.dump(message))
        if "role" not in message:
            raise _bad("Missing 'role' in message: " + nljson.dump(message))
        msg = ChatMessage(nljson.get_str(message["role"]))
        has_content = "content" in message
        has_tool_calls = "tool_calls" in message
        if has_content:
            content = message["content"]
            if isinstance(content, str):
                msg.content = content
            elif isinstance(content, list):
                for part in content:
                    if not nljson.contains(part, "type"):
                        raise _bad("Missing content part type: " + nljson.dump(part))
                    ptype = part["type"]
                    if ptype != "text" and ptype != "media_marker":
                        raise _bad("Unsupported content part type: " + nljson.dump(ptype))
                    msg.content_parts.append(ContentPart(ptype, nljson.get_str(nljson.at(part, "text"))))
            elif content is not None:
                raise _bad("Invalid 'content' type: expected string or array, got " + nljson.dump(content)
                           + " (ref: https://github.com/ggml-org/llama.cpp/issues/8367)")
        if has_tool_calls:
            for tc in nljson.iterate(message["tool_calls"]):
                if not nljson.contains(tc, "type"):
                    raise _bad("Missing tool call type: " + nljson.dump(tc))
                if tc["type"] != "function":
                    raise _bad("Unsupported tool call type: " + nljson.dump(tc))
                if "function" not in tc:
                    raise _bad("Missing tool call function: " + nljson.dump(tc))
                fc = tc["function"]
                if not nljson.contains(fc, "name"):
                    raise _bad("Missing tool call name: " + nljson.dump(tc))
                name = nljson.get_str(fc["name"])
                args = nljson.at(fc, "arguments")
                call = ToolCall(name, args if isinstance(args, str) else nljson.dump(args))
                if "id" in tc:
                    call.id = nljson.get_str(tc["id"])
                msg.tool_calls.append(call)
        if not has_content and not has_tool_calls:
            raise _bad("Expected 'content' or 'tool_calls' (ref: https://github.com/ggml-org/llama.cpp/issues/8367 & "
                       "https://github.com/ggml-org/llama.cpp/issues/12279)")
        if "reasoning_content" in message:
            msg.reasoning_content = nljson.get_str(message["reasoning_content"])
        if "name" in message:
            msg.tool_name = nljson.get_str(message["name"])
        if "tool_call_id" in message:
            msg.tool_call_id = nljson.get_str(message["tool_call_id"])
        out.append(msg)
    return out


def parse_tools(tools) -> list[Tool]:
    """common_chat_tools_parse_oaicompat; errors are "Failed to parse tools: ...; tools = ..." (HTTP 500)."""
    out = []
    try:
        if tools is not None:
            if not isinstance(tools, list):
                raise _bad("Expected 'tools' to be an array, got " + nljson.dump(tools))
            for tool in tools:
                if not nljson.contains(tool, "type"):
                    raise _bad("Missing tool type: " + nljson.dump(tool))
                if not isinstance(tool["type"], str) or tool["type"] != "function":
                    raise _bad("Unsupported tool type: " + nljson.dump(tool))
                if "function" not in tool:
                    raise _bad("Missing tool function: " + nljson.dump(tool))
                fn = tool["function"]
                name = nljson.get_str(nljson.at(fn, "name"))
                desc = nljson.value(fn, "description", "")
                params = nljson.value(fn, "parameters", {})
                out.append(Tool(name, desc, nljson.dump(params)))
    except (nljson.NLError, ChatRequestError) as e:
        raise _fail("Failed to parse tools: " + e.message + "; tools = " + nljson.dump(tools, 2)) from None
    return out
