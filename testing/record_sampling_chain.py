"""Sampler chain cases through the oracle's libllama (llama_sampler_* C API), recorded into
tests/oracle/sampling/chain.json. Developer tool (python -m testing.record_sampling chain).

Each case: an input row (synthetic: `synthetic_logits(kind, n, seed)` below, which the test recomputes; or a
real logits row of SmolLM2 Q4_1, recomputed by the test with bankml's engine and checked by its sha256), a
chain (steps as bankml.sampling.chain builds them), history tokens accepted first, then a few steps: apply the
chain to a fresh candidate array, record the selected id, the array's size, sorted flag, offset (XTC moves the
start) and the sha256 of its bytes ({int32 id, float logit, float p} per entry), then accept the selected token.
"""

from __future__ import annotations

import ctypes as C
import hashlib
import json
import random

import numpy as np

from testing.oracle import REPO

OUT = REPO / "tests" / "oracle" / "sampling"
MODEL = "smollm2-135m-instruct-q4_1.gguf"
REAL_PROMPTS = ["<|im_start|>user\nWrite a poem about the sea.<|im_end|>\n<|im_start|>assistant\n",
                "The capital of France is", "1, 2, 3, 4, 5,", "def fibonacci(n):"]


def synthetic_logits(kind: str, n: int, seed: int) -> np.ndarray:
    """deterministic float32 rows without numpy's RNG: an LCG; "ties" rounds to quarters (many equal logits),
    "wide" spreads over [-30, 30), "inf" masks every 7th to -inf"""
    x = seed * 2654435761 % 2**32
    vals = []
    for _ in range(n):
        x = (1103515245 * x + 12345) % 2**31
        vals.append(x)
    a = np.array(vals, dtype=np.float64) / 2**31
    if kind == "ties":
        out = np.round((a * 16 - 8) * 4) / 4
    elif kind == "wide":
        out = a * 60 - 30
    elif kind == "inf":
        out = a * 20 - 10
        out[::7] = -np.inf
    else:
        out = a * 20 - 10
    return out.astype(np.float32)


class TokenData(C.Structure):
    _fields_ = [("id", C.c_int32), ("logit", C.c_float), ("p", C.c_float)]


class TokenDataArray(C.Structure):
    _fields_ = [("data", C.POINTER(TokenData)), ("size", C.c_size_t), ("selected", C.c_int64),
                ("sorted", C.c_bool)]


class ChainParams(C.Structure):
    _fields_ = [("no_perf", C.c_bool)]


class LogitBias(C.Structure):
    _fields_ = [("token", C.c_int32), ("bias", C.c_float)]


def _setup(lib):
    P, I, F, U, S = C.c_void_p, C.c_int32, C.c_float, C.c_uint32, C.c_size_t
    sig = {
        "llama_sampler_chain_default_params": ([], ChainParams),
        "llama_sampler_chain_init": ([ChainParams], P),
        "llama_sampler_chain_add": ([P, P], None),
        "llama_sampler_apply": ([P, C.POINTER(TokenDataArray)], None),
        "llama_sampler_accept": ([P, I], None),
        "llama_sampler_reset": ([P], None),
        "llama_sampler_free": ([P], None),
        "llama_sampler_init_dist": ([U], P),
        "llama_sampler_init_top_k": ([I], P),
        "llama_sampler_init_top_p": ([F, S], P),
        "llama_sampler_init_min_p": ([F, S], P),
        "llama_sampler_init_typical": ([F, S], P),
        "llama_sampler_init_temp": ([F], P),
        "llama_sampler_init_temp_ext": ([F, F, F], P),
        "llama_sampler_init_xtc": ([F, F, S, U], P),
        "llama_sampler_init_top_n_sigma": ([F], P),
        "llama_sampler_init_mirostat": ([I, U, F, F, I], P),
        "llama_sampler_init_mirostat_v2": ([U, F, F], P),
        "llama_sampler_init_penalties": ([I, I, F, F, F], P),
        "llama_sampler_init_dry": ([P, F, F, I, I, C.POINTER(C.c_char_p), S], P),
        "llama_sampler_init_logit_bias": ([I, I, C.POINTER(LogitBias)], P),
        "llama_sampler_init_adaptive_p": ([F, F, U], P),
    }
    for name, (args, res) in sig.items():
        f = getattr(lib, name)
        f.argtypes = args
        f.restype = res


