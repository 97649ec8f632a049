"""Chat templates without Jinja: llama-server b11192's `--no-jinja` path (the built-in templates by name).

Mirrors src/llama-chat.cpp (the named templates, `llm_chat_detect_template`, `llm_chat_apply_template`),
`llama_chat_apply_template` (src/llama.cpp) and common/chat.cpp's `common_chat_templates_apply_legacy` and
`common_chat_verify_template` (the `use_jinja = false` half):

- a template *name* ("chatml", "llama3", "command-r", ...) picks a built-in template; any other text is looked at
  for tell-tale markers (`<|im_start|>` → chatml, `[INST]` → a Mistral or Llama 2 variant, ...) in the
  reference's order; nothing found: the template is not supported;
- each built-in template is a fixed formatting rule over (role, content) pairs, written here from the
  reference's description of each, in bytes (roles and contents are C strings there: a NUL ends them; `trim`
  is C isspace; upper-casing is ASCII only);
- the legacy chat step joins a message's text parts with "\\n" (after its content), renders every message as
  given (no prefill handling: an assistant message at the end is formatted like any other), and returns no
  generation prompt, no stops and no parser; a JSON schema becomes a plain converted grammar.

    BUILTIN_TEMPLATES                      # llama_chat_builtin_templates(): the names, in the reference's order
    detect(b"llama3") -> "llama3"          # the internal template id, or None (LLM_CHAT_TEMPLATE_UNKNOWN)
    apply_template(src, [(b"user", b"hi")], add_ass=True) -> bytes | None     # llama_chat_apply_template
    verify(src) -> bool                    # common_chat_verify_template(src, use_jinja=false)
    legacy_prompt(src, messages, add_generation_prompt) -> str                 # raises LegacyTemplateError

Must not know: tokens, HTTP, Jinja (bankml.chat.template owns the Jinja path and calls this one for --no-jinja).
"""

from __future__ import annotations

from ..errors import BankmlError

#: the template names llama-server accepts without --jinja (std::map order: sorted bytes)
_NAMES = (
    "chatml", "llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "mistral-v1", "mistral-v3",
    "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken", "phi3", "phi4", "falcon3", "zephyr", "monarch",
    "gemma", "orion", "openchat", "vicuna", "vicuna-orca", "deepseek", "deepseek2", "deepseek3", "deepseek-ocr",
    "command-r", "llama3", "chatglm3", "chatglm4", "glmedge", "minicpm", "exaone3", "exaone4", "exaone-moe",
    "rwkv-world", "granite", "granite-4.0", "granite-4.1", "gigachat", "megrez", "yandex", "bailing",
    "bailing-think", "bailing2", "llama4", "smolvlm", "hunyuan-moe", "gpt-oss", "hunyuan-dense", "hunyuan-vl",
    "kimi-k2", "seed_oss", "grok-2", "pangu-embedded", "solar-open",
)
BUILTIN_TEMPLATES = tuple(sorted(_NAMES, key=lambda s: s.encode()))

# templates detected from markers that have no name of their own
DOTS1 = "dots1"

_WS = b" \t\n\v\f\r"


class LegacyTemplateError(BankmlError):
    """The legacy chat step failed as llama-server's does (a std::runtime_error: HTTP 500, `message`)."""

    status = 500

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


def trim(b: bytes) -> bytes:
    """llama-chat.cpp's trim: C isspace bytes off both ends."""
    return b.strip(_WS)


def _c_str(s) -> bytes:
    """A std::string's c_str() as a C function reads it: bytes up to the first NUL."""
    b = s if isinstance(s, bytes) else s.encode("utf-8", "surrogateescape")
    i = b.find(b"\0")
    return b if i < 0 else b[:i]


# ---------------------------------------------------------------------------------------------------------------
# detection (llm_chat_detect_template)

