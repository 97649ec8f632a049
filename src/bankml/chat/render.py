"""One chat template: parsed, probed for its capabilities, rendered over JSON messages.

Owns what llama.cpp's common_chat_template is and what common/chat.cpp's direct render does with it
(common_chat_template_direct_apply_impl): the parse through bankml.jinja (llama.cpp's own Jinja dialect), the
capability probe, the message normalizer (messages_inp_normalizer: string content and lists of parts turned into
what the template takes), the variables the render gets (messages, bos_token / eos_token, enable_thinking,
add_generation_prompt only when true, tools, datetime / date_string, preserve_reasoning / reasoning_effort), and
the leading BOS / trailing EOS text dropped when the vocabulary adds them itself.
Must not know: which template a model uses or the per-family reshaping (bankml.chat.template,
bankml.chat.handlers), chat requests, tokens.

    t = ParsedTemplate(source, bos_token="<s>", eos_token="</s>")  # TemplateLoadError if it does not parse
    t.caps.supports_system_role
    t.render([{"role": "user", "content": "hi"}], add_generation_prompt=True, enable_thinking=False) -> bytes
"""

from __future__ import annotations

import copy
import time as _time

from ..jinja import JinjaError, Program, TemplateSyntaxError, apply_preserve_reasoning, apply_reasoning_effort
from ..jinja import values as JV
from ..jinja.caps import Caps
from .errors import TemplateLoadError
from .messages import _bytes, concat_parts


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
                m["content"] = concat_parts(c)
        out.append(m)
    return out



# ---------------------------------------------------------------------------------------------------------------
# date variables

def _format_time(now: float, fmt: str, localtime) -> str:
    return _time.strftime(fmt, localtime(now))


def extra_context(now: float, localtime) -> dict:
    return {"datetime": _format_time(now, "%b %d %Y", localtime),
            "date_string": _format_time(now, "%d %b %Y", localtime)}

