"""Chat templates: messages → prompt, as llama-server b11192 (`--jinja`) builds it.

Owns what llama.cpp's common/chat.cpp does between a parsed list of messages and the prompt string:
- which template is used (the GGUF's `tokenizer.chat_template`, its `tokenizer.chat_template.tool_use`
  variant, an override given as text or file, "chatml" or nothing → the built-in ChatML template), and the two
  source patches chat.cpp applies to gpt-oss and Mistral templates;
- the capability probe (string or typed content, system role, tools...) and the message reshaping it drives
  (content parts joined with "\\n", a system message merged into the next one, "developer" → "system", ...);
- the render itself, through bankml.jinja (llama.cpp's own Jinja dialect, not Jinja2), with chat.cpp's
  variables: messages, bos_token / eos_token, enable_thinking, add_generation_prompt (only when true),
  datetime / date_string, chat_template_kwargs, preserve_* / reasoning_effort switches; then the leading BOS
  and trailing EOS text dropped when the vocabulary adds them itself;
- the per-family handlers chat.cpp picks by looking at the template source (gpt-oss, LFM2, DeepSeek V3.2/V4,
  Gemma 4, Ministral 3, Qwen3-Coder, Kimi, ...), which reshape messages or extend the prompt;
- assistant prefill ("continue_final_message"): the prompt without the last message, the generation prompt,
  and the message's text, with the reasoning markers the reference finds by rendering probe conversations.

Must not know: tokens (only the BOS/EOS *texts*), HTTP (chat_request.py and server/template_api.py do that).

    tmpls = ChatTemplates.from_gguf(header)      # (alias ChatTemplate); or ChatTemplates.from_source(text, bos, eos)
    params = tmpls.apply(ChatInputs(messages=[ChatMessage("user", "hi")]))
    params.prompt                                              # str

Errors: TemplateLoadError (llama-server would not start with this template), TemplateApplyError (the request
fails; `status` is llama-server's HTTP status, `message` its text), TemplateNotReproduced (bankml does not
reproduce what llama-server would do here, and says why).
"""

from __future__ import annotations

import copy
import json
import math
import re
import time as _time
from dataclasses import dataclass, field

from ..errors import BankmlError
from ..jinja import (JinjaError, Program, TemplateCrash, TemplateNotImplemented, TemplateSyntaxError,
                    apply_preserve_reasoning, apply_reasoning_effort)
from ..jinja import values as JV
from ..jinja.caps import Caps

CHATML_TEMPLATE = (
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n"
    "{%- endif -%}"
)

# continuation modes (common_chat_continuation)
CONTINUE_NONE = "none"
CONTINUE_AUTO = "auto"
CONTINUE_REASONING = "reasoning"
CONTINUE_CONTENT = "content"


# ---------------------------------------------------------------------------------------------------------------
# errors

class TemplateError(BankmlError):
    """Base of this module's errors: `message` is llama-server's text, `status` its HTTP status."""

    status = 500

    def __init__(self, message: str, status: int | None = None):
        self.message = message
        if status is not None:
            self.status = status
        super().__init__(message)


class TemplateLoadError(TemplateError):
    """llama-server refuses to start with this template (it cannot be parsed, or the startup renders fail)."""


class TemplateApplyError(TemplateError):
    """Rendering a request failed the way llama-server fails it (400: invalid_argument, 500: any other error)."""


class TemplateNotReproduced(TemplateError):
    """bankml cannot tell what llama-server would answer here; `reason` says what is missing."""

    status = 501

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__("not reproduced by bankml: " + reason, 501)


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
                m["content"] = _concat_parts([{"type": p.type, "text": p.text} for p in self.content_parts])
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


def _concat_parts(parts: list) -> str:
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
    # (role, text) pairs marking message starts in the prompt; the server places context checkpoints with them
    message_delimiters: list[tuple[str, str]] = field(default_factory=list)

    @property
    def prompt_bytes(self) -> bytes:
        return _bytes(self.prompt)


# ---------------------------------------------------------------------------------------------------------------
# one template

class ParsedTemplate:
    """common_chat_template: one parsed template, its BOS/EOS texts and its probed capabilities."""

    def __init__(self, source: str | bytes, bos_token: str = "", eos_token: str = ""):
        try:
            self.program = Program.parse(_bytes(source))
        except TemplateSyntaxError as e:
            raise TemplateLoadError(e.text) from None
        self.source: bytes = self.program.source
        self.bos_token = bos_token
        self.eos_token = eos_token
        try:
            self.caps: Caps = self.program.caps()
        except JinjaError as e:
            raise TemplateLoadError(e.text) from None

    def has(self, text: str) -> bool:
        return _bytes(text) in self.source

    # -- the render (common_chat_template_direct_apply_impl)
    def render(self, messages: list, *, add_generation_prompt: bool, enable_thinking: bool,
               tools=None, extra_context: dict | None = None, additional_context: dict | None = None,
               add_bos: bool = False, add_eos: bool = False, normalize: bool = True,
               now: float | None = None, localtime=None) -> bytes:
        """Render JSON-like messages. Raises JinjaError subclasses as the reference's runtime would."""
        inp: dict = {
            "messages": normalize_messages(messages, self.caps) if normalize else messages,
            "bos_token": self.bos_token,
            "eos_token": self.eos_token,
            "enable_thinking": enable_thinking,
        }
        if tools is not None:
            inp["tools"] = tools
        for extra in (extra_context, additional_context):
            if extra:
                inp.update(extra)
        if add_generation_prompt:
            inp["add_generation_prompt"] = True
        ctx = self.program.new_context(now, localtime)
        pr = inp.get("preserve_reasoning")
        if isinstance(pr, bool):
            apply_preserve_reasoning(ctx, pr)
        effort = inp.get("reasoning_effort")
        if isinstance(effort, str):                     # json::empty() is false for any string, even 
            apply_reasoning_effort(ctx, _bytes(effort))
        for k, v in inp.items():
            ctx.set(_bytes(k), JV.from_json(v))
        out = self.program.render_context(ctx)
        bos, eos = _bytes(self.bos_token), _bytes(self.eos_token)
        if add_bos and out.startswith(bos):
            out = out[len(bos):]
        if add_eos and out.endswith(eos):
            out = out[:len(out) - len(eos)]
        return out

    def generation_prompt(self, messages: list, **kw) -> bytes:
        """What add_generation_prompt adds: the tail of the with-prompt render past the common prefix."""
        kw.pop("add_generation_prompt", None)
        without = self.render(messages, add_generation_prompt=False, **kw)
        with_ = self.render(messages, add_generation_prompt=True, **kw)
        n = 0
        m = min(len(without), len(with_))
        while n < m and without[n] == with_[n]:
            n += 1
        return with_[n:]


