"""Template analysis: what rendering probe conversations tells about a template.

Owns the reasoning and message-start part of llama.cpp's autoparser (common/chat-diff-analyzer.cpp): the diff of
two renders split into common prefix / suffix and the differing middles (calculate_diff_split, by <...> / [...]
markers, then by bytes), the reasoning markers and mode it finds from renders with and without a
reasoning_content, with enable_thinking on and off, and with tool calls, the markers that open a user and an
assistant message, and the autoparser's per-family corrections of those findings.
Must not know: the per-family handlers chat.cpp picks before the autoparser (bankml.chat.handlers), requests,
tokens. It only renders templates it is given.

    diff_split(b"<a>x</a>", b"<a>y</a>")   # {"prefix": b"<a>", "suffix": b"</a>", "left": b"x", "right": b"y"}
    r = analyze_reasoning(parsed_template)  # Reasoning(mode="tag_based", start=b"<think>", end=b"</think>", ...)
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field

from ..jinja import JinjaError
from .render import ParsedTemplate

_WS = b" \t\n\v\f\r"
_MARKER = rb"(?:<[^>]*>|\[[^\]]*\])"
_SP = rb"[ \t\n\v\f\r]*"


def trim(b: bytes) -> bytes:
    return b.strip(_WS)


def _segments(text: bytes) -> list[tuple[str, bytes]]:
    """segmentize_markers: text and <...> / [...] markers."""
    out = []
    in_marker = False
    opener = 0
    last = 0
    for cur, c in enumerate(text):
        if not in_marker and c in (60, 91):
            if last < cur:
                out.append(("text", text[last:cur]))
            last = cur
            in_marker = True
            opener = c
        elif in_marker and ((opener == 60 and c == 62) or (opener == 91 and c == 93)):
            out.append(("marker", text[last:cur + 1]))
            last = cur + 1
            in_marker = False
    if last < len(text):
        out.append(("text", text[last:]))
    return out


def _prune(segs):
    return [s for s in segs if trim(s[1])]


def common_prefix(a: bytes, b: bytes) -> int:
    n = 0
    m = min(len(a), len(b))
    while n < m and a[n] == b[n]:
        n += 1
    return n


def _common_suffix(a: bytes, b: bytes) -> int:
    n = 0
    m = min(len(a), len(b))
    while n < m and a[len(a) - 1 - n] == b[len(b) - 1 - n]:
        n += 1
    return n


def _single_segment(seg, other, start: int, end: int, prefix: bytes, suffix: bytes):
    """One side is down to the segment `seg`, the other holds other[start..end]: `seg` joins the suffix when it is
    the other side's last segment, else the prefix when it is its first. Returns the other side's new bounds, the
    prefix, the suffix, and whether it matched."""
    if seg == other[end]:
        return start, end - 1, prefix, other[end][1] + suffix, True
    if seg == other[start]:
        return start + 1, end, prefix + other[start][1], suffix, True
    return start, end, prefix, suffix, False


def diff_split(left: bytes, right: bytes) -> dict:
    """calculate_diff_split: common prefix / suffix (by markers, then by bytes) and the two differing middles."""
    res = {"prefix": b"", "suffix": b"", "left": b"", "right": b""}
    L, R = _segments(left), _segments(right)
    if not L:
        res["right"] = right
        return res
    if not R:
        res["left"] = left
        return res
    ls, le, rs, re_ = 0, len(L) - 1, 0, len(R) - 1
    prefix, suffix = b"", b""
    lfull = rfull = False
    while ls != le and rs != re_:
        adv = False
        if L[ls] == R[rs]:
            prefix += L[ls][1]
            ls += 1
            rs += 1
            adv = True
        if L[le] == R[re_]:
            suffix = L[le][1] + suffix
            if ls != le:
                le -= 1
            else:
                lfull = True
            if rs != re_:
                re_ -= 1
            else:
                rfull = True
            adv = True
        if not adv:
            break
    if ls == le and rs != re_:
        rs, re_, prefix, suffix, matched = _single_segment(L[ls], R, rs, re_, prefix, suffix)
        lfull = lfull or matched
    elif rs == re_ and ls != le:
        ls, le, prefix, suffix, matched = _single_segment(R[rs], L, ls, le, prefix, suffix)
        rfull = rfull or matched
    elif ls == le and rs == re_ and L[ls] == R[rs] and L[ls][0] == "marker":
        prefix += R[rs][1]
        lfull = rfull = True
    can_suffix = L[le][0] == "text" and R[re_][0] == "text"
    can_prefix = R[rs][0] == "text" and L[ls][0] == "text"
    rem_l = b"".join(s[1] for s in L[ls:(le if lfull else le + 1)])
    rem_r = b"".join(s[1] for s in R[rs:(re_ if rfull else re_ + 1)])
    sl = _common_suffix(rem_l, rem_r) if can_suffix else 0
    pl = common_prefix(rem_l[:len(rem_l) - sl], rem_r[:len(rem_r) - sl]) if can_prefix else 0
    prefix += rem_l[:pl]
    suffix = rem_l[len(rem_l) - sl:] + suffix
    res.update(prefix=prefix, suffix=suffix, left=rem_l[pl:len(rem_l) - sl], right=rem_r[pl:len(rem_r) - sl])
    if res["left"] == b"" and res["right"] == b"":
        res["prefix"] = left
        res["suffix"] = b""
    if res["left"] == b"" and res["right"] and len(left) <= len(right) and right.startswith(left):
        res.update(prefix=left, suffix=b"", right=right[len(left):])
    return res


_USER_MSG = "U_USER_MSG Hello END_U"
_ASSISTANT_MSG = "A_ASST_MSG I can help END_A"
_THINKING = "REASON_PART I am thinking END_R"
_PARAMS_SCHEMA = {"type": "object",
                  "properties": {"AA_ARG_FST_AA": {"type": "string", "description": "First argument"},
                                 "BB_ARG_SND_BB": {"type": "string", "description": "Second argument"}},
                  "required": []}
_PROBE_TOOLS = [
    {"type": "function", "function": {"name": "FFF_FIRST_FUN_F", "description": "Test function foo",
                                      "parameters": _PARAMS_SCHEMA}},
    {"type": "function", "function": {"name": "SSS_SECOND_FUN_S", "description": "Test function bar",
                                      "parameters": _PARAMS_SCHEMA}},
]


def _assistant_start(tmpl: ParsedTemplate, r: "Reasoning") -> bytes:
    """detect_assistant_start_marker: what precedes an assistant message's text."""
    user = {"role": "user", "content": _USER_MSG}
    cmp = _compare(tmpl, dict(messages=[user], add_generation_prompt=False, enable_thinking=True),
                   dict(messages=[user, {"role": "assistant", "content": _ASSISTANT_MSG}],
                        add_generation_prompt=False, enable_thinking=True))
    if cmp is None:
        return b""
    right = cmp[0]["right"]
    i = right.find(_ASSISTANT_MSG.encode())
    prefix = right if i < 0 else right[:i]
    for marker in (r.start, r.end):
        t = trim(marker)
        if marker and t in prefix:
            prefix = prefix[:prefix.find(t)]
    return trim(prefix)


