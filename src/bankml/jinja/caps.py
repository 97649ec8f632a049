"""Template capabilities, probed as llama.cpp b11192's common/jinja/caps.cpp probes them.

The template is run on small fixed conversations with usage tracking on; which input values it touched (and
how: as a string, as an array, through `selectattr`) decides whether it takes string content, typed content
(lists of parts), a system role, tools, tool calls (with object or string arguments, one or several), and
whether it keeps reasoning in the history or reads a reasoning effort. chat.cpp reshapes the messages from
these answers before every render, so they must be the reference's answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import values as V
from .errors import JinjaError
from .runtime import Context, execute_program


@dataclass
class Caps:
    supports_tools: bool = True
    supports_tool_calls: bool = True
    supports_system_role: bool = True
    supports_parallel_tool_calls: bool = True
    supports_preserve_reasoning: bool = False
    supports_reasoning_effort: bool = False
    supports_string_content: bool = True
    supports_typed_content: bool = False
    supports_object_arguments: bool = False

    def to_map(self) -> dict[str, bool]:
        """As /props reports them (std::map: sorted by name)."""
        return dict(sorted(self.__dict__.items()))


def apply_preserve_reasoning(ctx: Context, enabled: bool) -> None:
    ctx.set(b"preserve_thinking", V.VBool(enabled))
    ctx.set(b"clear_thinking", V.VBool(not enabled))
    ctx.set(b"truncate_history_thinking", V.VBool(not enabled))
    ctx.set(b"drop_thinking", V.VBool(not enabled))


def apply_reasoning_effort(ctx: Context, effort: bytes) -> None:
    var = V.VStr(effort)
    ctx.set(b"reasoning_effort", var)
    ctx.set(b"reasoning_strength", var)


_TOOLS = [{
    "name": "tool", "type": "function",
    "function": {"name": "tool1", "description": "Tool description",
                 "parameters": {"type": "object",
                                "properties": {"arg": {"type": "string", "description": "Arg description"}},
                                "required": ["arg"]}},
}]


def _tool_conv(args, n_calls: int = 1) -> list:
    calls = [{"id": "call0000%d" % (i + 1), "type": "function", "function": {"name": "tool1", "arguments": args}}
             for i in range(n_calls)]
    return [
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": "Tool response", "tool_call_id": "call00001"},
        {"role": "assistant", "content": "The tool response was 'tool response'"},
        {"role": "user", "content": "User message"},
    ]


def _try(program, messages, ctx_fn=None, tools=None):
    """caps_try_execute: (success, context, messages value, tools value, output)."""
    ctx = Context()
    ctx.get_stats = True
    inp = {"messages": messages, "tools": tools if tools is not None else [], "bos_token": "", "eos_token": "",
           "add_generation_prompt": True}
    for k, v in inp.items():
        ctx.set(k.encode(), V.from_json(v))
    if ctx_fn:
        ctx_fn(ctx)
    msgs = ctx.get(b"messages")
    tls = ctx.get(b"tools")
    try:
        out = execute_program(program, ctx)
        ok = True
    except JinjaError:
        out = b""
        ok = False
    return ok, ctx, msgs, tls, out


def _field(v: V.Value, *path):
    for p in path:
        if isinstance(p, int):
            if not isinstance(v, V.VArray):
                raise V.fail(v.type() + b" is not an array value")
            v = v.at(p)
        else:
            if not isinstance(v, V.VObject):
                raise V.fail(v.type() + b" is not an object value")
            v = v.at(V.VStr(p.encode()))
    return v


def probe(program) -> Caps:
    """caps_get."""
    caps = Caps()
    marker = "STRING_MARKER"

    ok, _, msgs, _, out = _try(program, [{"role": "user", "content": marker}])
    content = _field(msgs, 0, "content")
    checks_for_string = content.has_op("test_is_string")
    used_as_array = content.has_op("selectattr") or content.has_op("array_access")
    if used_as_array:
        caps.supports_typed_content = True
    if not ok:
        caps.supports_string_content = False
    elif used_as_array and marker.encode() not in out:
        caps.supports_string_content = False

    if checks_for_string:
        ok, _, msgs, _, _ = _try(program, [{"role": "user", "content": []}])
        content = _field(msgs, 0, "content")
        if (content.has_op("selectattr") or content.has_op("array_access")) and ok:
            caps.supports_typed_content = True

    ok, _, msgs, _, _ = _try(program, [{"role": "system", "content": "System message"},
                                       {"role": "user", "content": "User message"}])
    if not _field(msgs, 0, "content").used:
        caps.supports_system_role = False

    ok, _, msgs, tools, _ = _try(program, _tool_conv({"arg": "value"}), tools=_TOOLS)
    if ok:
        if not _field(tools, 0, "function", "name").used:
            caps.supports_tools = False
        tool_calls = _field(msgs, 1, "tool_calls")
        if not tool_calls.used:
            caps.supports_tool_calls = False
        elif _field(tool_calls, 0, "function", "arguments", "arg").used:
            caps.supports_object_arguments = True

    if not caps.supports_object_arguments:
        ok, _, msgs, tools, _ = _try(program, _tool_conv('{"arg": "value"}'), tools=_TOOLS)
        if not ok:
            caps.supports_tool_calls = False
            caps.supports_tools = False
        else:
            if not _field(tools, 0, "function", "name").used:
                caps.supports_tools = False
            if not _field(msgs, 1, "tool_calls").used:
                caps.supports_tool_calls = False

    args = {"arg": "value"} if caps.supports_object_arguments else '{"arg": "value"}'
    ok, _, msgs, _, _ = _try(program, _tool_conv(args, 2), tools=_TOOLS)
    if not ok:
        caps.supports_parallel_tool_calls = False
    elif not _field(msgs, 1, "tool_calls", 1, "function").used:
        caps.supports_parallel_tool_calls = False

    placeholder = b"<REASONING_CONTENT_PLACEHOLDER>"

    def reasoning_ctx(ctx: Context) -> None:
        ctx.set(b"enable_thinking", V.VBool(True))
        apply_preserve_reasoning(ctx, True)

    ok, _, _, _, out = _try(program, [
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": placeholder.decode()},
        {"role": "user", "content": "User message"},
        {"role": "assistant", "content": "Assistant message", "reasoning_content": "Reasoning content"},
        {"role": "user", "content": "User message"},
    ], reasoning_ctx)
    if placeholder in out:
        caps.supports_preserve_reasoning = True

    def effort_ctx(ctx: Context) -> None:
        ctx.set(b"enable_thinking", V.VBool(True))
        apply_reasoning_effort(ctx, b"low")

    ok, ctx, _, _, _ = _try(program, [{"role": "user", "content": "User message"}], effort_ctx)
    caps.supports_reasoning_effort = ctx.get(b"reasoning_effort").used
    return caps
