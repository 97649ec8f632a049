"""Records llama-server b11192's context shift (`--context-shift`, the request fields n_keep and n_discard) on
long generations at `-c 256` into tests/oracle/server/context_shift.json, in the sessions' format of
testing/record_server.py (replayed by tests/test_context_shift.py). Developer tool: needs the oracle build.

    PYTHONPATH=. python testing/record_context_shift.py [--no-check] [--port-base 8211]
    PYTHONPATH=. python testing/record_context_shift.py --engine     # the libllama record below only
    PYTHONPATH=. python testing/record_context_shift.py --engine-qwen3   # its qwen3 cases (NEOX RoPE) only

Each session runs on a fresh llama-server (SmolLM2-135M-Instruct Q4_1, `-c 256 -np 1 -t 2 --jinja --reasoning
off`), twice unless --no-check: a session whose two runs differ after normalization is left out. Generations of
300-700 tokens shift once or several times (tools/server/server-context.cpp pre_decode: when the slot's tokens
+ 1 reach n_ctx); the answers carry n_probs / logprobs so that the floats computed after each shift are
compared bit for bit. An F16 and a Q8_0 (-ctk q8_0 -ctv q8_0) cache; /completion and /v1/chat/completions,
streamed and not, greedy and seeded; a follow-up request on the shifted slot (the prompt cache); and without
--context-shift the generation that stops at the context (truncated, stop_type limit).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing.oracle import model_path  # noqa: E402
from testing.record_server import write_sessions  # noqa: E402
from testing.server_sessions import flags, post  # noqa: E402

CMPL = "/completion"
CHAT = "/v1/chat/completions"
STORY = "Once upon a time, in a small village by the sea, there lived"
LIST = "Here is a long list of the names of animals, one per line:\n1."


def cmpl(prompt, n_predict, **kw) -> dict:
    return post(CMPL, {"prompt": prompt, "n_predict": n_predict, "temperature": 0, **kw})


def chat(text, max_tokens, **kw) -> dict:
    return post(CHAT, {"messages": [{"role": "user", "content": text}], "max_tokens": max_tokens,
                       "temperature": 0, **kw})


def shift_steps(long: bool) -> list[dict]:
    """The shifting requests (long: the full set, else a shorter one for the Q8_0 cache)."""
    s = [
        # n_keep 0 (the default): the oldest half goes, several times
        cmpl(STORY, 420 if long else 330, n_probs=2),
        # the whole prompt kept (n_keep -1), then the same prompt again: the prompt cache on the shifted slot
        cmpl(LIST, 330, n_keep=-1, n_probs=1),
        cmpl(LIST, 40, n_keep=-1, n_probs=1),
        # chosen n_keep / n_discard, streamed
        cmpl(STORY, 320, n_keep=10, n_discard=40, n_probs=1, stream=True),
        # seeded sampling across shifts
        cmpl("Write a poem about the mountains.", 360, n_keep=5, temperature=0.9, seed=7, n_probs=2),
        chat("Tell me a very long story about a dragon and a knight.", 340, logprobs=True, top_logprobs=2),
    ]
    if long:
        s += [
            # n_discard larger than what follows n_keep: clamped to n_left - 1
            cmpl(STORY, 300, n_keep=30, n_discard=500, n_probs=1),
            chat("List every country you know.", 330, stream=True, temperature=1.0, seed=3, n_keep=-1,
                 logprobs=True, top_logprobs=1),
            # one that ends before the context fills, then a shift after a cached prefix
            cmpl(STORY, 20),
            cmpl(STORY + " an old fisherman", 280, n_discard=16, n_probs=1),
            # a prompt that does not fit
            cmpl(" ".join(["word"] * 300), 8),
        ]
    return s


def no_shift_steps() -> list[dict]:
    return [
        cmpl(STORY, 400, n_probs=1),
        cmpl(LIST, 400, stream=True, n_probs=1),
        chat("Tell me a very long story about a dragon and a knight.", 400, logprobs=True, top_logprobs=1),
        chat("Tell me a very long story about a dragon and a knight.", 400, stream=True),
        cmpl(" ".join(["word"] * 300), 8),
    ]


def sessions() -> list[dict]:
    return [
        {"name": "shift_f16", "flags": flags("--context-shift", ctx="256"),
         "note": "--context-shift at -c 256, F16 cache", "steps": shift_steps(True)},
        {"name": "shift_q8_0", "flags": flags("--context-shift", "-ctk", "q8_0", "-ctv", "q8_0", ctx="256"),
         "note": "--context-shift at -c 256, Q8_0 cache", "steps": shift_steps(False)},
        {"name": "no_shift", "flags": flags(ctx="256"),
         "note": "without --context-shift the generation stops when the context fills", "steps": no_shift_steps()},
    ]


# --- the engine record: libllama's logits after llama_memory_seq_rm + llama_memory_seq_add ------------------

ENGINE_OUT = REPO / "tests" / "oracle" / "forward" / "context_shift.json"
#: (cache type, seed of the prompt's tokens, prompt length, the shifts (n_keep, n_discard) in order, steps after)
ENGINE_CASES = [
    ("f16", 1, 200, [(10, 120), (0, 100), (37, 50), (5, 200)], 20),
    ("f16", 2, 250, [(0, 127), (64, 1), (128, 126)], 20),
    ("q8_0", 1, 200, [(10, 120), (0, 100), (37, 50), (5, 200)], 20),
    ("q8_0", 3, 240, [(4, 125), (200, 30)], 20),
]


#: the same on the qwen3 files (testing/record_forward.py derived(): NEOX RoPE, so the shift re-rotates K in NEOX
#: mode), into context_shift_qwen3.json: (file key, cache type, seed, prompt length, shifts, steps after)
QWEN3_OUT = REPO / "tests" / "oracle" / "forward" / "context_shift_qwen3.json"
QWEN3_CASES = [
    ("qwen3", "f16", 1, 200, [(10, 120), (0, 100), (37, 50)], 16),
    ("qwen3", "q8_0", 3, 240, [(4, 125), (200, 30)], 16),
    ("qwen3_q2_0", "f16", 2, 250, [(0, 127), (64, 60)], 16),
    ("qwen3_q1_0", "q8_0", 1, 200, [(10, 120), (37, 50)], 16),
]


def engine_record(cases=None, out=ENGINE_OUT) -> None:
    """Per case: the prompt in one llama_decode at -c 256 (-t 2), then greedy one-token decodes; each time the
    cache holds 255 positions the next shift runs as llama-server's pre_decode runs it (seq_rm(n_keep,
    n_keep + n_discard), seq_add(n_keep + n_discard, n_past, -n_discard); n_discard clamped to n_past - n_keep
    - 1), and `steps` decodes follow the last one. Every decode's logits row is kept as its hash and argmax.
    cases: (file key, ...) tuples as QWEN3_CASES (default: ENGINE_CASES on the SmolLM2 file)."""
    import ctypes as C

    import numpy as np

    from engine_replay import row_hash
    from testing.libllama import GGML_TYPE_F16, GGML_TYPE_Q8_0, Llama

    from bankml.models.verify import sha256_file
    from testing.record_forward import derived

    records = []
    for key, kv, seed, n_prompt, shifts, steps in cases or [(None, *c) for c in ENGINE_CASES]:
        t = GGML_TYPE_F16 if kv == "f16" else GGML_TYPE_Q8_0
        path = model_path("smollm2") if key is None else derived(key)
        with Llama(path, n_ctx=256, n_threads=2, type_k=t, type_v=t) as L:
            lib = L.lib
            lib.llama_get_memory.restype = C.c_void_p
            lib.llama_get_memory.argtypes = [C.c_void_p]
            lib.llama_memory_seq_rm.restype = C.c_bool
            lib.llama_memory_seq_rm.argtypes = [C.c_void_p, C.c_int32, C.c_int32, C.c_int32]
            lib.llama_memory_seq_add.argtypes = [C.c_void_p, C.c_int32, C.c_int32, C.c_int32, C.c_int32]
            mem = lib.llama_get_memory(L.ctx)
            prompt = [int(x) for x in np.random.default_rng(seed).integers(100, 40000, n_prompt)]
            L.decode(prompt, 0)
            n = n_prompt
            rows, argmax, done = [], [], []
            row = L.logits()
            rows.append(row_hash(row))
            argmax.append(int(np.argmax(row)))
            todo = list(shifts)
            left = steps
            while todo or left > 0:
                if n + 1 >= 256:
                    n_keep, n_discard = todo.pop(0)
                    n_discard = max(0, min(n_discard, n - n_keep - 1))
                    lib.llama_memory_seq_rm(mem, 0, n_keep, n_keep + n_discard)
                    lib.llama_memory_seq_add(mem, 0, n_keep + n_discard, n, -n_discard)
                    n -= n_discard
                    done.append([n_keep, n_discard, len(rows)])
                L.decode([argmax[-1]], n)
                n += 1
                row = L.logits()
                rows.append(row_hash(row))
                argmax.append(int(np.argmax(row)))
                if not todo:
                    left -= 1
            rec = {"kv": kv, "prompt": prompt, "shifts": done, "rows": " ".join(rows), "argmax": argmax}
            if key is not None:
                rec = {"model": key, "sha256": sha256_file(path), **rec}
            records.append(rec)
            print(f"{key or 'smollm2'} {kv} seed {seed}: {len(rows)} rows, shifts {done}")
    out.write_text(json.dumps({"n_ctx": 256, "threads": 2, "cases": records}) + "\n")



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--port-base", type=int, default=8211)
    ap.add_argument("--engine", action="store_true", help="record the libllama shifts only")
    ap.add_argument("--engine-qwen3", action="store_true", help="the libllama shifts of the qwen3 files only")
    args = ap.parse_args()
    if args.engine:
        engine_record()
        return
    if args.engine_qwen3:
        engine_record(QWEN3_CASES, QWEN3_OUT)
        return
    write_sessions("context_shift.json", sessions(), args.port_base, not args.no_check)


if __name__ == "__main__":
    main()