def normalize_messages(messages: list, caps: Caps) -> list:
    """messages_inp_normalizer: strings ↔ lists of parts, by what the template takes."""
    only_string = caps.supports_string_content and not caps.supports_typed_content
    only_typed = not caps.supports_string_content and caps.supports_typed_content
    if not (only_string or only_typed) or not isinstance(messages, list):
        return messages
    out = []
    for msg in messages:
        m = copy.copy(msg) if isinstance(msg, dict) else msg
        if isinstance(m, dict) and "content" in m:
            c = m["content"]
            if only_typed and isinstance(c, str):
                m["content"] = [{"type": "text", "text": c}]
            elif only_string and isinstance(c, list):
                m["content"] = _concat_parts(c)
        out.append(m)
    return out


# ---------------------------------------------------------------------------------------------------------------
# date variables

def _format_time(now: float, fmt: str, localtime) -> str:
    return _time.strftime(fmt, localtime(now))


def extra_context(now: float, localtime) -> dict:
    return {"datetime": _format_time(now, "%b %d %Y", localtime),
            "date_string": _format_time(now, "%d %b %Y", localtime)}


# ---------------------------------------------------------------------------------------------------------------
# the reasoning markers the reference's autoparser finds (chat-diff-analyzer.cpp, reasoning part only)

_WS = b" \t\n\v\f\r"
_MARKER = rb"(?:<[^>]*>|\[[^\]]*\])"
_SP = rb"[ \t\n\v\f\r]*"


def _trim(b: bytes) -> bytes:
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
    return [s for s in segs if _trim(s[1])]


def _common_prefix(a: bytes, b: bytes) -> int:
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
        if L[ls] == R[re_]:
            suffix = R[re_][1] + suffix
            re_ -= 1
            lfull = True
        elif L[ls] == R[rs]:
            prefix += R[rs][1]
            rs += 1
            lfull = True
    elif rs == re_ and ls != le:
        if L[le] == R[rs]:
            suffix = L[le][1] + suffix
            le -= 1
            rfull = True
        elif L[ls] == R[rs]:
            prefix += L[ls][1]
            ls += 1
            rfull = True
    elif ls == le and rs == re_ and L[ls] == R[rs] and L[ls][0] == "marker":
        prefix += R[rs][1]
        lfull = rfull = True
    can_suffix = L[le][0] == "text" and R[re_][0] == "text"
    can_prefix = R[rs][0] == "text" and L[ls][0] == "text"
    rem_l = b"".join(s[1] for s in L[ls:(le if lfull else le + 1)])
    rem_r = b"".join(s[1] for s in R[rs:(re_ if rfull else re_ + 1)])
    sl = _common_suffix(rem_l, rem_r) if can_suffix else 0
    pl = _common_prefix(rem_l[:len(rem_l) - sl], rem_r[:len(rem_r) - sl]) if can_prefix else 0
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
        t = _trim(marker)
        if marker and t in prefix:
            prefix = prefix[:prefix.find(t)]
    return _trim(prefix)


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
        if kind == "text" and not seen_marker and not _trim(value):
            continue
        seen_marker = seen_marker or kind == "marker"
        out += value
    return _trim(out)


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
        lt, rt = _trim(diff["left"]), _trim(diff["right"])
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
                extra = _trim(ext[pos + n:])
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
        r.start, r.end = _trim(r.start), _trim(r.end)
        r.additional_stops.append("</assistant>")
    return r


# ---------------------------------------------------------------------------------------------------------------
# the per-family handlers chat.cpp picks from the template source (common_chat_try_specialized_template)