def detect(tmpl: bytes | str) -> str | None:
    """The built-in template a template text selects: its name when it is one, else the first marker rule that
    matches; None when nothing does."""
    t = tmpl if isinstance(tmpl, bytes) else tmpl.encode("utf-8", "surrogateescape")
    name = t.decode("utf-8", "surrogateescape")
    if name in _NAMES:
        return name

    def has(s: str) -> bool:
        return s.encode() in t

    if has("<|im_start|>"):
        if has("<|im_sep|>"):
            return "phi4"
        return "smolvlm" if has("<end_of_utterance>") else "chatml"
    if t.startswith(b"mistral") or has("[INST]"):
        if has("[SYSTEM_PROMPT]"):
            return "mistral-v7"
        if has("' [INST] ' + system_message") or has("[AVAILABLE_TOOLS]"):
            if has(" [INST]"):
                return "mistral-v1"
            if has('"[INST]"'):
                return "mistral-v3-tekken"
            return "mistral-v3"
        if has("content.strip()"):
            return "llama2-sys-strip"
        if has("bos_token + '[INST]"):
            return "llama2-sys-bos"
        if has("<<SYS>>"):
            return "llama2-sys"
        return "llama2"
    if has("<|assistant|>") and has("<|end|>"):
        return "phi3"
    if has("[gMASK]<sop>"):
        return "chatglm4"
    if has("<|assistant|>") and has("<|user|>"):
        if has("<|tool_declare|>"):
            return "exaone-moe"
        return "falcon3" if has("</s>") else "glmedge"
    if has("<|{{ item['role'] }}|>") and has("<|begin_of_image|>"):
        return "glmedge"
    if has("<|user|>") and has("<|endoftext|>"):
        return "zephyr"
    if has("bos_token + message['role']"):
        return "monarch"
    if has("<start_of_turn>"):
        return "gemma"
    if has("'\\n\\nAssistant: ' + eos_token"):
        return "orion"
    if has("GPT4 Correct "):
        return "openchat"
    if has("USER: ") and has("ASSISTANT: "):
        return "vicuna-orca" if has("SYSTEM: ") else "vicuna"
    if has("### Instruction:") and has("<|EOT|>"):
        return "deepseek"
    if has("<|START_OF_TURN_TOKEN|>") and has("<|USER_TOKEN|>"):
        return "command-r"
    if has("<|start_header_id|>") and has("<|end_header_id|>"):
        return "llama3"
    if has("[gMASK]sop"):
        return "chatglm3"
    if has("<用户>"):
        return "minicpm"
    if has("'Assistant: ' + message['content'] + eos_token"):
        return "deepseek2"
    if has("<｜Assistant｜>") and has("<｜User｜>") and has("<｜end▁of▁sentence｜>"):
        return "deepseek3"
    if has("[|system|]") and has("[|assistant|]") and has("[|endofturn|]"):
        return "exaone4" if has("[|tool|]") else "exaone3"
    if has("rwkv-world") or has("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"):
        return "rwkv-world"
    if has("<|start_of_role|>"):
        if has("<tool_call>") or has("<tools>"):
            return "granite-4.0" if has("g4_default_system_message") else "granite-4.1"
        return "granite"
    if has("message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"):
        return "gigachat"
    if has("<|role_start|>"):
        return "megrez"
    if has(" Ассистент:"):
        return "yandex"
    if has("<role>ASSISTANT</role>") and has("'HUMAN'"):
        return "bailing"
    if has("<role>ASSISTANT</role>") and has('"HUMAN"') and has("<think>"):
        return "bailing-think"
    if has("<role>ASSISTANT</role>") and has("<role>HUMAN</role>") and has("<|role_end|>"):
        return "bailing2"
    if has("<|header_start|>") and has("<|header_end|>"):
        return "llama4"
    if has("<|endofuserprompt|>"):
        return DOTS1
    if has("<|extra_0|>") and has("<|extra_4|>"):
        return "hunyuan-moe"
    if has("<|start|>") and has("<|channel|>"):
        return "gpt-oss"
    if has("<｜hy_Assistant｜>") and has("<｜hy_begin▁of▁sentence｜>"):
        return "hunyuan-vl"
    if has("<｜hy_Assistant｜>") and has("<｜hy_place▁holder▁no▁3｜>"):
        return "hunyuan-dense"
    if has("<|im_assistant|>assistant<|im_middle|>"):
        return "kimi-k2"
    if has("<seed:bos>"):
        return "seed_oss"
    if has("'Assistant: '  + message['content'] + '<|separator|>"):
        return "grok-2"
    if has("[unused9]系统：[unused10]"):
        return "pangu-embedded"
    if has("<|begin|>") and has("<|end|>") and has("<|content|>"):
        return "solar-open"
    return None