def _user_start(tmpl: ParsedTemplate) -> bytes:
    """detect_user_start_marker: what precedes a user message's text (leading end-of-turn markers skipped)."""
    user = {"role": "user", "content": _USER_MSG}
    cmp = _compare(tmpl, dict(messages=[], add_generation_prompt=False, enable_thinking=True),
                   dict(messages=[user], add_generation_prompt=False, enable_thinking=True))
    if cmp is None:
        two = {"role": "user", "content": "V_USER_MSG Hello END_V"}
        asst = {"role": "assistant", "content": _ASSISTANT_MSG}
        cmp = _compare(tmpl, dict(messages=[two, asst], add_generation_prompt=False, enable_thinking=True),
                       dict(messages=[two, asst, user], add_generation_prompt=False, enable_thinking=True))
        if cmp is None:
            return b""
    msg = cmp[0]["right"]
    a = msg.find(_ASSISTANT_MSG.encode())
    if a >= 0:
        msg = msg[a + len(_ASSISTANT_MSG):]
    u = msg.find(_USER_MSG.encode())
    candidate = msg if u < 0 else msg[:u]
    out = b""
    seen_marker = False
    for kind, value in _segments(candidate):
        low = value.lower()
        if kind == "marker" and not seen_marker and (b"end" in low or b"close" in low):
            continue
        if kind == "text" and not seen_marker and not trim(value):
            continue
        seen_marker = seen_marker or kind == "marker"
        out += value
    return trim(out)


