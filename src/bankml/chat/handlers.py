"""The per-family handlers: templates chat.cpp recognizes by their source and treats its own way.

Owns common_chat_try_specialized_template (common/chat.cpp) and the handlers in common/parsers/ as far as the
prompt goes: which family a template source belongs to (gpt-oss, LFM2, DeepSeek V3.2/V4, Gemma 4, Ministral 3,
Qwen3-Coder, Kimi, ...), how each reshapes the messages before the render (thinking copied, content parts,
tool results merged or reordered), how it extends the prompt (generation prompt, assistant prefill with its
reasoning markers), and what it declares: thinking tags, extra stops, message delimiters, the output format.
Must not know: how a template is chosen or rendered (the caller passes render functions), the generic path
(bankml.chat.analysis), requests, tokens.

    specialized_handler(source)   # "gpt-oss", "qwen3-coder", ... or None (the generic path)
    prompt, gp = apply_handler(handler, tmpl, messages, render, gen_prompt, ...)
"""

from __future__ import annotations

from ..cxx import nljson


FORMATS = {"gemma4": "peg-gemma4", "minimax-m3": "peg-minimax-m3"}

# the handlers that build a response-format grammar (and so reject a schema the converter refuses)
SCHEMA_GRAMMAR_HANDLERS = frozenset(("ministral-3", "gpt-oss", "lfm2", "lfm2.5", "deepseek-v3.2", "gemma4",
                                      "minicpm5", "minimax-m3", "qwen3-coder", "cohere2moe"))


# (family, texts the template source holds, texts it must not hold), tried in chat.cpp's order; DeepSeek V3.2
# names its tool call block "function_calls", V4 "tool_calls"
_FAMILIES = [
    ("ministral-3", ("[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]"), ("[CALL_ID]",)),
    ("gpt-oss", ("<|channel|>",), ()),
    ("muse-glimmer", ("<atem:function_calls>", "<|eom|>"), ()),
    ("functionary-v3.2", (">>>all", ">>>${recipient}"), ()),
    ("kimi-k2", ("<|tool_calls_section_begin|>", "<|tool_call_begin|>"), ()),
    ("kimi-k3", ("<|open|>", "<|close|>", "<|end_of_msg|>"), ()),
    ("ling-3", ("<role>ASSISTANT</role>", "<arg_key>"), ()),
    ("cohere2moe", ("<|START_TEXT|>", "<|START_ACTION|>"), ()),
    ("lfm2", ("<|tool_list_start|>", "<|tool_list_end|>"), ()),
    ("lfm2.5", ("List of tools: [",), ("<|tool_list_start|>",)),
    ("gigachat-v3", ("<|role_sep|>", "<|message_sep|>"), ("<|function_call|>",)),
    ("minimax-m3", ("]<]minimax[>[", "<tool_call>", "<invoke name="), ()),
    ("deepseek-v3.2", ("dsml_token", "DSML", "function_calls"), ()),
    ("deepseek-v3.2", ("dsml_token", "DSML", "tool_calls"), ()),
    ("gemma4", ("'<|tool_call>call:'",), ()),
    ("minicpm5", ("Tool usage guidelines:", '<function name="', '<param name="'), ()),
    ("qwen3-coder", ("<tool_call>", "<function=", "<parameter="), ("'<tool_call><function=' ~ tool_call.name ~ '>'",)),
]


def specialized_handler(src: bytes) -> str | None:
    """The family chat.cpp recognizes in a template source, or None (the generic path)."""
    for family, present, absent in _FAMILIES:
        if all(t.encode() in src for t in present) and not any(t.encode() in src for t in absent):
            return family
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


def gemma4_tool_responses(messages: list) -> list:
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
                        response = nljson.loads_python(c)
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



def _prefill(opening: bytes, reasoning: bytes, closing: bytes, content: bytes, want_content: bool) -> bytes:
    """An assistant prefill: the opening and the reasoning, then the closing and the content when the
    continuation is the content (continue_final_message "content")."""
    return opening + reasoning + (closing + content if want_content else b"")


def _reshaped(adj, render, gen_prompt, p, head: bytes, start: str, end: str, has_cont, want_content, rc, content):
    """A family whose reshaped messages are rendered as they are, with one pair of thinking tags: the prefill is
    head + start tag + reasoning (+ end tag + content)."""
    prompt = render(adj, normalize=False)
    gp = gen_prompt(adj, normalize=False)
    p.supports_thinking, p.thinking_start_tag, p.thinking_end_tags = True, start, [end]
    if has_cont:
        gp = _prefill(head + start.encode(), rc, end.encode(), content, want_content)
        prompt += gp
    return prompt, gp


def apply_handler(handler, tmpl, messages, render, gen_prompt, add_gen, has_cont, want_content, rc, content,
                 json_schema, params):
    p = params
    p.message_delimiters = list(_DELIMITERS.get(handler, []))
    if handler == "ministral-3":
        return _reshaped(_ministral_messages(messages), render, gen_prompt, p, b"", "[THINK]", "[/THINK]", has_cont,
                         want_content, rc, content)
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
            gp = _prefill(b"<|start|>assistant<|channel|>analysis<|message|>", rc,
                          b"<|end|><|start|>assistant<|channel|>final<|message|>", content, want_content)
            prompt += gp
        return prompt, gp
    if handler == "muse-glimmer":
        prompt = render()
        gp = b"<|start|>assistant"
        p.supports_thinking = True
        if has_cont:
            gp = _prefill(b"<|start|>assistant to=self<|message|>", rc, b"<|eom|><|start|>assistant to=user<|message|>",
                          content, want_content)
            prompt += gp
        return prompt, gp
    if handler in ("lfm2", "lfm2.5"):
        return _reshaped(_copy_thinking(messages, False), render, gen_prompt, p, b"<|im_start|>assistant\n", "<think>",
                         "</think>", has_cont, want_content, rc, content)
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
            gp = _prefill(head + think_start, rc, think_end, content, want_content)
        prompt += gp
    return prompt, gp