# ---------------------------------------------------------------------------------------------------------------
# the built-in templates (llm_chat_apply_template); each takes [(role, content)] as bytes and add_ass

def _chatml(chat, add_ass):
    out = [b"<|im_start|>" + r + b"\n" + c + b"<|im_end|>\n" for r, c in chat]
    return out + ([b"<|im_start|>assistant\n"] if add_ass else [])


def _mistral_v7(trailing: bytes):
    def render(chat, add_ass):
        out = []
        for r, c in chat:
            if r == b"system":
                out.append(b"[SYSTEM_PROMPT]" + trailing + c + b"[/SYSTEM_PROMPT]")
            elif r == b"user":
                out.append(b"[INST]" + trailing + c + b"[/INST]")
            else:
                out.append(trailing + c + b"</s>")
        return out
    return render


def _mistral_v1_v3(leading: bytes, trailing: bytes, trim_assistant: bool):
    def render(chat, add_ass):
        out = []
        inside = False
        for r, c in chat:
            if not inside:
                out.append(leading + b"[INST]" + trailing)
                inside = True
            if r == b"system":
                out.append(c + b"\n\n")
            elif r == b"user":
                out.append(c + leading + b"[/INST]")
            else:
                out.append(trailing + (trim(c) if trim_assistant else c) + b"</s>")
                inside = False
        return out
    return render


def _llama2(system: bool, bos_inside: bool, strip: bool):
    def render(chat, add_ass):
        out = [b"[INST] "]
        inside = True
        for r, c in chat:
            c = trim(c) if strip else c
            if not inside:
                inside = True
                out.append(b"<s>[INST] " if bos_inside else b"[INST] ")
            if r == b"system":
                out.append(b"<<SYS>>\n" + c + b"\n<</SYS>>\n\n" if system else c + b"\n")
            elif r == b"user":
                out.append(c + b" [/INST]")
            else:
                out.append(c + b"</s>")
                inside = False
        return out
    return render


def _simple(fmt, gen: bytes):
    """Templates that format every message the same way: fmt(role, content) -> bytes."""
    def render(chat, add_ass):
        return [fmt(r, c) for r, c in chat] + ([gen] if add_ass else [])
    return render


def _by_role(table: dict, gen: bytes, other=None, transform=None):
    """Templates with one format per role (roles not in the table: `other`, or nothing)."""
    def render(chat, add_ass):
        out = []
        for r, c in chat:
            f = table.get(r, other)
            if f is not None:
                out.append(f(transform(c) if transform else c))
        return out + ([gen] if add_ass else [])
    return render


def _wrap(pre: str | bytes, post: str | bytes = b""):
    pre = pre.encode() if isinstance(pre, str) else pre
    post = post.encode() if isinstance(post, str) else post
    return lambda c: pre + c + post


def _monarch(chat, add_ass):
    out = [(b"" if i == 0 else b"<s>") + r + b"\n" + c + b"</s>\n" for i, (r, c) in enumerate(chat)]
    return out + ([b"<s>assistant\n"] if add_ass else [])


def _gemma(chat, add_ass):
    out = []
    system = b""
    for r, c in chat:
        if r == b"system":
            system += trim(c)
            continue
        role = b"model" if r == b"assistant" else r
        out.append(b"<start_of_turn>" + role + b"\n")
        if system and role != b"model":
            out.append(system + b"\n\n")
            system = b""
        out.append(trim(c) + b"<end_of_turn>\n")
    return out + ([b"<start_of_turn>model\n"] if add_ass else [])