@dataclass
class Reasoning:
    """What bankml takes from the autoparser's analysis: reasoning markers, message starts, extra stops."""
    mode: str = "none"                   # "none", "tag_based", "tools_only"
    start: bytes = b""
    end: bytes = b""
    additional_stops: list = field(default_factory=list)
    assistant_start: bytes = b""
    user_start: bytes = b""


def _probe_render(tmpl: ParsedTemplate, messages, add_generation_prompt, enable_thinking, tools=None):
    try:
        return tmpl.render(copy.deepcopy(messages), add_generation_prompt=add_generation_prompt,
                           enable_thinking=enable_thinking, tools=tools,
                           extra_context={"enable_thinking": enable_thinking})
    except JinjaError:
        return None


def _compare(tmpl, a: dict, b: dict):
    out_a = _probe_render(tmpl, **a)
    out_b = _probe_render(tmpl, **b)
    if out_a is None or out_b is None:
        return None
    return diff_split(out_a, out_b), out_a, out_b


def analyze_reasoning(tmpl: ParsedTemplate) -> Reasoning:
    """analyze_reasoning + the reasoning workarounds of the autoparser."""
    r = Reasoning()
    user = {"role": "user", "content": _USER_MSG}
    think = _THINKING.encode()

    # 1. does a reasoning_content show in the rendered history, and between which markers?
    plain = {"role": "assistant", "content": _ASSISTANT_MSG}
    with_r = {"role": "assistant", "content": _ASSISTANT_MSG, "reasoning_content": _THINKING}
    cmp = _compare(tmpl, dict(messages=[user, plain], add_generation_prompt=False, enable_thinking=True),
                   dict(messages=[user, with_r], add_generation_prompt=False, enable_thinking=True))
    if cmp is not None:
        diff, _, out_b = cmp
        if diff["right"] and think in diff["right"]:
            m = re.search(b"(?P<pre>" + _MARKER + _SP + b")" + re.escape(think) + b"(?P<post>" + _SP + _MARKER
                          + _SP + b")", out_b)
            if m is None:
                m = re.search(re.escape(think) + _SP + b"(?P<post>" + _MARKER + _SP + b")?", out_b)
            if m is not None:
                pre = m.groupdict().get("pre") or b""
                post = m.group("post") or b""
                if pre and post:
                    r.mode, r.start, r.end = "tag_based", pre, post
                elif post:
                    r.mode, r.end = "tag_based", post

    # 2. what does enable_thinking change in the generation prompt?
    cmp = _compare(tmpl, dict(messages=[user], add_generation_prompt=True, enable_thinking=False),
                   dict(messages=[user], add_generation_prompt=True, enable_thinking=True))
    if cmp is not None:
        diff, out_a, out_b = cmp
        lt, rt = trim(diff["left"]), trim(diff["right"])
        if not lt and diff["right"]:
            if rt and out_b.endswith(rt) and not r.start:
                r.start, r.mode = diff["right"], "tag_based"
        elif not rt and diff["left"]:
            if lt and out_a.endswith(lt) and not r.end:
                seg = _prune(_segments(out_a))
                if len(seg) >= 2 and seg[-1][1] == lt and seg[-2][0] == "marker":
                    r.start = seg[-2][1]
                r.end, r.mode = diff["left"], "tag_based"
        elif lt and rt:
            for base, ext in ((out_b, out_a), (out_a, out_b)):
                n = min(len(base), 64)
                anchor = base[len(base) - n:]
                pos = ext.rfind(anchor)
                if pos < 0 or pos + n >= len(ext):
                    continue
                extra = trim(ext[pos + n:])
                if not extra:
                    continue
                seg = _prune(_segments(extra))
                if len(seg) == 2 and seg[0][0] == "marker" and seg[1][0] == "marker":
                    if not r.start:
                        r.start = seg[0][1]
                    if not r.end:
                        r.end = seg[1][1]
                    r.mode = "tag_based"
                    break
    if r.mode == "none" and not r.start and r.end:
        r.mode = "tag_based"

    # 3. reasoning shown only next to tool calls?
    if tmpl.caps.supports_tool_calls:
        call = {"id": "call00001", "type": "function",
                "function": {"name": "FFF_FIRST_FUN_F", "arguments": {"AA_ARG_FST_AA": "VVVV",
                                                                     "BB_ARG_SND_BB": "XXXX"}}}
        a = {"role": "assistant", "content": _ASSISTANT_MSG, "reasoning_content": _THINKING}
        b = {"role": "assistant", "content": None, "reasoning_content": _THINKING, "tool_calls": [call]}
        cmp = _compare(tmpl, dict(messages=[user, a], add_generation_prompt=False, enable_thinking=True,
                                  tools=_PROBE_TOOLS),
                       dict(messages=[user, b], add_generation_prompt=False, enable_thinking=True,
                            tools=_PROBE_TOOLS))
        if cmp is not None:
            _, out_a, out_b = cmp
            if think not in out_a and think in out_b:
                r.mode = "tools_only"
                m = re.search(b"(?P<pre>" + _MARKER + _SP + b")" + re.escape(think) + _SP + b"(?P<post>"
                              + _MARKER + _SP + b")", out_b)
                if m is not None:
                    r.start, r.end = m.group("pre"), m.group("post")
                else:
                    m = re.search(re.escape(think) + _SP + b"(?P<post>" + _MARKER + _SP + b")?", out_b)
                    if m is not None:
                        r.end = m.group("post") or b""
                    else:
                        r.mode = "none"

    r.assistant_start = _assistant_start(tmpl, r)
    r.user_start = _user_start(tmpl)

    # the autoparser's per-family patches that touch what bankml uses
    src = tmpl.source
    if b"<|CHATBOT_TOKEN|>" in src and b"<|END_OF_TURN_TOKEN|>" in src:
        r.user_start = b"<|START_OF_TURN_TOKEN|><|USER_TOKEN|>"
    if b"content.split('</think>')" in src and b"reasoning_content" not in src and b"<SPECIAL_12>" not in src \
            and r.mode == "none":
        r.mode, r.start, r.end = "tag_based", b"<think>", b"</think>"
    if b"Write your thoughts between <think></think> and write your response between <response></response>" in src:
        r.mode, r.start, r.end = "tag_based", b"<think>", b"</think>"
    if b"<SPECIAL_10>" in src and b"<SPECIAL_11>" in src and b"<SPECIAL_12>" in src and b"<TOOL_RESPONSE>" in src:
        r.mode, r.start, r.end = "tag_based", b"<think>\n", b"</think>"
        r.assistant_start, r.user_start = b"<SPECIAL_11>Assistant", b"<SPECIAL_11>User"
    if (b"{%- set system_prompt = '<|start_header_id|>' + 'system' + '<|end_header_id|>\\n\\n' + message['content']"
            b" | trim + '\\n' + system_prompt_suffix + '<|eot_id|>' -%}") in src:
        r.assistant_start = b"<|start_header_id|>assistant<|end_header_id|>"
        r.user_start = b"<|start_header_id|>user<|end_header_id|>"
    if b"<|begin|>assistant<|think|><|end|>" in src:
        r.assistant_start = b"<|begin|>assistant"
    if b"if not loop.last and '[BEGIN FINAL RESPONSE]' in asst_text" in src:
        r.user_start, r.assistant_start = b"<|begin_user|>", b"<|begin_assistant|>"
    if b"laguna_glm_thinking" in src:
        r.start, r.end = trim(r.start), trim(r.end)
        r.additional_stops.append("</assistant>")
    return r