def specialized_handler(src: bytes) -> str | None:
    def has(*needles: str) -> bool:
        return all(n.encode() in src for n in needles)

    if has("[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]") and not has("[CALL_ID]"):
        return "ministral-3"
    if has("<|channel|>"):
        return "gpt-oss"
    if has("<atem:function_calls>", "<|eom|>"):
        return "muse-glimmer"
    if has(">>>all", ">>>${recipient}"):
        return "functionary-v3.2"
    if has("<|tool_calls_section_begin|>", "<|tool_call_begin|>"):
        return "kimi-k2"
    if has("<|open|>", "<|close|>", "<|end_of_msg|>"):
        return "kimi-k3"
    if has("<role>ASSISTANT</role>", "<arg_key>"):
        return "ling-3"
    if has("<|START_TEXT|>", "<|START_ACTION|>"):
        return "cohere2moe"
    if has("<|tool_list_start|>", "<|tool_list_end|>"):
        return "lfm2"
    if has("List of tools: [") and not has("<|tool_list_start|>"):
        return "lfm2.5"
    if has("<|role_sep|>", "<|message_sep|>") and not has("<|function_call|>"):
        return "gigachat-v3"
    if has("]<]minimax[>[", "<tool_call>", "<invoke name="):
        return "minimax-m3"
    if has("dsml_token", "DSML") and (has("function_calls") or has("tool_calls")):
        return "deepseek-v3.2"
    if has("'<|tool_call>call:'"):
        return "gemma4"
    if has("Tool usage guidelines:", '<function name="', '<param name="'):
        return "minicpm5"
    if has("<tool_call>", "<function=", "<parameter=") and not has("'<tool_call><function=' ~ tool_call.name ~ '>'"):
        return "qwen3-coder"
    return None


def _copy_thinking(messages: list, drop_content_with_calls: bool) -> list:
    out = []
    for msg in messages:
        m = dict(msg)
        if isinstance(m.get("reasoning_content"), str):
            m["thinking"] = m["reasoning_content"]
            if drop_content_with_calls and isinstance(m.get("tool_calls"), list) and m["tool_calls"]:
                m.pop("content", None)
        out.append(m)
    return out


def _ministral_messages(messages: list) -> list:
    out = []
    for msg in messages:
        role = msg.get("role", "")
        if role not in ("system", "assistant"):
            out.append(msg)
            continue
        content = []
        if isinstance(msg.get("reasoning_content"), str):
            content.append({"type": "thinking", "thinking": msg["reasoning_content"]})
        if "content" in msg:
            c = msg["content"]
            if isinstance(c, str):
                content.append({"type": "text", "text": c})
            elif isinstance(c, list):
                content.extend(c)
        m = dict(msg)
        m["content"] = content
        m.pop("reasoning_content", None)
        out.append(m)
    return out


def _deepseek_v4_sort(messages: list) -> list:
    adjusted = [dict(m) for m in messages]
    order: dict = {}
    i = 0
    while i < len(adjusted):
        msg = adjusted[i]
        role = msg.get("role", "")
        if role == "assistant" and isinstance(msg.get("tool_calls"), list) and msg["tool_calls"]:
            order = {}
            for idx, tc in enumerate(msg["tool_calls"]):
                tid = tc.get("id", "") if isinstance(tc, dict) else ""
                if tid:
                    order[tid] = idx
            i += 1
            continue
        if role not in ("user", "tool"):
            i += 1
            continue
        positions = []
        end = i
        while end < len(adjusted):
            r = adjusted[end].get("role", "")
            if r == "tool":
                positions.append(end)
            elif r != "user":
                break
            end += 1
        if len(positions) > 1 and order:
            results = sorted((adjusted[p] for p in positions),
                             key=lambda m: order.get(m.get("tool_call_id", ""), 0))
            for p, m in zip(positions, results):
                adjusted[p] = m
        i = end
    return adjusted


def _gemma4_tool_responses(messages: list) -> list:
    """convert_tool_responses_gemma4: assistant(tool calls) + tool results (+ final answer) → one message."""
    def has_content(m):
        c = m.get("content")
        return (isinstance(c, str) and c != "") or (isinstance(c, list) and len(c) > 0)

    def has_calls(m):
        return isinstance(m.get("tool_calls"), list) and len(m["tool_calls"]) > 0

    out = []
    i = 0
    while i < len(messages):
        msg = messages[i]
        if msg.get("role", "") != "assistant" or not has_calls(msg):
            out.append(msg)
            i += 1
            continue
        calls = list(msg["tool_calls"])
        reasoning = msg["reasoning_content"] if isinstance(msg.get("reasoning_content"), str) else None
        responses = []
        content = None
        i += 1
        while i < len(messages) and messages[i].get("role", "") == "tool":
            cur = messages[i]
            response = None
            if "content" in cur:
                c = cur["content"]
                if isinstance(c, str):
                    try:
                        response = nl_loads(c)
                    except ValueError:
                        response = c
                else:
                    response = c
            name = ""
            idx = len(responses)
            if idx < len(calls) and isinstance(calls[idx], dict) and isinstance(calls[idx].get("function"), dict):
                name = calls[idx]["function"].get("name", "")
            if not name:
                name = cur.get("tool_call_id", "")
            responses.append({"name": name, "response": response})
            i += 1
        if i < len(messages) and messages[i].get("role", "") == "assistant":
            nxt = messages[i]
            if not has_calls(nxt) and has_content(nxt):
                content = nxt["content"]
                i += 1
        m = {"role": "assistant", "tool_calls": calls}
        if responses:
            m["tool_responses"] = responses
        if content is not None:
            m["content"] = content
        if reasoning is not None:
            m["reasoning_content"] = reasoning
        out.append(m)
    return out


def nl_loads(text: str):
    """json::parse as nlohmann accepts it (no NaN/Infinity, no lone surrogates); ValueError otherwise."""
    def bad_constant(name):
        raise ValueError("invalid literal " + name)

    v = json.loads(text, parse_constant=bad_constant)

    def check(x):
        if isinstance(x, str):
            x.encode("utf-8")
        elif isinstance(x, float) and not math.isfinite(x):
            raise ValueError("number overflow")
        elif isinstance(x, list):
            for y in x:
                check(y)
        elif isinstance(x, dict):
            for k, y in x.items():
                check(k)
                check(y)
    try:
        check(v)
    except UnicodeEncodeError:
        raise ValueError("lone surrogate") from None
    return v


