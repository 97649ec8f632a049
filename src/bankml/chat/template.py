"""Chat templates: messages → prompt, as llama-server b11192 (`--jinja`) builds it.

Owns what llama.cpp's common/chat.cpp does between a parsed list of messages and the prompt string, by calling
the modules beside it:
- which template is used (the GGUF's `tokenizer.chat_template`, its `tokenizer.chat_template.tool_use`
  variant, an override given as text or file, "chatml" or nothing → the built-in ChatML template), and the two
  source patches chat.cpp applies to gpt-oss and Mistral templates (common_chat_templates_init);
- llama-server's startup renders (the example conversation, the thinking probe, common_chat_verify_template);
- one request (common_chat_templates_apply): the message reshaping chat.cpp does for every template (content
  parts joined with "\n", a system message merged into the next one, "developer" → "system", string tool
  arguments parsed into objects, ...), the chat_template_kwargs and date variables, then either a per-family
  handler (bankml.chat.handlers) or the generic path with the autoparser's findings (bankml.chat.analysis);
  assistant prefill ("continue_final_message"): the prompt without the last message, the generation prompt,
  and the message's text, with the reasoning markers; `--no-jinja` handed to bankml.chat.legacy.
Must not know: tokens (only the BOS/EOS *texts*, bankml.chat.gguf reads them), HTTP (bankml.chat.request and
server/api/template.py do that), how one template renders (bankml.chat.render).

    tmpls = ChatTemplates.from_gguf(header)      # (alias ChatTemplate); or ChatTemplates.from_source(text, bos, eos)
    params = tmpls.apply(ChatInputs(messages=[ChatMessage("user", "hi")]))
    params.prompt                                              # str

Errors (bankml.chat.errors): TemplateLoadError (llama-server would not start with this template),
TemplateApplyError (the request fails; `status` is llama-server's HTTP status, `message` its text),
TemplateNotReproduced (bankml does not reproduce what llama-server would do here, and says why).
"""

from __future__ import annotations

import time as _time

from ..cxx import nljson
from ..grammar import chat as grammar_chat
from ..jinja import JinjaError, TemplateCrash, TemplateNotImplemented
from .analysis import Reasoning, ToolFormat, analyze_reasoning, analyze_tools, common_prefix, trim
from .errors import TemplateApplyError, TemplateError, TemplateLoadError, TemplateNotReproduced
from .gguf import model_chat_template, vocab_facts
from .handlers import FORMATS, SCHEMA_GRAMMAR_HANDLERS, apply_handler, gemma4_tool_responses, specialized_handler
from .legacy import LegacyTemplateError, legacy_prompt
from .messages import (CONTINUE_AUTO, CONTINUE_CONTENT, CONTINUE_NONE, CONTINUE_REASONING, ChatInputs, ChatMessage,
                       ChatParams, ContentPart, _bytes, _text, parse_messages)
from .render import ParsedTemplate, extra_context, normalize_messages

# the built-in template: no template in the GGUF, or --chat-template chatml
CHATML_TEMPLATE = (
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n"
    "{%- endif -%}"
)

# ---------------------------------------------------------------------------------------------------------------
# the template set of a model (common_chat_templates)

# the two source patches of common_chat_templates_init
_PATCH_GPT_OSS = ('{%- if "<|channel|>analysis<|message|>" in message.content or '
                  '"<|channel|>final<|message|>" in message.content %}')
_PATCH_MISTRAL = ("{%- if (message['content'] is none or message['content'] == '' or "
                  "message['content']|length == 0) and (message['tool_calls'] is not defined or "
                  "message['tool_calls'] is none or message['tool_calls']|length == 0) %}")