# -- tool calls (analyze_tools), the JSON-native part ------------------------------------------------------------

_FUN_FIRST = "FFF_FIRST_FUN_F"
_FUN_SECOND = "SSS_SECOND_FUN_S"
_ARG_FIRST = "AA_ARG_FST_AA"
_ARG_SECOND = "BB_ARG_SND_BB"
_PROBE_PARAMS = {"type": "object", "properties": {
    _ARG_FIRST: {"type": "string", "description": "First argument"},
    _ARG_SECOND: {"type": "string", "description": "Second argument"}}, "required": []}
_PROBE_TOOLS = [{"type": "function", "function": {"name": _FUN_FIRST, "description": "Test function foo",
                                                  "parameters": _PROBE_PARAMS}},
                {"type": "function", "function": {"name": _FUN_SECOND, "description": "Test function bar",
                                                  "parameters": _PROBE_PARAMS}}]


def _probe_call(name: str, call_id: str) -> dict:
    return {"id": call_id, "type": "function",
            "function": {"name": name, "arguments": {_ARG_FIRST: "XXXX", _ARG_SECOND: "YYYY"}}}


@dataclass
class ToolFormat:
    """What the autoparser's tool analysis finds (the fields bankml reads). `mode` is "none", "json_native",
    "tag_with_json" or "tag_with_tagged"; only json_native is analysed further."""
    mode: str = "none"
    section_start: str = ""
    section_end: str = ""
    per_call_start: str = ""
    per_call_end: str = ""
    name_field: str = ""
    args_field: str = ""
    id_field: str = ""
    gen_id_field: str = ""
    function_field: str = ""
    fun_name_is_key: bool = False
    tools_array_wrapped: bool = False
    parameter_order: list = field(default_factory=list)
    openai_wrapper_trigger: bool = False     # the workaround for templates asking for {"name", "parameters"}
    content_plain: bool = False              # analyze_content found the content unwrapped (PLAIN)

    @property
    def served_json(self) -> bool:
        """The JSON-native shapes bankml.grammar.chat_tools builds: flat keys (name, arguments, optional ids in
        the template's order) or the function name as the key, between per-call or section markers (or none),
        in an array or not. Not: nested keys (`function.name`)."""
        nested = "." in self.name_field or "." in self.args_field or (
            bool(self.function_field) and self.function_field != "function")
        return (self.mode == "json_native" and not nested and (self.fun_name_is_key or bool(self.name_field))
                and self.content_plain)


