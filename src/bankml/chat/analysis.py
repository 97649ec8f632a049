"""Template analysis: what rendering probe conversations tells about a template.

Owns the reasoning and message-start part of llama.cpp's autoparser (common/chat-diff-analyzer.cpp): the diff of
two renders split into common prefix / suffix and the differing middles (calculate_diff_split, by <...> / [...]
markers, then by bytes), the reasoning markers and mode it finds from renders with and without a
reasoning_content, with enable_thinking on and off, and with tool calls, the markers that open a user and an
assistant message, the tool-call format (analyze_tools: JSON-native fields, or the tag-based markers), and the
autoparser's per-family corrections of those findings.
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
    "tag_with_json" or "tag_with_tagged"; json_native's JSON fields, and for the tag-based modes the markers,
    the name's prefix / suffix, the closer and the call id (a tagged format's argument markers are not
    analysed: bankml refuses it)."""
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
    # TAG_WITH_JSON / TAG_WITH_TAGGED: the text around a call's name, its closer, the call id's place and markers
    name_prefix: str = ""
    name_suffix: str = ""
    close: str = ""
    call_id_pos: str = "none"                # "none", "between_func_and_args", "post_args", "pre_func_name"
    call_id_prefix: str = ""
    call_id_suffix: str = ""

    @property
    def served_tag_json(self) -> bool:
        """The TAG_WITH_JSON shapes bankml.grammar.chat_tools builds: a call is the name between its prefix and
        suffix, an optional call id between the name and the arguments, the arguments as one JSON object, an
        optional closer, between per-call and / or section markers."""
        return self.mode == "tag_with_json" and bool(self.per_call_start or self.section_start)

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
    the markers repeat per call. Otherwise TAG_WITH_JSON (an argument's name shows as a JSON string) or
    TAG_WITH_TAGGED, and the tag-based markers (_tag_format)."""
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
    clean = hay
    for marker in (r.start, r.end):
        if marker and marker in clean:
            i = clean.find(marker)
            clean = clean[:i] + clean[i + len(marker):]
    if f.mode != "json_native":
        _tag_format(f, tmpl, clean, supports_parallel)
        return f
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


# -- tool calls, the tag-based part (TAG_WITH_JSON; TAG_WITH_TAGGED is named, its arguments not analysed) -------
# The autoparser finds these markers with small PEG parsers over the renders; bankml scans the bytes the same
# way: a marker is "<" up to the first ">" or "[" up to the first "]", `space` any run of whitespace.

def _marker_end(s: bytes, i: int) -> int:
    """The end of the marker starting at s[i], or -1."""
    if i < len(s) and s[i] in (60, 91):
        j = s.find(b">" if s[i] == 60 else b"]", i + 1)
        return j + 1 if j >= 0 else -1
    return -1


def _space_end(s: bytes, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def _until_marker(s: bytes, i: int) -> int:
    """zero_or_more(not marker, any): the first position from i where a whole marker starts (or the end)."""
    while i < len(s) and _marker_end(s, i) < 0:
        i += 1
    return i


def _fun_marker(s: bytes, fun: bytes) -> tuple[bytes, bytes]:
    """The function-name marker (`<function=NAME>`-like or `[...NAME]`-like, with the whitespace after it) and
    the part of it before the name; (fun, b"") where the name stands alone."""
    for i in range(len(s)):
        c = s[i]
        if c not in (60, 91):
            continue
        close = b">" if c == 60 else b"]"
        k = i + 1
        while k < len(s) and s[k:k + 1] != close and not s.startswith(fun, k):
            k += 1
        if not s.startswith(fun, k):
            continue
        j = k + len(fun)
        after = _space_end(s, j)
        if c == 60:
            if after < len(s) and s[after] == 60:
                continue
            e = s.find(b">", j)
            if e < 0:
                continue
            end = _space_end(s, e + 1)
        else:
            if after < len(s) and s[after] == 91 and s.find(b"]", after + 1) >= 0:
                continue
            end = after
        return s[i:end], s[i:k]
    return fun, b""


def _tag_format(f: ToolFormat, tmpl: ParsedTemplate, clean: bytes, supports_parallel: bool) -> None:
    """analyze_tool_call_format_non_json, check_per_call_markers, extract_function_markers and
    extract_call_id_markers for a tag-based format, then the autoparser's Functionary v3.1 workaround."""
    fun = _FUN_FIRST.encode()
    fun_marker, fun_pre = _fun_marker(clean, fun)
    sec_start = call_start = sec_end = call_end = b""
    found = False
    for i in range(len(clean)):                  # marker, marker, up to the name marker
        m1 = _marker_end(clean, i)
        if m1 < 0:
            continue
        a = _space_end(clean, m1)
        m2 = _marker_end(clean, a)
        if m2 < 0:
            continue
        b = _space_end(clean, m2)
        k = clean.find(fun_marker, b)
        if k < 0:
            continue
        sec_start, call_start, rest = clean[i:a], clean[a:b], clean[k + len(fun_marker):]
        for j in range(len(rest)):
            e1 = _marker_end(rest, j)
            if e1 < 0:
                continue
            x = _space_end(rest, e1)
            e2 = _marker_end(rest, x)
            if e2 >= 0 and _space_end(rest, e2) == len(rest):
                call_end, sec_end = rest[j:x], rest[x:]
                break
        f.name_prefix = (fun_pre + b"").decode("utf-8", "surrogateescape")
        found = True
        break
    if not found:                                # a section marker right before the name marker
        for i in range(len(clean)):
            m1 = _marker_end(clean, i)
            if m1 < 0:
                continue
            a = _space_end(clean, m1)
            if not clean.startswith(fun_marker, a):
                continue
            sec_start, rest = clean[i:a], clean[a + len(fun_marker):]
            for j in range(len(rest)):
                e1 = _marker_end(rest, j)
                if e1 >= 0 and _space_end(rest, e1) == len(rest):
                    sec_end = rest[j:]
                    break
            break
    dec = lambda b: b.decode("utf-8", "surrogateescape")  # noqa: E731
    f.per_call_start, f.per_call_end = dec(call_start), dec(call_end)
    f.section_start, f.section_end = dec(sec_start), dec(sec_end)
    f.section_end = f.section_end.strip(" \t\n\v\f\r")
    f.per_call_end = f.per_call_end.strip(" \t\n\v\f\r")
    first = {"role": "assistant", "content": "", "tool_calls": [_probe_call(_FUN_FIRST, "call00001")]}
    if supports_parallel:
        _check_per_call_markers(f, tmpl, first)
    _function_markers(f, tmpl, first)
    _call_id_markers(f, tmpl, first)
    if b'set has_code_interpreter = tools | selectattr("type", "equalto", "code_interpreter") | list | length > 0' \
            in tmpl.source:                       # Functionary v3.1: no section, `<function=` ... `</function>`
        f.name_prefix = f.section_start = f.section_end = f.close = ""
        f.per_call_start, f.per_call_end = "<function=", "</function>"
        f.content_plain = True


def _check_per_call_markers(f: ToolFormat, tmpl: ParsedTemplate, first: dict) -> None:
    """A section marker that a second call repeats is a per-call marker; a per-call end marker that one and two
    calls render equally often is the section's end."""
    both = {"role": "assistant", "content": "", "tool_calls": [_probe_call(_FUN_FIRST, "call00001"),
                                                               _probe_call(_FUN_SECOND, "call00002")]}
    cmp = _tools_compare(tmpl, [first], [both])
    if cmp is None:
        return
    diff, out_a, out_b = cmp
    second = diff_split(diff["suffix"], diff["right"])["right"].lstrip(_WS)
    if f.section_start and second.startswith(f.section_start.encode("utf-8", "surrogateescape")):
        f.per_call_start, f.per_call_end = f.section_start, f.section_end
        f.section_start = f.section_end = ""
    if f.per_call_end:
        end = f.per_call_end.encode("utf-8", "surrogateescape")
        one, two = out_a.count(end), out_b.count(end)
        if one > 0 and one == two:
            f.section_end, f.per_call_end = f.per_call_end, ""


def _function_markers(f: ToolFormat, tmpl: ParsedTemplate, first: dict) -> None:
    """extract_function_markers: a call to the first probe function against one to the second; the text
    around the name (up to the arguments' JSON, markers included) and the closer after the arguments."""
    second = {"role": "assistant", "content": "", "tool_calls": [_probe_call(_FUN_SECOND, "call00002")]}
    cmp = _tools_compare(tmpl, [first], [second])
    if cmp is None:
        return
    diff = cmp[0]
    left, prefix, suffix = diff["left"], diff["prefix"], diff["suffix"]
    fun = _FUN_FIRST.encode()
    if fun not in left or _FUN_SECOND.encode() not in diff["right"]:
        return
    enc = lambda t: t.encode("utf-8", "surrogateescape")  # noqa: E731
    name_prefix = enc(f.name_prefix)
    marker = enc(f.per_call_start or f.section_start)
    if marker and prefix.rfind(marker) >= 0:
        name_prefix = prefix[prefix.rfind(marker) + len(marker):]
    k = left.find(fun)
    name_prefix += left[:k]
    name_suffix = left[k + len(fun):_until_marker(left, k + len(fun))]
    if f.mode == "tag_with_json":               # up to the first "{" / "[" that is not a marker ...
        i = 0
        while i < len(suffix):
            e = _marker_end(suffix, i)
            if e >= 0:
                i = e
            elif suffix[i] not in (123, 91):
                i += 1
            else:
                break
        j = _until_marker(suffix, i)             # ... when a marker follows the JSON
        if j < len(suffix):
            name_suffix += suffix[:i]
    f.name_prefix, f.name_suffix = name_prefix.decode("utf-8", "surrogateescape"), \
        name_suffix.decode("utf-8", "surrogateescape")
    end = enc(f.per_call_end or f.section_end)
    if not end:
        nocall = {"role": "assistant", "content": _ASSISTANT_MSG}
        cmp2 = _tools_compare(tmpl, [first], [nocall])
        closer = b""
        if cmp2 is not None:
            nl = cmp2[0]["left"]
            closer = nl[nl.find(b"YYYY") + 4:]
    else:
        closer = suffix[:suffix.find(end)] if end in suffix else suffix
    close = b""
    if closer and f.mode == "tag_with_json":
        y = closer.find(b"YYYY")
        if y >= 0:
            post = closer[y + 4:]
            pos = max(post.rfind(b"}"), post.rfind(b"]"))
            if 0 <= pos < len(post) - 1:
                close = post[pos + 1:].lstrip(_WS)
    f.close = close.lstrip(_WS).decode("utf-8", "surrogateescape")


def _last_marker(s: bytes) -> bytes:
    """The last marker in s (a marker after which no other marker starts)."""
    found = b""
    i = 0
    while i < len(s):
        e = _marker_end(s, i)
        if e >= 0:
            found = s[i:e]
        i += 1
    return found


def _first_marker(s: bytes) -> bytes:
    for i in range(len(s)):
        e = _marker_end(s, i)
        if e >= 0:
            return s[i:e]
    return b""


def _call_id_markers(f: ToolFormat, tmpl: ParsedTemplate, first: dict) -> None:
    """extract_call_id_markers: a call with id call00001 against one with call99999; where the differing id
    sits (between the name and the arguments, after the arguments, before the name) and its markers."""
    alt = {"role": "assistant", "content": "", "tool_calls": [_probe_call(_FUN_FIRST, "call99999")]}
    cmp = _tools_compare(tmpl, [first], [alt])
    if cmp is None:
        return
    diff = cmp[0]
    if not diff["left"] and not diff["right"]:
        return
    prefix, suffix = diff["prefix"], diff["suffix"]
    common = b"call"                             # call00001 / call99999
    fun = _FUN_FIRST.encode()
    in_prefix, in_suffix = prefix.rfind(fun), suffix.find(fun)
    pre = suf = b""
    if in_prefix >= 0 and in_suffix < 0:
        args_prefix = prefix.find(b"{", in_prefix)
        args_suffix = suffix.find(b"{")
        if args_suffix >= 0 and args_prefix < 0:
            f.call_id_pos = "between_func_and_args"
            after = prefix[in_prefix + len(fun):]
            for i in range(len(after)):          # a marker, then no marker up to the id's common part
                e = _marker_end(after, i)
                if e < 0:
                    continue
                j = e
                while j < len(after) and not after.startswith(common, j) and _marker_end(after, j) < 0:
                    j += 1
                if after.startswith(common, j):
                    pre = after[i:e]
                    break
            else:
                pre = _last_marker(after)
            j = 0
            while j < len(suffix) and _marker_end(suffix, j) < 0 and suffix[j] != 123:
                j += 1
            e = _marker_end(suffix, j)
            suf = suffix[j:e] if e >= 0 else b""
        elif args_prefix >= 0:
            f.call_id_pos = "post_args"
            after = prefix[args_prefix:]
            brace = after.rfind(b"}")
            if brace >= 0:
                pre = _last_marker(after[brace + 1:])
            suf = _first_marker(suffix)
    elif in_suffix >= 0 and in_prefix < 0:
        f.call_id_pos = "pre_func_name"
        pre = _last_marker(prefix)
        suf = _first_marker(suffix[:in_suffix])
    f.call_id_prefix, f.call_id_suffix = pre.decode("utf-8", "surrogateescape"), suf.decode("utf-8", "surrogateescape")
    # (the arguments' start / end markers are only found for JSON-native formats: empty here)
    if f.call_id_pos != "none" and f.call_id_suffix and f.per_call_end.startswith(f.call_id_suffix):
        f.per_call_end = ""