# the server's defaults that reach the template (`--reasoning off`, --reasoning-preserve by default)
SERVER_TEMPLATE_KWARGS = {"enable_thinking": "false", "preserve_reasoning": "true"}


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
        self._tool_formats: dict[int, ToolFormat] = {}

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
                                                            "parameters": nljson.loads_python(t.parameters)}}
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
                            fn["arguments"] = nljson.loads_python(fn["arguments"])
                        except ValueError:
                            raise TemplateNotReproduced(
                                "tool call arguments that are not valid JSON: llama-server fails with "
                                "nlohmann's parse error text, which bankml does not reproduce") from None

        now = _time.time() if inputs.now is None else inputs.now
        localtime = inputs.localtime or _time.localtime
        extra = extra_context(now, localtime)
        for k in sorted(inputs.chat_template_kwargs):
            extra[k] = nljson.loads_python(inputs.chat_template_kwargs[k])

        json_schema = nljson.loads_python(inputs.json_schema) if inputs.json_schema else None
        if tools_json is not None and inputs.tool_choice != "none" and inputs.grammar:
            raise TemplateApplyError("Cannot specify grammar with tools", 500)

        handler = specialized_handler(src)
        if handler == "gemma4" and b"{#- OpenAI Chat Completions:" not in src:
            messages = gemma4_tool_responses(messages)

        def render(msgs=None, add_generation=None, additional=None, normalize=True) -> bytes:
            return tmpl.render(messages if msgs is None else msgs,
                               add_generation_prompt=add_gen if add_generation is None else add_generation,
                               enable_thinking=inputs.enable_thinking, tools=tools_json, extra_context=extra,
                               additional_context=additional, add_bos=self.add_bos, add_eos=self.add_eos,
                               normalize=normalize, now=now, localtime=localtime)

        def gen_prompt(msgs=None, additional=None, normalize=True) -> bytes:
            without = render(msgs, False, additional, normalize)
            with_ = render(msgs, True, additional, normalize)
            return with_[common_prefix(without, with_):]

        rc = continue_msg.reasoning_content.encode()
        content = continue_msg.render_content().encode() if has_continuation else b""
        want_content = cfm == CONTINUE_CONTENT
        params = ChatParams(prompt="", generation_prompt="", format=FORMATS.get(handler, "peg-native"),
                            handler=handler or "generic")

        try:
            if handler is None:
                prompt, gp = self._generic(tmpl, render, gen_prompt, has_continuation, want_content, rc, content,
                                           params)
                if tools_json is not None and caps.supports_tool_calls:
                    params.tool_format = self.tool_format(tmpl)
            else:
                prompt, gp = apply_handler(handler, tmpl, messages, render, gen_prompt, add_gen, has_continuation,
                                          want_content, rc, content, json_schema, params)
        except JinjaError as e:
            if handler is None:
                raise TemplateApplyError("Unable to generate parser for this template. Automatic parser "
                                         "generation failed: " + e.text, 400) from None
            raise TemplateApplyError(e.text, 500) from None
        if isinstance(json_schema, dict) and (handler is None or handler in SCHEMA_GRAMMAR_HANDLERS):
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
            params.thinking_start_tag = _text(trim(r.start))
            end = trim(r.end)
            params.thinking_end_tags = [_text(end)] if end else []
            params.reasoning_start, params.reasoning_end = _text(r.start), _text(r.end)
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

    def tool_format(self, tmpl: ParsedTemplate) -> ToolFormat:
        """The autoparser's tool-call format for a template that supports tool calls (computed once)."""
        key = id(tmpl)
        if key not in self._tool_formats:
            self._tool_formats[key] = analyze_tools(tmpl, self.reasoning(tmpl),
                                                    tmpl.caps.supports_parallel_tool_calls)
        return self._tool_formats[key]

    # -- the architecture's short form
    def render(self, messages: list, add_generation_prompt: bool = True) -> str:
        """The prompt for OpenAI-style messages (dicts) or ChatMessages, with the server's defaults; request
        validation and options are bankml.chat.request's job."""
        if messages and isinstance(messages[0], dict):
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


def schema_error(schema: dict) -> str | None:
    """The JSON schema converter's error for `schema` (llama-server builds the response-format grammar while it
    builds the prompt, and fails the request on it), or None when it converts."""
    # the chat step's message: a schema-document error without the converter's "conversion failed" prefix
    return grammar_chat.schema_error(schema)


def _json_str(v) -> str:
    """json::get<std::string>() as chat.cpp's system-message merge calls it."""
    if isinstance(v, str):
        return v
    kind = {type(None): "null", bool: "boolean", list: "array", dict: "object"}.get(type(v), "number")
    raise TemplateApplyError("[json.exception.type_error.302] type must be string, but is " + kind, 500)


def _trimmed(m: ChatMessage) -> ChatMessage:
    def t(s: str) -> str:
        return _text(trim(s.encode()))
    return ChatMessage(m.role, t(m.content),
                       [ContentPart(p.type, t(p.text) if p.type == "text" else p.text) for p in m.content_parts],
                       m.tool_calls, t(m.reasoning_content), m.tool_name, m.tool_call_id)


# the name docs/architecture.md gives the template object
ChatTemplate = ChatTemplates