def _orion(chat, add_ass):
    out = []
    system = b""
    for r, c in chat:
        if r == b"system":
            system += c
        elif r == b"user":
            out.append(b"Human: ")
            if system:
                out.append(system + b"\n\n")
                system = b""
            out.append(c + b"\n\nAssistant: </s>")
        else:
            out.append(c + b"</s>")
    return out


def _openchat(chat, add_ass):
    out = []
    for r, c in chat:
        if r == b"system":
            out.append(c + b"<|end_of_turn|>")
        else:
            role = r[:1].upper() + r[1:] if r else r
            out.append(b"GPT4 Correct " + role + b": " + c + b"<|end_of_turn|>")
    return out + ([b"GPT4 Correct Assistant:"] if add_ass else [])


def _vicuna(orca: bool):
    return _by_role({b"system": _wrap("SYSTEM: ", "\n") if orca else _wrap("", "\n\n"),
                     b"user": _wrap("USER: ", "\n"), b"assistant": _wrap("ASSISTANT: ", "</s>\n")},
                    b"ASSISTANT:")


def _chatglm3(chat, add_ass):
    out = [b"[gMASK]sop"] + [b"<|" + r + b"|>\n " + c for r, c in chat]
    return out + ([b"<|assistant|>"] if add_ass else [])


def _chatglm4(chat, add_ass):
    out = [b"[gMASK]<sop>"] + [b"<|" + r + b"|>\n" + c for r, c in chat]
    return out + ([b"<|assistant|>\n"] if add_ass else [])


def _minicpm(chat, add_ass):
    return [("<用户>".encode() + trim(c) + b"<AI>") if r == b"user" else trim(c) for r, c in chat]


def _rwkv(chat, add_ass):
    out = []
    for i, (r, c) in enumerate(chat):
        if r == b"system":
            out.append(b"System: " + trim(c) + b"\n\n")
        elif r == b"user":
            out.append(b"User: " + trim(c) + b"\n\n")
            if i == len(chat) - 1:
                out.append(b"Assistant:")
        elif r == b"assistant":
            out.append(b"Assistant: " + trim(c) + b"\n\n")
    return out


def _granite3(chat, add_ass):
    out = []
    for r, c in chat:
        out.append(b"<|start_of_role|>" + r + b"<|end_of_role|>")
        if r == b"assistant_tool_call":
            out.append(b"<|tool_call|>")
        out.append(c + b"<|end_of_text|>\n")
    return out + ([b"<|start_of_role|>assistant<|end_of_role|>"] if add_ass else [])


def _granite4(chat, add_ass):
    out = []
    for r, c in chat:
        if r == b"assistant_tool_call":
            out.append(b"<|start_of_role|>assistant<|end_of_role|><|tool_call|>")
        else:
            out.append(b"<|start_of_role|>" + r + b"<|end_of_role|>")
        out.append(c + b"<|end_of_text|>\n")
    return out + ([b"<|start_of_role|>assistant<|end_of_role|>"] if add_ass else [])


def _gigachat(chat, add_ass):
    has_system = bool(chat) and chat[0][0] == b"system"
    out = [b"<s>" + chat[0][1] + b"<|message_sep|>" if has_system else b"<s>"]
    for r, c in chat[1 if has_system else 0:]:
        if r == b"user":
            out.append(b"user<|role_sep|>" + c + b"<|message_sep|>available functions<|role_sep|>[]<|message_sep|>")
        elif r == b"assistant":
            out.append(b"assistant<|role_sep|>" + c + b"<|message_sep|>")
    return out + ([b"assistant<|role_sep|>"] if add_ass else [])


def _upper(b: bytes) -> bytes:
    return bytes(x - 32 if 97 <= x <= 122 else x for x in b)


def _bailing(think: bool):
    def render(chat, add_ass):
        out = [b"<role>" + (b"HUMAN" if r == b"user" else _upper(r)) + b"</role>" + c for r, c in chat]
        if add_ass:
            out.append(b"<role>ASSISTANT</role>" + (b"<think>" if think else b""))
        return out
    return render


