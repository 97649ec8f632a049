"""Tools in a chat request: which requests llama-server b11192 answers without a tool-call grammar or parser,
and the refusal of the others.

Owns the decision the chat family makes once the template step has run (bankml.chat.request): a request with
`tools` is served when llama-server's answer to it is the template's plain content answer, or when its
tool-call format is one of the autoparser's JSON-native formats bankml.grammar.chat_tools builds (per-call
markers: Hermes 2 Pro, Hermes 3, Qwen 2.5, Granite 4.0; no marker: Llama 3.x; section markers: Mistral Nemo,
Firefunction v2, Apriel 1.5, MiniMax-M1, GigaChat 3.1; the name as the key: Apertus) with the content unwrapped,
or its TAG_WITH_JSON format (Functionary v3.1, Mistral Small 3.2, Solar Open),
and refused (501, naming the template's format) where llama-server would build another tool-call grammar and
parser, which bankml does not reproduce yet.
Must not know: HTTP, tokens, sampling, how the template renders the tools into the prompt (bankml.chat.template
does, for every request).

What b11192 does with `tools` on the generic path (no specialized handler; common/chat.cpp
common_chat_templates_apply_jinja, then the differential autoparser):

- The template's capabilities decide first: chat-diff-analyzer.cpp:261 analyses the tool format only when the
  template `supports_tool_calls`; otherwise the format stays "none". chat-auto-parser-generator.cpp:105 then
  builds the content parser (tools leave no trace in the parser), and :62-66 builds no grammar, for every
  `tool_choice` ("required" included). SmolLM2's own template is such a template: its answer with tools is its
  answer without them (the prompt rendered by the template, which ignores `tools`).
- `tool_choice` "none" on any generic template: the content parser, no grammar (:64-66 need "auto" with a
  trigger marker, or "required"); the tools are still rendered into the prompt.
- `tool_choice` given as an object (a named function): server-common.cpp:1161 reads it with json_value as a
  string, so an object falls back to "auto" (bankml.chat.request does the same).
- `parallel_tool_calls` only reaches the template (and the tool grammar, which these requests do not have).

A template that thinks (the autoparser found reasoning markers) gets the reasoning parser before the tool parser
(chat-auto-parser-generator.cpp build_parser: `prefix(generation prompt up to the reasoning start) space
reasoning? content? calls end`; bankml.grammar.chat_tools.Thinking): served in the same formats, tool_choice auto
or required, on the OpenAI chat family, which answers reasoning_content beside the calls (Qwen3, QwQ, Bielik,
Reka Edge, Apriel 1.6, DeepSeek R1 Distill Qwen, DeepSeek V3.1, llama.cpp's DeepSeek R1).

Everything else (a template that supports tool calls in another format, with tool_choice "auto" or
"required": TAG_WITH_TAGGED, nested keys, wrapped content (Command R+, Command R7B, where llama-server answers
a 500 "does not match the expected peg-native format"); any specialized handler: gpt-oss, Functionary v3.2,
Qwen3-Coder, ...; on a template that thinks, the content parser after the reasoning parser (tool_choice none,
or no tool-call support: SmolLM3, DeepSeek R1 Distill Llama, Granite 3.3), whose answers did not replay (the
content differs by a leading newline the reasoning end marker's optional whitespace takes), and the reasoning
beside tool calls in the Anthropic and Responses families) is refused by `refusal()`.
"""

from __future__ import annotations

from .messages import ChatInputs, ChatParams


def served_without_tool_parser(chat: ChatParams, inputs: ChatInputs, caps: dict[str, bool]) -> bool:
    """True when llama-server answers this request with tools exactly as a content answer: the generic path,
    and a template without tool-call support or tool_choice "none"."""
    if not inputs.tools:
        return True
    if chat.handler != "generic" or chat.supports_thinking:
        return False
    return inputs.tool_choice == "none" or not caps.get("supports_tool_calls", False)


def served_with_tool_parser(chat: ChatParams, inputs: ChatInputs, caps: dict[str, bool],
                            parse_reasoning: bool = True) -> bool:
    """True when llama-server builds a tool-call grammar and parser bankml reproduces: the generic path, one of
    the autoparser's JSON-native formats bankml.grammar.chat_tools builds (ToolFormat.served_json) or its
    TAG_WITH_JSON format (ToolFormat.served_tag_json), tool_choice auto or required; on a template that thinks
    (the reasoning parser before the calls) only where the caller answers reasoning_content (`parse_reasoning`)
    and the reasoning has an end marker (without one b11192 parses no reasoning, which no record shows)."""
    fmt = chat.tool_format
    thinks_ok = not chat.supports_thinking or (parse_reasoning and bool(chat.thinking_end_tags))
    return (bool(inputs.tools) and inputs.tool_choice in ("auto", "required") and chat.handler == "generic"
            and thinks_ok and caps.get("supports_tool_calls", False)
            and fmt is not None and (fmt.served_json or fmt.served_tag_json))


def refusal(chat: ChatParams, inputs: ChatInputs, caps: dict[str, bool], parse_tools: bool = True,
            parse_reasoning: bool = True) -> str | None:
    """The 501 message for a request with tools bankml does not reproduce, or None when it is served.
    `parse_tools`: whether the caller answers parsed tool calls (the OpenAI chat family does; the families that
    reuse its request step refuse them); `parse_reasoning`: whether it answers the reasoning parsed beside them
    (the OpenAI chat family does; Anthropic's thinking blocks and the Responses reasoning items are not
    verified with tools)."""
    if served_without_tool_parser(chat, inputs, caps):
        return None
    if parse_tools and served_with_tool_parser(chat, inputs, caps, parse_reasoning):
        return None
    fmt = chat.tool_format
    if chat.handler != "generic":
        where = f"the {chat.handler} chat format"
    elif chat.supports_thinking:
        if not caps.get("supports_tool_calls", False):
            what = "the content parser, the template having no tool-call support"
        elif inputs.tool_choice == "none":
            what = "the content parser"
        elif fmt is None or not (fmt.served_json or fmt.served_tag_json):
            mode = fmt.mode.upper() if fmt is not None else "NONE"
            what = f"{mode} tool calls"
        elif not chat.thinking_end_tags:
            what = "no reasoning end marker"
        else:
            what = "the reasoning beside tool calls in this API family"
        where = f"a template that thinks (the autoparser's reasoning parser with {what})"
    else:
        mode = fmt.mode.upper() if fmt is not None else "NONE"
        where = f"the chat format the autoparser derives from this template (peg-native, {mode} tool calls)"
    return (f"tool calls (tool_choice {inputs.tool_choice}) in {where} are not reproduced by bankml yet")


__all__ = ["refusal", "served_with_tool_parser", "served_without_tool_parser"]
