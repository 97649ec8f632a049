"""Tool calls in a chat answer: the grammar llama-server b11192 builds for a request with `tools`, and the
message (content + tool_calls) it parses out of the output.

Owns one of the autoparser's tool-call formats, JSON_NATIVE with per-call markers (the analysis that finds
it is bankml.chat.analysis.analyze_tools): each call is a JSON object between the markers, e.g.

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Berlin"}}
    </tool_call>

as Hermes 2 Pro, Hermes 3 and Qwen 2.5 render it. The parser (chat-auto-parser-generator.cpp's JSON-native
builder over chat-peg-parser.cpp's standard_json_tools, flat keys) is, in words:

    <generation prompt> space  [ content: anything up to the call marker ]  tool-calls  end
    tool-calls (a trigger rule) = one or more of ( tool-call space ), each tool-call optional under "auto"
    tool-call  (a trigger rule) = marker space CALL [ space "," space CALL ]* (the list only with
                                  parallel_tool_calls) space end-marker
    CALL = one rule "tool-<name>" per tool: "{" then the name and arguments members in the template's order
           ("name": "<the tool's name>", kept whole or not at all while streaming; "arguments": the tool's
           parameters schema over a JSON value), then "}"

Under tool_choice "auto" the grammar is lazy: its root is the choice of the trigger rules (`tool-call |
tool-calls`), started by the word trigger on the call marker; under "required" it is the whole parser printed,
fed the generation prompt first. Mapping the parse tree (common_chat_peg_mapper): the content tag's text is
the content; a call opens at its "{", is added once its name is complete (arguments "{" until the arguments'
text starts), and its arguments are the JSON text as generated, trailing whitespace cut.

Not reproduced byte for byte: the number in the names of the `until-N` rules (llama.cpp numbers them by the
parser's index in its arena); the language is the same, so sampling is.
Must not know: HTTP, ids, streaming (bankml.server.api.families.oai_chat diffs the parsed messages).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from bankml.errors import SchemaError
from bankml.grammar import json_schema as js
from bankml.grammar.chat import (CHAT_PARSER_ERROR, FAIL, Arena, Peg, _Parse, arena_grammar)

TRIGGER_WORD = 1


@dataclass
class ToolCall:
    name: str = ""
    arguments: str = ""
    id: str = ""


@dataclass
class ToolMessage:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)

    def empty(self) -> bool:
        return not self.content and not self.tool_calls


def _params_schema(parameters: str):
    """common_chat_tool_parameters: the tool's parameters, or an empty object schema when absent / empty."""
    p = json.loads(parameters) if parameters else None
    if p is None or (isinstance(p, dict) and not p):
        return {"type": "object", "properties": {}}
    return p


def json_native_arena(tools, fmt, generation_prompt: str, required: bool, parallel: bool) -> Arena:
    """The autoparser's parser for `fmt` (a bankml.chat.analysis.ToolFormat of mode json_native with per-call
    markers, flat name / arguments keys) over `tools` (bankml.chat.messages.Tool)."""
    a = Arena()
    ws = Peg("space")
    choices = []
    for t in tools:
        node = js.build_document(_params_schema(t.parameters))
        name = a.seq(a.literal('"' + fmt.name_field + '"'), ws, a.literal(":"), ws,
                     a.atomic(a.seq(a.literal('"'), a.tag("tool-name", a.literal(t.name)), a.literal('"'))))
        args = a.seq(a.literal('"' + fmt.args_field + '"'), ws, a.literal(":"), ws,
                     a.tag("tool-args", Peg("schema", f"tool-{t.name}-schema", children=[a.json()], node=node)))
        pairs = sorted([(name, fmt.name_field), (args, fmt.args_field)],
                       key=lambda pk: fmt.parameter_order.index(pk[1]) if pk[1] in fmt.parameter_order
                       else len(fmt.parameter_order))
        parts = [a.tag("tool-open", a.literal("{")), ws]
        for i, (pp, _) in enumerate(pairs):
            parts.append(pp)
            if i < len(pairs) - 1:
                parts += [ws, a.literal(","), ws]
        parts += [ws, a.tag("tool-close", a.literal("}"))]
        body = a.seq(*parts)
        choices.append(a.rule("tool-" + t.name, lambda body=body: a.tag("tool", body)))
    choice = a.choice(*choices)
    calls = choice
    if parallel:
        calls = a.seq(calls, a.rep(a.seq(ws, a.literal(","), ws, choice), 0, -1))
    section = a.rule("tool-call", lambda: a.seq(a.literal(fmt.per_call_start), ws, calls, ws,
                                                a.literal(fmt.per_call_end)), trigger=True)
    single = section if required else a.rep(section, 0, 1)
    tool_calls = a.rule("tool-calls", lambda: a.rep(a.seq(single, ws), 1, -1), trigger=True)
    body = a.seq(a.eps(), a.rep(a.tag("content", a.until(fmt.per_call_start)), 0, 1), tool_calls, Peg("end"))
    prefix = a.literal(generation_prompt) if generation_prompt else a.eps()
    a.root = a.seq(prefix, ws, body)
    return a