def _bailing2(chat, add_ass):
    out = [] if chat and chat[0][0] == b"system" else [b"<role>SYSTEM</role>detailed thinking off<|role_end|>"]
    out += [b"<role>" + (b"HUMAN" if r == b"user" else _upper(r)) + b"</role>" + c + b"<|role_end|>"
            for r, c in chat]
    return out + ([b"<role>ASSISTANT</role>"] if add_ass else [])


def _smolvlm(chat, add_ass):
    out = [b"<|im_start|>"]
    for r, c in chat:
        if r == b"system":
            out.append(c + b"\n\n")
        elif r == b"user":
            out.append(b"User: " + c + b"<end_of_utterance>\n")
        else:
            out.append(b"Assistant: " + c + b"<end_of_utterance>\n")
    return out + ([b"Assistant:"] if add_ass else [])


def _hunyuan_dense(chat, add_ass):
    out = []
    for i, (r, c) in enumerate(chat):
        if i == 0 and r == b"system":
            out.append(c + "<｜hy_place▁holder▁no▁3｜>".encode())
        if r == b"assistant":
            out.append("<｜hy_Assistant｜>".encode() + c + "<｜hy_place▁holder▁no▁2｜>".encode())
        elif r == b"user":
            out.append("<｜hy_User｜>".encode() + c + "<｜hy_Assistant｜>".encode())
    return out


def _hunyuan_vl(chat, add_ass):
    out = ["<｜hy_begin▁of▁sentence｜>".encode()]
    for i, (r, c) in enumerate(chat):
        if i == 0 and r == b"system":
            out.append(c + "<｜hy_place▁holder▁no▁3｜>".encode())
            continue
        if r == b"user":
            out.append(c + "<｜hy_User｜>".encode())
        elif r == b"assistant":
            out.append(c + "<｜hy_Assistant｜>".encode())
    return out


def _kimi(chat, add_ass):
    heads = {b"system": b"<|im_system|>system<|im_middle|>", b"user": b"<|im_user|>user<|im_middle|>",
             b"assistant": b"<|im_assistant|>assistant<|im_middle|>", b"tool": b"<|im_system|>tool<|im_middle|>"}
    out = [heads.get(r, b"") + c + b"<|im_end|>" for r, c in chat]
    return out + ([b"<|im_assistant|>assistant<|im_middle|>"] if add_ass else [])


def _pangu(chat, add_ass):
    names = {b"system": "系统", b"user": "用户", b"assistant": "助手", b"tool": "工具", b"function": "方法"}
    out = []
    for i, (r, c) in enumerate(chat):
        if i == 0 and r != b"system":
            out.append("[unused9]系统：[unused10]".encode())
        if r in names:
            out.append(f"[unused9]{names[r]}：".encode() + c + b"[unused10]")
    return out + (["[unused9]助手：".encode()] if add_ass else [])


_EOS_DS = "<｜end▁of▁sentence｜>"