def _tools_compare(tmpl: ParsedTemplate, first: list, second: list):
    user = {"role": "user", "content": _USER_MSG}
    return _compare(tmpl, dict(messages=[user] + first, add_generation_prompt=False, enable_thinking=True,
                               tools=_PROBE_TOOLS),
                    dict(messages=[user] + second, add_generation_prompt=False, enable_thinking=True,
                         tools=_PROBE_TOOLS))


def analyze_tools(tmpl: ParsedTemplate, r: Reasoning, supports_parallel: bool) -> ToolFormat:
    """analyze_tool_calls for a template that supports tool calls: the render of an assistant message with one
    call against one with content only; the differing part is the tool section. JSON_NATIVE when the function
    name shows as a JSON string after "{" or ":"; then its fields, markers and (with parallel calls) whether
    the markers repeat per call. Other modes are named, not analysed."""
    f = ToolFormat()
    plain = {"role": "assistant", "content": _ASSISTANT_MSG}
    one = {"role": "assistant", "content": "", "tool_calls": [_probe_call(_FUN_FIRST, "call00001")]}
    cmp = _tools_compare(tmpl, [plain], [one])
    if cmp is None or not cmp[0]["right"]:
        return f
    hay = cmp[0]["right"]

    def quoted_after_open(needle: str) -> bool:
        return re.search(rb"[{:]" + _SP + b'"' + re.escape(needle.encode()) + b'"', hay) is not None

    if quoted_after_open(_FUN_FIRST):
        f.mode = "json_native"
    else:
        f.mode = "tag_with_json" if quoted_after_open(_ARG_FIRST) else "tag_with_tagged"
        return f
    clean = hay
    for marker in (r.start, r.end):
        if marker and marker in clean:
            i = clean.find(marker)
            clean = clean[:i] + clean[i + len(marker):]
    _json_native_fields(f, clean)
    if supports_parallel:
        both = {"role": "assistant", "content": "", "tool_calls": [_probe_call(_FUN_FIRST, "call00001"),
                                                                   _probe_call(_FUN_SECOND, "call00002")]}
        cmp2 = _tools_compare(tmpl, [one], [both])
        if cmp2 is not None and f.section_start and f.section_start.encode() in cmp2[0]["right"]:
            f.per_call_start, f.per_call_end = f.section_start, f.section_end
            f.section_start = f.section_end = ""
    f.section_end = f.section_end.strip(" \t\n\v\f\r")
    f.per_call_end = f.per_call_end.strip(" \t\n\v\f\r")
    # the autoparser's workaround for templates that ask for {"name": ..., "parameters": ...}: the model may
    # write the OpenAI wrapper's "type" member first
    f.content_plain = _content_plain(tmpl)
    if b'Respond in the format {"name": function name' in tmpl.source and b"Do not use variables." in tmpl.source:
        f.openai_wrapper_trigger = True
    return f


