"""Record the logits llama.cpp b11192's libllama computes for Gemma 3 270M Q4_K_M (gemma-3-270m-q4_k_m.gguf):
whole prompts, then greedy decode steps, into tests/oracle/forward/gemma3.json (token ids and row hashes).

    PYTHONPATH=. python testing/record_forward_gemma3.py            # gemma3.json (-t 2)
    PYTHONPATH=. python testing/record_forward_gemma3.py threads    # gemma3_threads.json (-t 1, 3, 4, 6, 8, 12, 16)

The context is llama-server's (`-t 2 -c 4096 -np 1`: n_batch 2048, n_ubatch 512, flash attention auto, F16
cache, swa_full false: the SWA layers' cache holds pad(512 + 512, 256) = 1024 cells), fed as
testing/record_forward.py feeds SmolLM2: the prompt in one llama_decode (ubatches of 512, last token the only
output), then one call per generated token (greedy, first maximum). Prompts: 40 lengths 1 .. 1500 crossing 64,
256, 512 (the ubatch and the sliding window) and 1024 (the SWA cache's size), text of the sdist's docs after a
Gemma turn head, plus seeded random ids; decode steps cross 512 and 1024 for the prompts near them.

gemma3_threads.json: the same context at llama -t 1, 3, 4, 6, 8, 12 and 16 (the split-KV chunks and the tiled
query tiles follow -t), prompts text-100, text-300, text-600 and (at -t 3, 8, 16) text-1025 of the list above
with 2 to 4 decode steps each (testing/record_forward.py GRAPH_THREADS says what they cross), the prompts kept once.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing.libllama import Llama  # noqa: E402
from testing.oracle import model_path  # noqa: E402
from testing.record_forward import HASH, ORACLE, corpus_texts, row_hash, tokenize  # noqa: E402

OUT = REPO / "tests" / "oracle" / "forward" / "gemma3.json"
OUT_THREADS = OUT.with_name("gemma3_threads.json")
THREADS_STEPS = {"text-100": 2, "text-300": 4, "text-600": 4, "text-1025": 4}
CONTEXT = {"swa_full": False}
MODEL = "gemma-3-270m-q4_k_m.gguf"
LENGTHS = [1, 2, 3, 5, 8, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256, 257,
           300, 400, 480, 500, 511, 512, 513, 600, 767, 768, 900, 1000, 1023, 1024, 1025, 1100, 1300, 1500]
RANDOM_LENGTHS = [7, 520]
STEPS = 24
LONG_STEPS = {"text-500": 40, "text-1000": 40, "text-1023": 8, "text-1500": 40, "text-3": 100}


def make_prompts(L: Llama) -> list[dict]:
    texts = corpus_texts()
    prompts = []
    for i, n in enumerate(LENGTHS):
        text = texts[i % len(texts)]
        off = (i * 7919) % max(1, len(text) // 2)
        head = b"<start_of_turn>user\nWhat is this document about?\n\n"
        ids = tokenize(L, head + text[off:], add_special=True)
        while len(ids) < n:
            ids += tokenize(L, texts[(i + len(ids)) % len(texts)], add_special=False)
        prompts.append({"id": f"text-{n}", "prompt": ids[:n]})
    rng = np.random.default_rng(11192)
    for n in RANDOM_LENGTHS:
        prompts.append({"id": f"random-{n}", "prompt": [int(t) for t in rng.integers(0, L.n_vocab, size=n)]})
    return prompts


def record_threads() -> None:
    from testing.record_forward import record_graph_threads
    rec = record_graph_threads("gemma3_threads", "gemma3", THREADS_STEPS, path=model_path(MODEL),
                               prompts_of=make_prompts, context=CONTEXT)
    OUT_THREADS.write_text(json.dumps(rec, separators=(",", ":")) + "\n")


def main() -> None:
    from bankml.models.verify import sha256_file
    from testing.record_forward import run_case
    path = model_path(MODEL)
    t0 = time.time()
    cases = []
    with Llama(path, n_ctx=4096, n_threads=2, poll=0) as L:
        for p in make_prompts(L):
            n = LONG_STEPS.get(p["id"], STEPS)
            cases.append({"id": p["id"], "prompt": p["prompt"], "steps": n, **run_case(L, p["prompt"], n)})
            print(f"  {p['id']}: {len(p['prompt'])} + {n}  {time.time() - t0:.0f} s", flush=True)
    rec = {"what": "logits of a whole-prompt llama_decode, then of each greedy decode step (Gemma 3)",
           "oracle": ORACLE, "model": path.name, "model_sha256": sha256_file(path),
           "context": {"n_ctx": 4096, "n_batch": 2048, "n_ubatch": 512, "threads": 2, "cache_type": "f16",
                       "flash_attn": "auto (on)", **CONTEXT},
           "hash": HASH, "cases": cases}
    OUT.write_text(json.dumps(rec, separators=(",", ":")) + "\n")
    print(f"gemma3: {len(cases)} cases, {sum(c['steps'] + 1 for c in cases)} rows, {time.time() - t0:.0f} s")


if __name__ == "__main__":
    if sys.argv[1:] == ["threads"]:
        record_threads()
    elif sys.argv[1:]:
        raise SystemExit(f"unknown arguments {sys.argv[1:]!r} (none, or `threads`)")
    else:
        main()