def build_oracle_chain(lib, vocab, n_vocab: int, steps: list):
    chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())
    for st in steps:
        name, a = st[0], st[1:]
        if name == "logit_bias":
            arr = (LogitBias * len(a[0]))(*[LogitBias(t, b) for t, b in a[0]])
            s = lib.llama_sampler_init_logit_bias(n_vocab, len(a[0]), arr)
        elif name == "penalties":
            s = lib.llama_sampler_init_penalties(n_vocab, *a)
        elif name == "dry":
            brk = (C.c_char_p * len(a[4]))(*[b.encode() for b in a[4]])
            s = lib.llama_sampler_init_dry(vocab, a[0], a[1], a[2], a[3], brk, len(a[4]))
        elif name == "mirostat":
            s = lib.llama_sampler_init_mirostat(n_vocab, *a)
        else:
            s = getattr(lib, "llama_sampler_init_" + name)(*a)
        lib.llama_sampler_chain_add(chain, s)
    return chain


def run_oracle(lib, vocab, n_vocab, case, row) -> list:
    chain = build_oracle_chain(lib, vocab, n_vocab, case["steps"])
    lib.llama_sampler_reset(chain)
    for t in case["history"]:
        lib.llama_sampler_accept(chain, t)
    out = []
    n = len(row)
    buf = (TokenData * n)()
    base = C.addressof(buf)
    fresh = np.zeros(n, dtype=[("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
    fresh["id"] = np.arange(n)
    fresh["logit"] = row
    for step in range(case["n_steps"]):
        C.memmove(buf, fresh.ctypes.data, n * 12)
        arr = TokenDataArray(C.cast(buf, C.POINTER(TokenData)), n, -1, False)
        lib.llama_sampler_apply(chain, C.byref(arr))
        addr = C.cast(arr.data, C.c_void_p).value
        off = (addr - base) // 12
        raw = C.string_at(addr, arr.size * 12)
        sel = int(arr.selected)
        tok = int(arr.data[sel].id) if 0 <= sel < arr.size else -1
        out.append({"selected": sel, "token": tok, "size": int(arr.size), "sorted": bool(arr.sorted),
                    "offset": off, "sha256": hashlib.sha256(raw).hexdigest()})
        lib.llama_sampler_accept(chain, tok if tok >= 0 else (step * 31) % n)
    lib.llama_sampler_free(chain)
    return out


def make_cases(n_vocab_real: int) -> list[dict]:
    r = random.Random(11192)
    inputs = []
    for kind in ("uniform", "ties", "wide", "inf"):
        for n in (2, 5, 40, 128, 129, 300, 1024, 1025, 4000, 49152):
            inputs.append({"kind": kind, "n": n, "seed": r.randrange(10**6)})
    for i in range(len(REAL_PROMPTS)):
        inputs.append({"kind": "real", "n": n_vocab_real, "prompt": i})

    def rand_step(n, allow_vocab):
        k = r.choice(["top_k", "top_p", "min_p", "typical", "temp", "temp_ext", "xtc", "top_n_sigma",
                      "penalties", "logit_bias"] + (["dry"] if allow_vocab else []))
        if k == "top_k":
            return ["top_k", r.choice([0, 1, 2, 5, 40, 100, 128, 129, 200, 1000, 5000, -3])]
        if k == "top_p":
            return ["top_p", r.choice([0.0, 0.1, 0.5, 0.9, 0.95, 0.999, 1.0]), r.choice([0, 0, 1, 3, 50])]
        if k == "min_p":
            return ["min_p", r.choice([0.0, 0.01, 0.05, 0.2, 0.9, 1.0]), r.choice([0, 0, 1, 3, 2000])]
        if k == "typical":
            return ["typical", r.choice([0.2, 0.5, 0.9, 0.99]), r.choice([0, 1, 3])]
        if k == "temp":
            return ["temp", r.choice([0.0, -1.0, 0.3, 0.8, 1.0, 1.7])]
        if k == "temp_ext":
            return ["temp_ext", r.choice([0.0, 0.5, 0.8, 1.2]), r.choice([0.0, 0.3, 0.7, 2.0]),
                    r.choice([0.5, 1.0, 2.0])]
        if k == "xtc":
            return ["xtc", r.choice([0.3, 0.7, 1.0]), r.choice([0.01, 0.05, 0.1, 0.3]), r.choice([0, 1, 2]),
                    r.randrange(2**32 - 1)]
        if k == "top_n_sigma":
            return ["top_n_sigma", r.choice([-1.0, 0.5, 1.0, 2.0, 3.0])]
        if k == "penalties":
            return ["penalties", r.choice([0, 5, 64, 200]), r.choice([1.0, 1.1, 1.5, 0.8]),
                    r.choice([0.0, 0.3, -0.2]), r.choice([0.0, 0.5, 1.0])]
        if k == "logit_bias":
            return ["logit_bias", [[r.randrange(n), r.choice([-1e30, -5.0, 2.5, 10.0, -0.125])]
                                   for _ in range(r.randrange(1, 6))]]
        return ["dry", r.choice([0.5, 0.8, 2.0]), r.choice([1.0, 1.5, 1.75, 3.0]), r.choice([0, 1, 2, 4]),
                r.choice([-1, 0, 16, 64]), r.choice([["\n", ":", "\"", "*"], ["\n"], ["the", ", "], []])]

    def final(n):
        f = r.choice(["dist", "dist", "dist", "mirostat", "mirostat_v2", "adaptive_p", "none"])
        if f == "dist":
            return [["dist", r.randrange(2**32 - 1)]]
        if f == "mirostat":
            return [["temp", r.choice([0.0, 0.5, 0.8, 1.0])],
                    ["mirostat", r.randrange(2**32 - 1), r.choice([3.0, 5.0, 8.0]), r.choice([0.1, 0.5]), 100]]
        if f == "mirostat_v2":
            return [["temp", r.choice([0.5, 0.8, 1.0])],
                    ["mirostat_v2", r.randrange(2**32 - 1), r.choice([3.0, 5.0, 8.0]), r.choice([0.1, 0.5])]]
        if f == "adaptive_p":
            return [["adaptive_p", r.choice([-1.0, 0.2, 0.5, 0.9]), r.choice([0.0, 0.5, 0.9]),
                     r.randrange(2**32 - 1)]]
        return []

    cases = []
    for i, inp in enumerate(inputs):
        n = inp["n"]
        for _ in range(9 if n >= 1000 else 5):
            steps = [rand_step(n, n == n_vocab_real) for _ in range(r.randrange(0, 5))] + final(n)
            if not steps:
                steps = [["dist", 1]]
            hist = [r.randrange(n) for _ in range(r.choice([0, 3, 20, 100]))]
            if r.random() < 0.3 and hist:
                hist = (hist[:5] * 20)[:60]     # repetitions for DRY and the penalties
            cases.append({"input": i, "steps": steps, "history": hist, "n_steps": r.choice([1, 3, 6])})
    return inputs, cases


def real_rows(L, tokenize) -> list[np.ndarray]:
    rows = []
    for text in REAL_PROMPTS:
        ids = tokenize(text)
        L.clear()
        L.decode(ids, 0)
        rows.append(L.logits(-1))
    return rows


def record_chain() -> None:
    from bankml.models.gguf import read_header_file
    from bankml.tokenizer import Tokenizer
    from testing.libllama import Llama
    from testing.oracle import model_path
    path = model_path(MODEL)
    tok = Tokenizer.from_gguf(read_header_file(path))
    with Llama(path, n_ctx=4096, n_threads=2) as L:
        _setup(L.lib)
        n_vocab = L.n_vocab
        inputs, cases = make_cases(n_vocab)
        reals = real_rows(L, lambda t: tok.tokenize(t, add_special=False, parse_special=True))
        for inp in inputs:
            if inp["kind"] == "real":
                row = reals[inp["prompt"]]
                inp["sha256"] = hashlib.sha256(row.tobytes()).hexdigest()
                inp["tokens"] = tok.tokenize(REAL_PROMPTS[inp["prompt"]], add_special=False, parse_special=True)
        for case in cases:
            inp = inputs[case["input"]]
            row = reals[inp["prompt"]] if inp["kind"] == "real" else synthetic_logits(inp["kind"], inp["n"],
                                                                                       inp["seed"])
            case["out"] = run_oracle(L.lib, C.c_void_p(L.vocab), n_vocab, case, row)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "chain.json").write_text(json.dumps({"model": MODEL, "inputs": inputs, "cases": cases}, indent=0) + "\n")
    print(f"chain: {len(cases)} cases, {sum(len(c['out']) for c in cases)} steps")