# ---------------------------------------------------------------------------------------------------------------
# the template set of a model (common_chat_templates)

_PATCH_GPT_OSS = ('{%- if "<|channel|>analysis<|message|>" in message.content or '
                  '"<|channel|>final<|message|>" in message.content %}')
_PATCH_MISTRAL = ("{%- if (message['content'] is none or message['content'] == '' or "
                  "message['content']|length == 0) and (message['tool_calls'] is not defined or "
                  "message['tool_calls'] is none or message['tool_calls']|length == 0) %}")

# the server's defaults that reach the template (`--reasoning off`, --reasoning-preserve by default)
SERVER_TEMPLATE_KWARGS = {"enable_thinking": "false", "preserve_reasoning": "true"}

_FORMAT = {"gemma4": "peg-gemma4", "minimax-m3": "peg-minimax-m3"}


def _patch_source(src: bytes) -> bytes:
    if b"<|channel|>" in src and b"in message.content or" in src:
        src = src.replace(_PATCH_GPT_OSS.encode(), b"{%- if false %}")
    if b"[TOOL_CALLS]" in src and b"if (message['content'] is none or" in src:
        src = src.replace(_PATCH_MISTRAL.encode(), b"{%- if false %}")
    return src


class ChatTemplates:
    """The chat template(s) of a served model and what llama-server does with them for each request."""

    def __init__(self, default: ParsedTemplate, tool_use: ParsedTemplate | None = None, *, add_bos: bool = False,
                 add_eos: bool = False, has_explicit_template: bool = True):
        self.default = default
        self.tool_use = tool_use
        self.add_bos = add_bos
        self.add_eos = add_eos
        self.has_explicit_template = has_explicit_template
        self.override: bytes | None = None                 # the --chat-template(-file) text, if any
        self._reasoning: dict[int, Reasoning] = {}

    # -- construction (common_chat_templates_init)
    @classmethod
    def create(cls, *, model_template: str | bytes | None = None, model_tool_use: str | bytes | None = None,
               override: str | bytes | None = None, bos_token: str = "", eos_token: str = "",
               add_bos: bool = False, add_eos: bool = False) -> "ChatTemplates":
        """Pick and parse the template(s). `override` is --chat-template's text or --chat-template-file's
        content; "chatml" (or nothing at all) means the built-in ChatML template."""
        default_src = b""
        tool_use_src = b""
        explicit = bool(override)
        if not override:
            if model_template is not None:
                default_src = _bytes(model_template)
                explicit = True
            if model_tool_use is not None:
                tool_use_src = _bytes(model_tool_use)
                explicit = True
        else:
            default_src = _bytes(override)
        if not default_src or default_src == b"chatml":
            default_src = tool_use_src if tool_use_src else CHATML_TEMPLATE.encode()
        default_src = _patch_source(default_src)
        default = ParsedTemplate(default_src, bos_token, eos_token)
        tool_use = None
        if tool_use_src:
            try:
                tool_use = ParsedTemplate(tool_use_src, bos_token, eos_token)
            except TemplateLoadError:
                tool_use = None                          # llama-server logs and ignores it
        out = cls(default, tool_use, add_bos=add_bos, add_eos=add_eos, has_explicit_template=explicit)
        out.override = _bytes(override) if override else None
        return out

    @classmethod
    def from_source(cls, source: str | bytes, bos_token: str = "", eos_token: str = "", add_bos: bool = False,
                    add_eos: bool = False) -> "ChatTemplates":
        return cls.create(override=source, bos_token=bos_token, eos_token=eos_token, add_bos=add_bos,
                          add_eos=add_eos)

    @classmethod
    def from_gguf(cls, header, override: str | bytes | None = None) -> "ChatTemplates":
        """The templates llama-server uses for this GGUF header (bankml.models.gguf.GGUFHeader)."""
        vocab = vocab_facts(header)
        return cls.create(model_template=model_chat_template(header),
                          model_tool_use=model_chat_template(header, "tool_use"), override=override,
                          bos_token=vocab["bos_text"], eos_token=vocab["eos_text"], add_bos=vocab["add_bos"],
                          add_eos=vocab["add_eos"])

    # -- what /props reports
    def source(self, variant: str = "") -> str:
        if variant == "tool_use":
            return _text(self.tool_use.source) if self.tool_use else ""
        return _text(self.default.source)

    def caps(self) -> dict[str, bool]:
        t = self.tool_use if self.tool_use is not None else self.default
        return t.caps.to_map()

    @property
    def bos_token(self) -> str:
        return self.default.bos_token

    @property
    def eos_token(self) -> str:
        return self.default.eos_token

    # -- llama-server's startup renders
    def startup_check(self, template_kwargs: dict[str, str] | None = None) -> None:
        """Render what llama-server renders before it serves; TemplateLoadError if one fails: for a template given
        on the command line, its check without a model (common_chat_verify_template: a "test" message, no
        BOS/EOS), then the example conversation and the thinking probe."""
        kwargs = SERVER_TEMPLATE_KWARGS if template_kwargs is None else template_kwargs
        if self.override is not None:
            bare = ChatTemplates.create(override=self.override)
            try:
                bare.apply(ChatInputs(messages=[ChatMessage("user", "test")]))
            except TemplateNotReproduced:
                raise
            except TemplateError as e:
                raise TemplateLoadError(e.message) from None
        runs = []
        runs.append(ChatInputs(messages=[ChatMessage("system", "You are a helpful assistant"),
                                         ChatMessage("user", "Hello"), ChatMessage("assistant", "Hi there"),
                                         ChatMessage("user", "How are you?")], chat_template_kwargs=dict(kwargs)))
        runs.append(ChatInputs(messages=[ChatMessage("user", "test")], enable_thinking=True,
                               reasoning_format="deepseek"))
        for inputs in runs:
            try:
                self.apply(inputs)
            except TemplateNotReproduced:
                raise
            except TemplateError as e:
                raise TemplateLoadError(e.message) from None

    # -- one request (common_chat_templates_apply: the jinja path, or the legacy one)
    def apply(self, inputs: ChatInputs) -> ChatParams:
        if not inputs.use_jinja:
            return self._apply_legacy(inputs)
        try:
            return self._apply(inputs)
        except TemplateNotImplemented as e:
            raise TemplateApplyError(e.text, 500) from None
        except TemplateCrash as e:
            raise TemplateNotReproduced(e.text) from None

    def _apply(self, inputs: ChatInputs) -> ChatParams:
        tools_json = None
        if inputs.tools:
            tools_json = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                            "parameters": nl_loads(t.parameters)}}
                          for t in inputs.tools]
        tmpl = self.tool_use if (tools_json is not None and self.tool_use is not None) else self.default
        caps = tmpl.caps
        src = tmpl.source

        to_render = inputs.messages
        if b"You have access to the following functions in JSONSchema format" in src:
            to_render = [_trimmed(m) for m in inputs.messages]
        messages = normalize_messages([m.to_json(False) for m in to_render], caps)

        add_gen = inputs.add_generation_prompt
        cfm = inputs.continue_final_message
        continue_msg = ChatMessage("")
        if cfm != CONTINUE_NONE:
            add_gen = False
            if inputs.messages:
                continue_msg = inputs.messages[-1]
                messages.pop()
            if cfm == CONTINUE_AUTO and inputs.messages:
                cfm = CONTINUE_CONTENT
                if continue_msg.reasoning_content and not continue_msg.content and not continue_msg.content_parts:
                    cfm = CONTINUE_REASONING
        has_continuation = cfm != CONTINUE_NONE and not continue_msg.empty()

        if b"<|channel|>" not in src:
            for m in messages:
                if m.get("role") == "developer":
                    m["role"] = "system"
        if not caps.supports_system_role and messages and messages[0].get("role") == "system":
            if len(messages) > 1:
                first, second = messages[0], messages[1]
                second["content"] = _json_str(first.get("content")) + "\n" + _json_str(second.get("content"))
            messages.pop(0)
        if caps.supports_tool_calls:
            for m in messages:
                if "tool_calls" in m and "content" not in m:
                    m["content"] = ""
        if caps.supports_object_arguments:
            for m in messages:
                for tc in m.get("tool_calls", []) or []:
                    fn = tc.get("function") if isinstance(tc, dict) else None
                    if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                        try:
                            fn["arguments"] = nl_loads(fn["arguments"])
                        except ValueError:
                            raise TemplateNotReproduced(
                                "tool call arguments that are not valid JSON: llama-server fails with "
                                "nlohmann's parse error text, which bankml does not reproduce") from None

        now = _time.time() if inputs.now is None else inputs.now
        localtime = inputs.localtime or _time.localtime
        extra = extra_context(now, localtime)
        for k in sorted(inputs.chat_template_kwargs):
            extra[k] = nl_loads(inputs.chat_template_kwargs[k])

        json_schema = nl_loads(inputs.json_schema) if inputs.json_schema else None
        if tools_json is not None and inputs.tool_choice != "none" and inputs.grammar:
            raise TemplateApplyError("Cannot specify grammar with tools", 500)

        handler = specialized_handler(src)
        if handler == "gemma4" and b"{#- OpenAI Chat Completions:" not in src:
            messages = _gemma4_tool_responses(messages)

        def render(msgs=None, add_generation=None, additional=None, normalize=True) -> bytes:
            return tmpl.render(messages if msgs is None else msgs,
                               add_generation_prompt=add_gen if add_generation is None else add_generation,
                               enable_thinking=inputs.enable_thinking, tools=tools_json, extra_context=extra,
                               additional_context=additional, add_bos=self.add_bos, add_eos=self.add_eos,
                               normalize=normalize, now=now, localtime=localtime)

        def gen_prompt(msgs=None, additional=None, normalize=True) -> bytes:
            without = render(msgs, False, additional, normalize)
            with_ = render(msgs, True, additional, normalize)
            return with_[_common_prefix(without, with_):]

        rc = continue_msg.reasoning_content.encode()
        content = continue_msg.render_content().encode() if has_continuation else b""
        want_content = cfm == CONTINUE_CONTENT
        params = ChatParams(prompt="", generation_prompt="", format=_FORMAT.get(handler, "peg-native"),
                            handler=handler or "generic")

        try:
            if handler is None:
                prompt, gp = self._generic(tmpl, render, gen_prompt, has_continuation, want_content, rc, content,
                                           params)
            else:
                prompt, gp = _specialized(handler, tmpl, messages, render, gen_prompt, add_gen, has_continuation,
                                          want_content, rc, content, json_schema, params)
        except JinjaError as e:
            if handler is None:
                raise TemplateApplyError("Unable to generate parser for this template. Automatic parser "
                                         "generation failed: " + e.text, 400) from None
            raise TemplateApplyError(e.text, 500) from None
        if isinstance(json_schema, dict) and (handler is None or handler in _SCHEMA_GRAMMAR_HANDLERS):
            err = schema_error(json_schema)
            if err is not None:
                if handler is None:
                    raise TemplateApplyError("Unable to generate parser for this template. Automatic parser "
                                             "generation failed: " + err, 400)
                raise TemplateApplyError(err, 500)
        params.prompt = _text(prompt)
        params.generation_prompt = _text(gp)
        return params

    def _apply_legacy(self, inputs: ChatInputs) -> ChatParams:
        """common_chat_templates_apply_legacy: the built-in template the default template's source selects, over
        the messages' texts; no generation prompt, stops or parser (a JSON schema's grammar is the caller's)."""
        from .legacy import LegacyTemplateError, legacy_prompt
        try:
            prompt = legacy_prompt(self.default.source, inputs.messages, inputs.add_generation_prompt)
        except LegacyTemplateError as e:
            raise TemplateApplyError(e.message, 500) from None
        return ChatParams(prompt=prompt, generation_prompt="", format="content-only", handler="legacy")

    def _generic(self, tmpl, render, gen_prompt, has_continuation, want_content, rc, content, params):
        r = self.reasoning(tmpl)
        prompt = render()
        gp = gen_prompt()
        params.additional_stops = list(r.additional_stops)
        if r.assistant_start:
            params.message_delimiters.append(("assistant", _text(r.assistant_start)))
        if r.user_start:
            params.message_delimiters.append(("user", _text(r.user_start)))
        params.supports_thinking = r.mode != "none"
        if params.supports_thinking:
            params.thinking_start_tag = _text(_trim(r.start))
            end = _trim(r.end)
            params.thinking_end_tags = [_text(end)] if end else []
        if has_continuation:
            if r.start:
                cut = gp.find(r.start)
                gp = (gp if cut < 0 else gp[:cut]) + r.start + rc
                if want_content:
                    gp += r.end
            if want_content:
                gp += content
            prompt += gp
        return prompt, gp

    # -- the architecture's short form
    def render(self, messages: list, add_generation_prompt: bool = True) -> str:
        """The prompt for OpenAI-style messages (dicts) or ChatMessages, with the server's defaults; request
        validation and options are bankml.chat.request's job."""
        if messages and isinstance(messages[0], dict):
            from .request import parse_messages
            messages = parse_messages(messages)
        return self.apply(ChatInputs(messages=list(messages), add_generation_prompt=add_generation_prompt,
                                     enable_thinking=False,
                                     chat_template_kwargs=dict(SERVER_TEMPLATE_KWARGS))).prompt

    def reasoning(self, tmpl: ParsedTemplate) -> Reasoning:
        """The autoparser's reasoning markers for a template (computed once)."""
        key = id(tmpl)
        if key not in self._reasoning:
            self._reasoning[key] = analyze_reasoning(tmpl)
        return self._reasoning[key]