_RENDER = {
    "chatml": _chatml,
    "mistral-v7": _mistral_v7(b" "),
    "mistral-v7-tekken": _mistral_v7(b""),
    "mistral-v1": _mistral_v1_v3(b" ", b" ", False),
    "mistral-v3": _mistral_v1_v3(b"", b" ", True),
    "mistral-v3-tekken": _mistral_v1_v3(b"", b"", False),
    "llama2": _llama2(False, False, False),
    "llama2-sys": _llama2(True, False, False),
    "llama2-sys-bos": _llama2(True, True, False),
    "llama2-sys-strip": _llama2(True, False, True),
    "phi3": _simple(lambda r, c: b"<|" + r + b"|>\n" + c + b"<|end|>\n", b"<|assistant|>\n"),
    "phi4": _simple(lambda r, c: b"<|im_start|>" + r + b"<|im_sep|>" + c + b"<|im_end|>",
                    b"<|im_start|>assistant<|im_sep|>"),
    "falcon3": _simple(lambda r, c: b"<|" + r + b"|>\n" + c + b"\n", b"<|assistant|>\n"),
    "zephyr": _simple(lambda r, c: b"<|" + r + b"|>\n" + c + b"<|endoftext|>\n", b"<|assistant|>\n"),
    "monarch": _monarch,
    "gemma": _gemma,
    "orion": _orion,
    "openchat": _openchat,
    "vicuna": _vicuna(False),
    "vicuna-orca": _vicuna(True),
    "deepseek": _by_role({b"system": _wrap(""), b"user": _wrap("### Instruction:\n", "\n"),
                          b"assistant": _wrap("### Response:\n", "\n<|EOT|>\n")}, b"### Response:\n"),
    "command-r": _by_role({b"system": _wrap("<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>", "<|END_OF_TURN_TOKEN|>"),
                           b"user": _wrap("<|START_OF_TURN_TOKEN|><|USER_TOKEN|>", "<|END_OF_TURN_TOKEN|>"),
                           b"assistant": _wrap("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
                                               "<|END_OF_TURN_TOKEN|>")},
                          b"<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", transform=trim),
    "llama3": _simple(lambda r, c: b"<|start_header_id|>" + r + b"<|end_header_id|>\n\n" + trim(c) + b"<|eot_id|>",
                      b"<|start_header_id|>assistant<|end_header_id|>\n\n"),
    "chatglm3": _chatglm3,
    "chatglm4": _chatglm4,
    "glmedge": _simple(lambda r, c: b"<|" + r + b"|>\n" + c, b"<|assistant|>"),
    "minicpm": _minicpm,
    "deepseek2": _by_role({b"system": _wrap("", "\n\n"), b"user": _wrap("User: ", "\n\n"),
                           b"assistant": _wrap("Assistant: ", _EOS_DS)}, b"Assistant:"),
    "deepseek3": _by_role({b"system": _wrap("", "\n\n"), b"user": _wrap("<｜User｜>".encode()),
                           b"assistant": _wrap("<｜Assistant｜>".encode(), _EOS_DS)}, "<｜Assistant｜>".encode()),
    "deepseek-ocr": lambda chat, add_ass: [c for _, c in chat],
    "exaone3": _by_role({b"system": _wrap("[|system|]", "[|endofturn|]\n"), b"user": _wrap("[|user|]", "\n"),
                         b"assistant": _wrap("[|assistant|]", "[|endofturn|]\n")}, b"[|assistant|]", transform=trim),
    "exaone4": _by_role({b"system": _wrap("[|system|]", "[|endofturn|]\n"), b"user": _wrap("[|user|]", "\n"),
                         b"assistant": _wrap("[|assistant|]", "[|endofturn|]\n"),
                         b"tool": _wrap("[|tool|]", "[|endofturn|]\n")}, b"[|assistant|]", transform=trim),
    "exaone-moe": _by_role({r: _wrap(b"<|" + r + b"|>\n", b"<|endofturn|>\n")
                            for r in (b"system", b"user", b"assistant", b"tool")}, b"<|assistant|>\n",
                           transform=trim),
    "rwkv-world": _rwkv,
    "granite": _granite3,
    "granite-4.0": _granite4,
    "granite-4.1": _granite4,
    "gigachat": _gigachat,
    "megrez": _simple(lambda r, c: b"<|role_start|>" + r + b"<|role_end|>" + c + b"<|turn_end|>",
                      b"<|role_start|>assistant<|role_end|>"),
    "yandex": _by_role({b"user": _wrap(" Пользователь: ", "\n\n"), b"assistant": _wrap(" Ассистент: ", "\n\n")},
                       " Ассистент:[SEP]".encode()),
    "bailing": _bailing(False),
    "bailing-think": _bailing(True),
    "bailing2": _bailing2,
    "llama4": _simple(lambda r, c: b"<|header_start|>" + r + b"<|header_end|>\n\n" + trim(c) + b"<|eot|>",
                      b"<|header_start|>assistant<|header_end|>\n\n"),
    "smolvlm": _smolvlm,
    DOTS1: _by_role({b"system": _wrap("<|system|>", "<|endofsystem|>"),
                     b"user": _wrap("<|userprompt|>", "<|endofuserprompt|>")}, b"<|response|>",
                    other=_wrap("<|response|>", "<|endofresponse|>")),
    "hunyuan-moe": _by_role({b"system": _wrap("<|startoftext|>", "<|extra_4|>"), b"assistant": _wrap("", "<|eos|>")},
                            b"", other=_wrap("<|startoftext|>", "<|extra_0|>")),
    "gpt-oss": _simple(lambda r, c: b"<|start|>" + r + b"<|message|>" + c
                       + (b"<|return|>" if r == b"assistant" else b"<|end|>"), b"<|start|>assistant"),
    "hunyuan-dense": _hunyuan_dense,
    "hunyuan-vl": _hunyuan_vl,
    "kimi-k2": _kimi,
    "seed_oss": _simple(lambda r, c: b"<seed:bos>" + r + b"\n" + (trim(c) if r == b"assistant" else c)
                        + b"<seed:eos>", b"<seed:bos>assistant\n"),
    "grok-2": _by_role({b"system": lambda c: b"System: " + trim(c) + b"<|separator|>\n\n",
                        b"user": lambda c: b"Human: " + trim(c) + b"<|separator|>\n\n",
                        b"assistant": _wrap("Assistant: ", "<|separator|>\n\n")}, b"Assistant:"),
    "pangu-embedded": _pangu,
    "solar-open": _simple(lambda r, c: b"<|begin|>" + r + b"<|content|>" + c + b"<|end|>", b"<|begin|>assistant"),
}

