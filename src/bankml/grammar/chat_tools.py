"""Tool calls in a chat answer: the grammar llama-server b11192 builds for a request with `tools`, and the
message (content + tool_calls) it parses out of the output.

Owns the autoparser's JSON-native tool-call formats (the analysis that finds them is
bankml.chat.analysis.analyze_tools): each call is a JSON object, e.g.

    <tool_call>\n{"name": "get_weather", "arguments": {"city": "Berlin"}}\n</tool_call>     Hermes 2 Pro / 3, Qwen 2.5,
                                                                                          Granite 4.0 (per-call markers)
    {"name": "get_weather", "parameters": {"city": "Berlin"}}                             Llama 3.x (no marker)
    [TOOL_CALLS][{"name": "get_weather", "arguments": {...}, "id": "abc123def"}]           Mistral Nemo (section, array, id)
    functools[{...}] / <tool_calls>[{...}]</tool_calls> / <tool_calls>\n{...}</tool_calls>  Firefunction v2, Apriel 1.5,
                                                                                          MiniMax-M1 (section markers)
    <|function_call|>{...}                                                                GigaChat 3.1 (no end marker)
    <|tools_prefix|>[{"get_weather": {"city": "Berlin"}}]<|tools_suffix|>                 Apertus (the name as the key)

The parser (chat-auto-parser-generator.cpp's JSON-native builder over chat-peg-parser.cpp's
standard_json_tools) is, in words:

    <generation prompt> space  [ content: anything up to the first marker, or "{" without one ]  TOOLS  end
    per-call markers: TOOLS = rule "tool-calls" (trigger) = one or more of ( tool-call space )
    otherwise:        TOOLS = tool-call
    tool-call (a trigger rule; optional unless tool_choice is "required") = start space CALLS space end-marker,
          start / end the per-call or the section markers; CALLS = CALL [ space "," space CALL ]* (the list
          only with parallel_tool_calls), inside "[" ... "]" where the template writes an array
    CALL = one rule "tool-<name>" per tool: "{" [ "type": "function", where the template asks for
           {"name", "parameters"} ] then the name, arguments and id members in the template's order, comma
           separated (an id member optional; its value a string or a number), "}"; or, with the name as the
           key, "{" "<name>" ":" arguments "}"

The autoparser's TAG_WITH_JSON format (tag_json_arena; build_tool_parser_tag_json): a call is its name between
text the analysis found, the arguments one JSON object, e.g.

    <function=get_weather>{"city": "Berlin"}</function>                                  Functionary v3.1
    [TOOL_CALLS]get_weather[ARGS][CALL_ID]abc123def[ARGS]{"city": "Berlin"}               Mistral Small 3.2
    <|tool_calls|><|tool_call:begin|>call00001<|tool_call:name|>get_weather<|tool_call:args|>{...}
        <|tool_call:end|><|calls|>                                                          Solar Open

    <generation prompt> space [ content: anything up to the first marker ]  TOOLS  end
    per-call markers: TOOLS = rule "tool-call" (trigger) = start CALL end [ space start CALL end ]* (the list with
          parallel calls), inside rule "tool-calls" (trigger) = section-start space tool-call space section-end
          (or the end of the text) where there is a section; otherwise TOOLS = "tool-call" = section-start CALL
          [ ", " CALL ]* section-end; optional unless tool_choice is "required"
    CALL = one rule "tool-<name>" per tool: name-prefix NAME name-suffix [ call-id-prefix ID ]? call-id-suffix
           space ARGUMENTS, then space closer, or a look at the per-call end, or space

(The analysis's findings are taken as they are: on Mistral Small 3.2 the name's suffix is `[ARGS]` and the id
section follows it; on Solar Open the probe's id `call00001` is part of the name's prefix. llama-server's grammar
is the same.)

The name's string is kept whole or not at all while streaming (PEG `atomic`; in TAG_WITH_JSON the whole opener,
prefix + name + suffix, as chat-peg-parser.h's tool_open / tool_name / tool_id / tool_close tags are atomic); the arguments are the tool's
parameters schema over a JSON value. Under tool_choice "auto" the grammar is lazy: its root is the choice of
the trigger rules, started by a word trigger on the first marker (and on `{"type": "function",` where the
template asks for the wrapper); a format without a marker (Llama 3.x) has no grammar under "auto" (the answer
is sampled freely and parsed). Under "required" it is the whole parser printed, fed the generation prompt
first. Mapping the parse tree (common_chat_peg_mapper): the content tag's text is the content; a call opens
at its "{", is added once its name is complete (arguments "{" until the arguments' text starts), its
arguments are the JSON text as generated (trailing whitespace cut) and its id the id member's text.

On a template that thinks (`Thinking`: the autoparser's reasoning markers, whitespace kept) the parser reads
only the generation prompt's part before the reasoning start marker, then optional whitespace and the reasoning
parser before the content (analyze_reasoning::build_parser):

    [ start-with-optional-whitespace ] reasoning: anything up to the end marker (trimmed)  end-with-optional-whitespace

optional, tagged "reasoning" (the message's reasoning_content; whitespace only is dropped), nothing where the
request's reasoning_format is "none" (the block then stays in the content). A lazy grammar holds none of it (its
rules are the trigger rules'); the "required" grammar prints it, fed the generation prompt first.

Not built: TAG_WITH_TAGGED (arguments as tags), which bankml.chat.tools refuses.
Not reproduced byte for byte: the number in the names of the `until-N` rules (llama.cpp numbers them by the
parser's index in its arena); the language is the same, so sampling is. Not built: nested keys
(`"function": {"name", "arguments"}`), which bankml.chat.tools refuses.
Must not know: HTTP, random ids, streaming (bankml.server.api.families.oai_chat diffs the parsed messages).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from bankml.errors import SchemaError
from bankml.grammar import json_schema as js
from bankml.grammar.chat import (CHAT_PARSER_ERROR, FAIL, Arena, Peg, _Parse, arena_grammar)

TRIGGER_WORD = 1
_SPACE = " \t\n\r\f\v"      # std::isspace


@dataclass
class ToolCall:
    name: str = ""
    arguments: str = ""
    id: str = ""


@dataclass
class ToolMessage:
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    reasoning_content: str = ""

    def empty(self) -> bool:
        return not self.content and not self.tool_calls and not self.reasoning_content


@dataclass(frozen=True)
class Thinking:
    """A template that thinks, as the parser takes it (the autoparser's reasoning analysis): its reasoning markers
    with their whitespace (`start` may be empty: the reasoning then runs from the generation prompt up to `end`),
    and whether the request's reasoning_format extracts the reasoning (any but "none")."""
    start: str
    end: str
    extract: bool = True


def _optspace(a: Arena, tag: str) -> Peg:
    """The marker with each of its leading and trailing whitespace characters optional (optspace)."""
    core = tag.strip(_SPACE)
    lead = tag[:len(tag) - len(tag.lstrip(_SPACE))]
    trail = tag[len(tag.rstrip(_SPACE)):] if core else ""
    parts = [a.eps()] + [a.rep(a.literal(c), 0, 1) for c in lead] + [a.literal(core)]
    return a.seq(*parts, *[a.rep(a.literal(c), 0, 1) for c in trail])


def reasoning_parser(a: Arena, thinking: Thinking | None) -> Peg:
    """analyze_reasoning's parser: an optional reasoning block, its text tagged "reasoning" up to the end marker
    (trimmed), the markers with optional whitespace; nothing where the template does not think, the request does
    not extract reasoning or the analysis found no end marker."""
    if thinking is None or not thinking.extract or not thinking.end.strip(_SPACE):
        return a.eps()
    block = [a.tag("reasoning", a.until(thinking.end.strip(_SPACE))), _optspace(a, thinking.end)]
    if thinking.start:
        block.insert(0, _optspace(a, thinking.start))
    return a.rep(a.seq(*block), 0, 1)


def _prefix(a: Arena, generation_prompt: str, thinking: Thinking | None) -> Peg:
    """The generation prompt the parser reads first; on a template that thinks only the part before the
    reasoning start marker (trimmed), the rest being the reasoning parser's (common_chat_peg_builder::prefix)."""
    if not generation_prompt:
        return a.eps()
    start = thinking.start.strip(_SPACE) if thinking is not None else ""
    if start and generation_prompt.find(start) >= 0:
        return a.literal(generation_prompt[:generation_prompt.find(start)])
    return a.literal(generation_prompt)


def _params_schema(parameters: str):
    """common_chat_tool_parameters: the tool's parameters, or an empty object schema when absent / empty."""
    p = json.loads(parameters) if parameters else None
    if p is None or (isinstance(p, dict) and not p):
        return {"type": "object", "properties": {}}
    return p


def _field(a: Arena, key: str, value: Peg) -> Peg:
    ws = Peg("space")
    return a.seq(a.literal('"' + key + '"'), ws, a.literal(":"), ws, value)


def _id_member(a: Arena, key: str, number: bool = True) -> Peg:
    """An id member: `"key": "<string>"` (or a JSON number where `number`), its value tagged tool-id, kept
    whole or not at all (atomic)."""
    quoted = a.seq(a.literal('"'), a.tag("tool-id", Peg("string", '"')), a.literal('"'))
    value = a.choice(quoted, a.tag("tool-id", a.json_number())) if number else quoted
    return a.atomic(_field(a, key, value))


def _args(a: Arena, t) -> Peg:
    node = js.build_document(_params_schema(t.parameters))
    return a.tag("tool-args", Peg("schema", f"tool-{t.name}-schema", children=[a.json()], node=node))


def _flat_call(a: Arena, t, fmt, name_key: str, args_key: str) -> Peg:
    """build_json_tools_flat_keys: "{", the optional OpenAI `"type": "function",`, then the name, arguments and
    id members in the template's order (comma-separated; an id member optional), "}"."""
    ws = Peg("space")
    name = _field(a, name_key, a.atomic(a.seq(a.literal('"'), a.tag("tool-name", a.literal(t.name)),
                                                a.literal('"'))))
    pairs = [(name, name_key), (_field(a, args_key, _args(a, t)), args_key)]
    if fmt.id_field:
        pairs.append((a.rep(_id_member(a, fmt.id_field), 0, 1), fmt.id_field))
    if fmt.gen_id_field:
        pairs.append((a.rep(_id_member(a, fmt.gen_id_field), 0, 1), fmt.gen_id_field))
    order = fmt.parameter_order
    pairs.sort(key=lambda pk: order.index(pk[1]) if pk[1] in order else len(order))
    parts = [a.tag("tool-open", a.literal("{")), ws]
    if fmt.openai_wrapper_trigger:
        parts.append(a.rep(a.seq(a.literal('"type"'), ws, a.literal(":"), ws, a.literal('"function"'), ws,
                                 a.literal(","), ws), 0, 1))
    for i, (pp, _) in enumerate(pairs):
        parts.append(pp)
        if i < len(pairs) - 1:
            parts += [ws, a.literal(","), ws]
    parts += [ws, a.tag("tool-close", a.literal("}"))]
    return a.seq(*parts)


def _name_is_key_call(a: Arena, t, fmt) -> Peg:
    """build_json_tools_function_is_key: `{"<name>": <arguments>}` (the template keeps no other field)."""
    ws = Peg("space")
    inner = []
    if fmt.id_field:
        inner.append(a.rep(a.seq(_id_member(a, fmt.id_field, number=False), ws,
                                 a.rep(a.seq(a.literal(","), ws), 0, 1)), 0, 1))
    if fmt.gen_id_field:
        inner.append(a.rep(a.seq(_id_member(a, fmt.gen_id_field), ws, a.rep(a.seq(a.literal(","), ws), 0, 1)),
                           0, 1))
    inner.append(_field(a, fmt.args_field or "arguments", _args(a, t)) if fmt.args_field else _args(a, t))
    if not fmt.args_field and len(inner) == 1:
        obj = inner[0]
    else:
        parts = [a.literal("{"), ws]
        for i, f in enumerate(inner):
            parts.append(f)
            if i < len(inner) - 1:
                parts.append(ws)
        obj = a.seq(*parts, ws, a.literal("}"))
    return a.seq(a.tag("tool-open", a.literal("{")), ws, a.literal('"'), a.tag("tool-name", a.literal(t.name)),
                 a.literal('"'), ws, a.literal(":"), ws, obj, ws, a.tag("tool-close", a.literal("}")))


def _standard_json_tools(a: Arena, tools, fmt, start: str, end: str, required: bool, parallel: bool) -> Peg:
    """standard_json_tools: one rule "tool-<name>" per tool, a comma-separated list of them with parallel calls,
    "[" ... "]" where the template wraps calls in an array, between `start` and `end` (trigger rule
    "tool-call"), optional unless tool_choice is "required"."""
    ws = Peg("space")
    choices = []
    for t in tools:
        body = _name_is_key_call(a, t, fmt) if fmt.fun_name_is_key else \
            _flat_call(a, t, fmt, fmt.name_field or "name", fmt.args_field or "arguments")
        choices.append(a.rule("tool-" + t.name, lambda body=body: a.tag("tool", body)))
    choice = a.choice(*choices)
    calls = choice
    if parallel:
        calls = a.seq(calls, a.rep(a.seq(ws, a.literal(","), ws, choice), 0, -1))
    if fmt.tools_array_wrapped:
        calls = a.seq(a.literal("["), ws, calls, ws, a.literal("]"))
    section = a.rule("tool-call", lambda: a.seq(a.literal(start), ws, calls, ws, a.literal(end)), trigger=True)
    return section if required else a.rep(section, 0, 1)


def json_native_arena(tools, fmt, generation_prompt: str, required: bool, parallel: bool,
                      thinking: Thinking | None = None) -> Arena:
    """The autoparser's parser for `fmt` (a bankml.chat.analysis.ToolFormat of mode json_native that
    `fmt.served_json` accepts) over `tools` (bankml.chat.messages.Tool): build_tool_parser_json_native, after the
    reasoning parser where the template thinks."""
    a = Arena()
    ws = Peg("space")
    reasoning = reasoning_parser(a, thinking)
    if not fmt.section_start and fmt.per_call_start:
        single = _standard_json_tools(a, tools, fmt, fmt.per_call_start, fmt.per_call_end, required, parallel)
        tools_parser = a.rule("tool-calls", lambda: a.rep(a.seq(single, ws), 1, -1), trigger=True)
    else:
        tools_parser = _standard_json_tools(a, tools, fmt, fmt.section_start, fmt.section_end, required, parallel)
    tool_start = fmt.section_start or fmt.per_call_start or "{"
    body = a.seq(reasoning, a.rep(a.tag("content", a.until(tool_start)), 0, 1), tools_parser, Peg("end"))
    a.root = a.seq(_prefix(a, generation_prompt, thinking), ws, body)
    return a


def _tag_json_call(a: Arena, t, fmt) -> Peg:
    """build_tool_parser_tag_json's call (build_func_parser): the name between its prefix and suffix (tag
    tool-open), an optional call id between the name and the arguments, space, the arguments (a JSON value under
    the tool's parameters schema), then the closer, or a look at the per-call end marker, or space (tag
    tool-close). Kept whole or not at all while partial (atomic) unless a name suffix or an id marks it off."""
    ws = Peg("space")
    have_id = False
    id_section = a.eps()
    if fmt.call_id_pos == "between_func_and_args" and fmt.call_id_prefix and fmt.call_id_suffix:
        id_section = a.seq(a.rep(a.seq(a.literal(fmt.call_id_prefix),
                                       a.atomic(a.tag("tool-id", a.until(fmt.call_id_suffix)))), 0, 1),
                           a.literal(fmt.call_id_suffix))
        have_id = True
    # tool_open / tool_name / tool_id / tool_close are atomic tags (chat-peg-parser.h): a call shows once its
    # opener (prefix, name, suffix) is whole
    opener = a.atomic(a.tag("tool-open", a.seq(a.literal(fmt.name_prefix),
                                               a.atomic(a.tag("tool-name", a.literal(t.name))),
                                               a.literal(fmt.name_suffix))))
    atomic_done = True
    if fmt.name_suffix:
        body = a.seq(opener, id_section, ws, _args(a, t))
    elif have_id:
        body = a.seq(a.atomic(a.seq(opener, id_section)), ws, _args(a, t))
    else:
        body = a.seq(opener, id_section, ws, _args(a, t))
        atomic_done = False
    if fmt.close:
        body = a.seq(body, ws, a.atomic(a.tag("tool-close", a.literal(fmt.close))))
    elif fmt.per_call_end:
        body = a.seq(body, a.atomic(a.tag("tool-close", a.peek(a.literal(fmt.per_call_end)))))
    else:
        body = a.seq(body, a.atomic(a.tag("tool-close", ws)))
    return body if atomic_done else a.atomic(body)


def tag_json_arena(tools, fmt, generation_prompt: str, required: bool, parallel: bool,
                   thinking: Thinking | None = None) -> Arena:
    """The autoparser's parser for a TAG_WITH_JSON format (build_tool_parser_tag_json): optional content up to
    the first marker, then the calls: per-call markers around each call (trigger rule "tool-call", repeated
    with parallel calls, inside the section's markers where there are some: trigger rule "tool-calls"), or
    the section's markers around calls separated by ", "; optional unless tool_choice is "required"."""
    a = Arena()
    ws = Peg("space")
    reasoning = reasoning_parser(a, thinking)
    marker = fmt.section_start or fmt.per_call_start
    # the content's `until` is numbered first: llama.cpp numbers it after the calls' (arena order: 133 against
    # 5 on Mistral Small 3.2) and prints the rules sorted by name as text, which puts "until-133" first
    before = a.until(marker) if marker else a.eps()
    choice = a.choice(*[a.rule("tool-" + t.name, lambda t=t: _tag_json_call(a, t, fmt)) for t in tools])
    if fmt.per_call_start:
        wrapped = a.seq(a.literal(fmt.per_call_start), choice, a.literal(fmt.per_call_end))
        calls = a.rule("tool-call", (lambda: a.seq(wrapped, a.rep(a.seq(ws, wrapped), 0, -1))) if parallel
                       else (lambda: wrapped), trigger=True)
        if fmt.section_start:
            end = a.literal(fmt.section_end) if fmt.section_end else Peg("end")
            inner = calls
            calls = a.rule("tool-calls", lambda: a.seq(a.literal(fmt.section_start), ws, inner, ws, end),
                           trigger=True)
    else:
        body = [a.literal(fmt.section_start), choice]
        if parallel:
            body.append(a.rep(a.seq(a.literal(", "), choice), 0, -1))
        body.append(a.literal(fmt.section_end))
        calls = a.rule("tool-call", lambda: a.seq(*body), trigger=True)
    if not required:
        calls = a.rep(calls, 0, 1)
    body = a.seq(reasoning, a.rep(a.tag("content", before), 0, 1), calls, Peg("end"))
    a.root = a.seq(_prefix(a, generation_prompt, thinking), ws, body)
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
        elif tag == "reasoning":
            msg.reasoning_content += text(start, end)
        elif tag == "tool-open":
            st["pending"] = st["current"] = ToolCall()
            st["buffer"] = ""
        elif tag == "tool-id" and st["current"] is not None:
            t = text(start, end).rstrip(" \t\n\r")
            if len(t) >= 2 and t[0] == '"' and t[-1] == '"':
                t = t[1:-1]
            st["current"].id = t
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
    if not msg.reasoning_content.strip(" \n\r\t"):   # reasoning of whitespace only (an empty block) is dropped
        msg.reasoning_content = ""
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


def tool_calls(tools, fmt, generation_prompt: str, tool_choice: str, parallel: bool,
               thinking: Thinking | None = None) -> ChatToolCalls:
    """The grammar and parser for a request's tools under `fmt` (after the reasoning parser where `thinking`
    is given). Raises SchemaError with the chat prefix (400) where a tool's parameters schema does not convert.
    No grammar (grammar "") under "auto" where the format has no marker to trigger on (Llama 3.x): the answer is
    then sampled freely and parsed."""
    required = tool_choice == "required"
    marker = fmt.section_start or fmt.per_call_start
    try:
        build = tag_json_arena if fmt.mode == "tag_with_json" else json_native_arena
        arena = build(tools, fmt, generation_prompt, required, parallel, thinking)
        lazy = not required
        grammar = arena_grammar(arena, lazy) if required or marker else ""
    except SchemaError as e:
        raise SchemaError(CHAT_PARSER_ERROR + e.message) from None
    if not grammar:
        return ChatToolCalls("", False, [], generation_prompt, arena)
    triggers = [{"type": TRIGGER_WORD, "value": marker}] if lazy else []
    if lazy and fmt.openai_wrapper_trigger:
        triggers.append({"type": TRIGGER_WORD, "value": '{"type": "function",'})
    return ChatToolCalls(grammar, lazy, triggers, generation_prompt, arena)


__all__ = ["ChatToolCalls", "Thinking", "ToolCall", "ToolMessage", "json_native_arena", "reasoning_parser",
           "tag_json_arena", "tool_calls"]