_DELIMITERS = {
    "gpt-oss": [("assistant", "<|start|>assistant"), ("user", "<|start|>user"), ("system", "<|start|>developer"),
                ("system", "<|start|>system"), ("tool", "<|start|>functions")],
    "cohere2moe": [("assistant", "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"),
                   ("user", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>"),
                   ("tool", "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>"),
                   ("system", "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>")],
    "deepseek-v3.2": [("assistant", "<｜Assistant｜>"), ("user", "<｜User｜>")],
    "gemma4": [("user", "<|turn>user"), ("assistant", "<|turn>model")],
    "kimi-k3": [("assistant", '<|open|>message role="assistant"<|sep|>'), ("user", '<|open|>message role="user"<|sep|>'),
                ("tool", '<|open|>message role="tool"'), ("system", '<|open|>message role="system"')],
    "ling-3": [("assistant", "<role>ASSISTANT</role>"), ("user", "<role>HUMAN</role>"),
               ("tool", "<role>OBSERVATION</role>"), ("system", "<role>SYSTEM</role>")],
    "minicpm5": [("assistant", "<|im_start|>assistant"), ("tool", "<|im_start|>user\n<tool_response>"),
                 ("user", "<|im_start|>user"), ("system", "<|im_start|>system")],
    "minimax-m3": [("assistant", "]~b]ai"), ("user", "]~b]user"), ("tool", "]~b]tool"), ("system", "]~b]developer"),
                   ("system", "]~b]system")],
    "muse-glimmer": [("assistant", "<|start|>assistant"), ("user", "<|start|>user"), ("system", "<|start|>system"),
                     ("tool", "<|start|>tool")],
    "qwen3-coder": [("assistant", "<|im_start|>assistant"), ("tool", "<|im_start|>user\n<tool_response>"),
                    ("tool", "<|im_start|>tool_response"), ("user", "<|im_start|>user"),
                    ("system", "<|im_start|>system")],
}


# the handlers that build a response-format grammar (and so reject a schema the converter refuses)
_SCHEMA_GRAMMAR_HANDLERS = frozenset(("ministral-3", "gpt-oss", "lfm2", "lfm2.5", "deepseek-v3.2", "gemma4",
                                      "minicpm5", "minimax-m3", "qwen3-coder", "cohere2moe"))


def schema_error(schema: dict) -> str | None:
    """The JSON schema converter's error for `schema` (llama-server builds the response-format grammar while it
    builds the prompt, and fails the request on it), or None when it converts."""
    try:
        from ..grammar import chat as grammar_chat  # type: ignore
    except ImportError:
        raise TemplateNotReproduced("json_schema / response_format need bankml.grammar's JSON schema converter "
                                    "(llama-server converts the schema here and refuses what it cannot "
                                    "convert)") from None
    # the chat step's message: a schema-document error without the converter's "conversion failed" prefix
    return grammar_chat.schema_error(schema)


def _specialized(handler, tmpl, messages, render, gen_prompt, add_gen, has_cont, want_content, rc, content,
                 json_schema, params):
    p = params
    p.message_delimiters = list(_DELIMITERS.get(handler, []))
    if handler == "ministral-3":
        adj = _ministral_messages(messages)
        prompt = render(adj, normalize=False)
        gp = gen_prompt(adj, normalize=False)
        p.supports_thinking, p.thinking_start_tag, p.thinking_end_tags = True, "[THINK]", ["[/THINK]"]
        if has_cont:
            gp = b"[THINK]" + rc + (b"[/THINK]" + content if want_content else b"")
            prompt += gp
        return prompt, gp
    if handler == "gpt-oss":
        adj = _copy_thinking(messages, True)
        prompt = render(adj, normalize=False)
        if not add_gen:
            pos = prompt.rfind(b"<|return|>")
            if pos >= 0:
                prompt = prompt[:pos] + b"<|end|>" + prompt[pos + len(b"<|return|>"):]
        gp = gen_prompt(adj, normalize=False)
        p.supports_thinking = True
        p.thinking_start_tag, p.thinking_end_tags = "<|channel|>analysis<|message|>", ["<|end|>"]
        if has_cont:
            gp = b"<|start|>assistant<|channel|>analysis<|message|>" + rc
            if want_content:
                gp += b"<|end|><|start|>assistant<|channel|>final<|message|>" + content
            prompt += gp
        return prompt, gp
    if handler == "muse-glimmer":
        prompt = render()
        gp = b"<|start|>assistant"
        p.supports_thinking = True
        if has_cont:
            gp = b"<|start|>assistant to=self<|message|>" + rc
            if want_content:
                gp += b"<|eom|><|start|>assistant to=user<|message|>" + content
            prompt += gp
        return prompt, gp
    if handler in ("lfm2", "lfm2.5"):
        adj = _copy_thinking(messages, False)
        prompt = render(adj, normalize=False)
        gp = gen_prompt(adj, normalize=False)
        p.supports_thinking, p.thinking_start_tag, p.thinking_end_tags = True, "<think>", ["</think>"]
        if has_cont:
            gp = b"<|im_start|>assistant\n<think>" + rc + (b"</think>" + content if want_content else b"")
            prompt += gp
        return prompt, gp
    if handler == "deepseek-v3.2":
        is_v4 = b"function_calls" not in tmpl.source
        adj = _deepseek_v4_sort(messages) if is_v4 else None
        additional = {"response_format": json_schema} if (is_v4 and isinstance(json_schema, dict)) else None
        norm = adj is None
        prompt = render(adj, additional=additional, normalize=norm)
        gp = gen_prompt(adj, additional=additional, normalize=norm)
        p.supports_thinking, p.thinking_start_tag = True, "<think>"
        p.thinking_end_tags = ["</think>", "<｜DSML｜" + ("tool_calls" if is_v4 else "function_calls") + ">"]
        if has_cont:
            if is_v4 and not rc:
                gp = "<｜Assistant｜></think>".encode() + (content if want_content else b"")
            else:
                gp = "<｜Assistant｜><think>".encode() + rc + (b"</think>" + content if want_content else b"")
            prompt += gp
        return prompt, gp

    prompt = render()
    gp = gen_prompt()
    fixed = {
        "functionary-v3.2": (b"<|start_header_id|>assistant<|end_header_id|>\n\n>>>all\n", None, None, None),
        "gigachat-v3": (b"assistant<|role_sep|>\n", None, None, None),
        "kimi-k2": (b"<|im_assistant|>assistant<|im_middle|>", b"<think>", b"</think>", None),
        "kimi-k3": (b'<|open|>message role="assistant"<|sep|>', b"<|open|>think<|sep|>",
                    b"<|close|>think<|sep|><|open|>response<|sep|>", None),
        "ling-3": (b"<role>ASSISTANT</role>\n", b"<think>", b"</think>", None),
        "cohere2moe": (b"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", b"<|START_THINKING|>",
                       b"<|END_THINKING|><|START_TEXT|>", None),
        "minicpm5": (b"<|im_start|>assistant\n", b"<think>\n", b"\n</think>\n\n", None),
        "minimax-m3": (gp, b"<mm:think>", b"</mm:think>", None),
    }
    thinking = {
        "kimi-k2": ("<think>", ["</think>"]), "kimi-k3": ("<|open|>think<|sep|>", ["<|close|>think<|sep|>"]),
        "ling-3": ("<think>", ["</think>", "<tool_call>"]),
        "cohere2moe": ("<|START_THINKING|>", ["<|END_THINKING|>"]), "minicpm5": ("<think>", ["</think>"]),
        "minimax-m3": ("<mm:think>", ["</mm:think>"]), "gemma4": ("<|channel>thought", ["<channel|>"]),
    }
    if handler in thinking:
        p.supports_thinking = True
        p.thinking_start_tag, p.thinking_end_tags = thinking[handler][0], list(thinking[handler][1])
    if handler == "ling-3":
        p.additional_stops = ["<|role_end|>"]
    if handler == "gemma4":
        if add_gen and prompt.endswith(b"<turn|>\n"):
            gp = b"<|turn>model\n"
            prompt += gp
        if has_cont:
            gp = (b"<|turn>model\n" if prompt.endswith(b"<turn|>\n") else b"") + b"<|channel>thought\n" + rc
            if want_content:
                gp += b"<channel|>" + content
            prompt += gp
        return prompt, gp
    if handler == "qwen3-coder":
        reasoning = b"<think>" in tmpl.source
        if reasoning:
            p.supports_thinking, p.thinking_start_tag = True, "<think>"
            p.thinking_end_tags = ["\n</think>", "</think>", "<tool_call>"]
        if has_cont:
            gp = b"<|im_start|>assistant\n"
            if reasoning:
                gp += b"<think>\n" + rc
                if want_content:
                    gp += b"\n</think>\n\n"
            if want_content:
                gp += content
            prompt += gp
        return prompt, gp
    head, think_start, think_end, _ = fixed[handler]
    if has_cont:
        if think_start is None:
            gp = head + content                         # these two add the content in both modes
        else:
            gp = head + think_start + rc + (think_end + content if want_content else b"")
        prompt += gp
    return prompt, gp


def _json_str(v) -> str:
    """json::get<std::string>() as chat.cpp's system-message merge calls it."""
    if isinstance(v, str):
        return v
    kind = {type(None): "null", bool: "boolean", list: "array", dict: "object"}.get(type(v), "number")
    raise TemplateApplyError("[json.exception.type_error.302] type must be string, but is " + kind, 500)


def _trimmed(m: ChatMessage) -> ChatMessage:
    def t(s: str) -> str:
        return _text(_trim(s.encode()))
    return ChatMessage(m.role, t(m.content),
                       [ContentPart(p.type, t(p.text) if p.type == "text" else p.text) for p in m.content_parts],
                       m.tool_calls, t(m.reasoning_content), m.tool_name, m.tool_call_id)


# ---------------------------------------------------------------------------------------------------------------
# what the template step needs from a GGUF header

def model_chat_template(header, name: str | None = None) -> bytes | None:
    """llama_model_chat_template: `tokenizer.chat_template[.name]` as llama.cpp reads it (a C string: cut at the
    first NUL), or its one built-in fallback (Mistral Small 2503's tekken vocabulary with 40 layers)."""
    key = "tokenizer.chat_template" + ("." + name if name else "")
    v = header.get(key)
    if v is None:
        if name is None and header.get("tokenizer.ggml.pre") == "tekken" and header.arch_key("block_count") == 40:
            return b"mistral-v7-tekken"
        return None
    if isinstance(v, (list, tuple)):
        return None                                     # arrays are not in llama.cpp's string view of the KVs
    if isinstance(v, bytes):
        b = v
    elif isinstance(v, str):
        b = v.encode("utf-8", "surrogateescape")
    elif isinstance(v, bool):
        b = b"true" if v else b"false"
    else:
        b = str(v).encode()
    return b.split(b"\0", 1)[0]


def _bytes_to_unicode() -> dict[str, int]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _piece(model: str, text: str, ttype: int) -> str:
    """llama_token_to_piece(special=true) for one token, by its GGUF type (1 normal, 2 unknown, 3 control,
    4 user-defined, 6 byte)."""
    if ttype in (2, 3, 4) or ttype not in (1, 6):
        return text
    if ttype == 6:
        return bytes([int(text[3:-1], 16)]).decode("latin-1")
    if model == "gpt2":
        table = _bytes_to_unicode()
        return bytes(table.get(ch, ord(ch) & 0xFF) for ch in text).decode("utf-8", "surrogateescape")
    return text.replace("\u2581", " ")


def vocab_facts(header) -> dict:
    """BOS/EOS texts and the add_bos/add_eos switches, from bankml.tokenizer when it is there, else read directly
    for the vocabularies whose keys say it all (explicit ids and add_*_token flags)."""
    try:
        from ..tokenizer import Tokenizer  # type: ignore
    except ImportError:
        Tokenizer = None
    from ..errors import TokenizerError
    from ..models.gguf import GGUFHeader
    tok = None
    if Tokenizer is not None and isinstance(header, GGUFHeader):
        try:
            tok = Tokenizer.from_gguf(header)
        except TokenizerError:   # a vocabulary the tokenizer does not load: the keys below decide, or refuse
            tok = None
    if tok is not None:

        def text(tid):
            if tid is None or tid < 0:
                return ""
            return tok.token_to_piece(tid, special=True).decode("utf-8", "surrogateescape")
        return {"bos_text": text(tok.bos_id), "eos_text": text(tok.eos_id), "add_bos": bool(tok.add_bos),
                "add_eos": bool(tok.add_eos)}
    model = header.get("tokenizer.ggml.model")
    missing = [k for k in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                           "tokenizer.ggml.add_bos_token") if header.get(k) is None]
    if model not in ("gpt2", "llama") or missing:
        raise TemplateNotReproduced(
            f"BOS/EOS texts of a '{model}' vocabulary without {', '.join(missing) or 'a known model'}: "
            "they need bankml.tokenizer's defaults")
    tokens = header.get("tokenizer.ggml.tokens")
    types = header.get("tokenizer.ggml.token_type")

    def text(key):
        tid = header.get(key)
        if tid is None or not 0 <= tid < len(tokens):
            return ""
        ttype = int(types[tid]) if types is not None else 1
        return _piece(model, tokens[tid], ttype)
    return {"bos_text": text("tokenizer.ggml.bos_token_id"), "eos_text": text("tokenizer.ggml.eos_token_id"),
            "add_bos": bool(header.get("tokenizer.ggml.add_bos_token")),
            "add_eos": bool(header.get("tokenizer.ggml.add_eos_token", False))}


# the name docs/architecture.md gives the template object
ChatTemplate = ChatTemplates