def _content_plain(tmpl: ParsedTemplate) -> bool:
    """analyze_content's first finding: an assistant message's content renders bare (content_mode PLAIN) when
    what a tool call replaces is the content alone. Command R+'s workaround wraps it in <|CHATBOT_TOKEN|> ...
    <|END_OF_TURN_TOKEN|> whatever the renders show."""
    if b"<|CHATBOT_TOKEN|>" in tmpl.source and b"<|END_OF_TURN_TOKEN|>" in tmpl.source:
        return False
    plain = {"role": "assistant", "content": _ASSISTANT_MSG}
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call00001", "type": "function", "function": {"name": "test_func", "arguments": {"arg1": "value1"}}}]}
    cmp = _tools_compare(tmpl, [plain], [call])
    return cmp is not None and trim(cmp[0]["left"]) == _ASSISTANT_MSG.encode()


def _json_native_fields(f: ToolFormat, clean: bytes) -> None:
    """analyze_tool_call_format_json_native: the call's JSON object (first "{" to last "}") and its fields, an
    array around it, and the markers before and after it."""
    import json
    start, end = clean.find(b"{"), clean.rfind(b"}")
    cut = clean[start:end + 1]
    call = json.loads(cut)

    def register(prefix: str, key: str, value) -> None:
        full = prefix + "." + key if prefix else key
        if isinstance(value, str) and "call0000" in value:
            f.id_field = full
        elif isinstance(value, str) and value == _FUN_FIRST:
            f.name_field = full
        elif _ARG_FIRST in json.dumps(value):
            f.args_field = full
        elif "id" in key:
            f.gen_id_field = full

    for key, value in call.items():
        if key == _FUN_FIRST:
            f.fun_name_is_key = True
            f.name_field = f.args_field = ""
            continue
        if isinstance(value, dict) and _ARG_FIRST not in json.dumps(value):
            f.function_field = key
            for k2, v2 in value.items():
                register(key, k2, v2)
        register("", key, value)
    m = re.search(rb"(\[" + _SP + rb")" + re.escape(cut) + rb"(" + _SP + rb"\])", clean)
    if m:
        f.tools_array_wrapped = True
        start -= len(m.group(1))
        end += len(m.group(2))
    end += 1
    located = sorted((clean.find(k.encode()), k) for k in (f.name_field, f.args_field, f.id_field,
                                                             f.gen_id_field) if k)
    f.parameter_order = [k for _, k in located]
    f.section_start = clean[:start].lstrip(b" \t\n\v\f\r").decode("utf-8", "surrogateescape")
    f.section_end = clean[end:].strip(b" \t\n\v\f\r").decode("utf-8", "surrogateescape")
    if f.tools_array_wrapped and f.section_end == "]":
        f.section_end = ""