def _brace_depth(s: str) -> int:
    depth, in_str, esc = 0, False, False
    for c in s:
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
    return depth


def _map(nodes, s: bytes) -> ToolMessage:
    """common_chat_peg_mapper over the parse tree (pre-order), for the content and JSON tool-call tags."""
    msg = ToolMessage()
    st = {"pending": None, "current": None, "buffer": ""}

    def text(start, end) -> str:
        return (s[start:end] if start < len(s) else b"").decode("utf-8", "surrogateescape")

    def visit(node):
        tag, start, end, children = node
        if tag == "content":
            msg.content += text(start, end)
        elif tag == "tool-open":
            st["pending"] = st["current"] = ToolCall()
            st["buffer"] = ""
        elif tag == "tool-name" and st["current"] is not None:
            cur = st["current"]
            cur.name = text(start, end).rstrip()
            if st["buffer"]:
                cur.arguments, st["buffer"] = st["buffer"], ""
            elif not cur.arguments:
                cur.arguments = "{"
            if st["pending"] is not None:
                msg.tool_calls.append(st["pending"])
                st["pending"] = None
        elif tag == "tool-args" and st["current"] is not None:
            t = text(start, end).rstrip()
            if t.startswith("{"):
                if st["current"].name:
                    st["current"].arguments = t
                else:
                    st["buffer"] = t
        elif tag == "tool-close" and st["current"] is not None:
            cur = st["current"]
            if not cur.name and st["buffer"]:
                cur.arguments, st["buffer"] = st["buffer"], ""
            cur.arguments += "}" * max(0, _brace_depth(cur.arguments))
            if st["pending"] is not None:
                if cur.name:
                    msg.tool_calls.append(st["pending"])
                st["pending"] = None
        for c in children:
            visit(c)

    for n in nodes:
        visit(n)
    p = st["pending"]
    if p is not None and p.name:
        if st["buffer"]:
            p.arguments = st["buffer"]
        msg.tool_calls.append(p)
    return msg


@dataclass
class ChatToolCalls:
    """What a chat request with tools resolves to under a tool-call format: the grammar (lazy under "auto",
    with its word trigger), and the parser of the answer into a message."""

    grammar: str
    lazy: bool
    triggers: list[dict]
    generation_prompt: str
    arena: Arena

    def parse(self, generated: str | bytes, partial: bool) -> ToolMessage | None:
        """The message parsed from the generated text (common_chat_peg_parse, lenient); None where the parse
        fails on a partial text with nothing consumed; SchemaError (llama-server's 500) where a final parse
        fails."""
        raw = generated.encode("utf-8", "surrogateescape") if isinstance(generated, str) else bytes(generated)
        s = self.generation_prompt.encode("utf-8", "surrogateescape") + raw
        t, end, nodes = _Parse(self.arena, s).run(self.arena.root, 0)
        if t == FAIL:
            if partial and end > 0:
                return _map(nodes, s)
            raise SchemaError("The model produced output that does not match the expected peg-native format")
        return _map(nodes, s)


def tool_calls(tools, fmt, generation_prompt: str, tool_choice: str, parallel: bool) -> ChatToolCalls:
    """The grammar and parser for a request's tools under `fmt`. Raises SchemaError with the chat prefix
    (400) where a tool's parameters schema does not convert."""
    required = tool_choice == "required"
    try:
        arena = json_native_arena(tools, fmt, generation_prompt, required, parallel)
        lazy = not required
        grammar = arena_grammar(arena, lazy)
    except SchemaError as e:
        raise SchemaError(CHAT_PARSER_ERROR + e.message) from None
    triggers = [{"type": TRIGGER_WORD, "value": fmt.per_call_start}] if lazy else []
    return ChatToolCalls(grammar, lazy, triggers, generation_prompt, arena)


__all__ = ["ChatToolCalls", "ToolCall", "ToolMessage", "json_native_arena", "tool_calls"]