def apply_template(tmpl: bytes | str | None, chat: list, add_ass: bool) -> bytes | None:
    """llama_chat_apply_template: the formatted chat, or None where the reference returns -1 (no template
    detected). `tmpl` None means "chatml"; `chat` is [(role, content)]; the template text, roles and contents
    (str or bytes) are each read up to a NUL, as the C interface does."""
    kind = detect(b"chatml" if tmpl is None else _c_str(tmpl))
    if kind is None:
        return None
    msgs = [(_c_str(r), _c_str(c)) for r, c in chat]
    return b"".join(_RENDER[kind](msgs, add_ass))


def verify(tmpl: bytes | str) -> bool:
    """common_chat_verify_template(tmpl, use_jinja=false): a "user"/"test" message formats."""
    return apply_template(tmpl, [(b"user", b"test")], True) is not None


def startup_error(tmpl: str) -> str:
    """The error common_params_parse throws (llama-server exits 1) for a --chat-template(-file) text the legacy
    path does not support."""
    return ("error: the supplied chat template is not supported: " + tmpl
            + "\nnote: llama.cpp was started without --jinja, we only support commonly used templates\n")


def message_contents(messages) -> list[tuple[bytes, bytes]]:
    """common_chat_templates_apply_legacy's (role, content) pairs: a message's content, then each text (or
    media marker) part, joined with "\\n" once the text is not empty; other fields are not rendered."""
    out = []
    for m in messages:
        content = _bytes(m.content)
        for p in m.content_parts:
            if p.type not in ("text", "media_marker"):
                continue
            if content:
                content += b"\n"
            content += _bytes(p.text)
        out.append((_bytes(m.role), content))
    return out


def _bytes(s) -> bytes:
    return s if isinstance(s, bytes) else s.encode("utf-8", "surrogateescape")


def legacy_prompt(source: bytes | str, messages, add_generation_prompt: bool) -> str:
    """The prompt of common_chat_templates_apply_legacy for bankml.chat.messages ChatMessages (str, surrogateescape
    for invalid UTF-8). Raises LegacyTemplateError("this custom template is not supported, try using --jinja")."""
    out = apply_template(source, message_contents(messages), add_generation_prompt)
    if out is None:
        raise LegacyTemplateError("this custom template is not supported, try using --jinja")
    return out.decode("utf-8", "surrogateescape")


__all__ = ["BUILTIN_TEMPLATES", "LegacyTemplateError", "apply_template", "detect", "legacy_prompt",
           "message_contents", "startup_error", "trim", "verify"]
