"""Replay the recorded constrained requests (tests/oracle/grammar/server_e2e.json) with the oracle's logits and
sampler chain (libllama through ctypes) but bankml's grammar: request resolution, chat response format,
grammar engine, prefill, and llama-server's grammar sampling flow (common_sampler_sample: the whole chain
first, the drawn token checked, on rejection the grammar applied to fresh logits and the chain run again
with the same generator; accept: grammar, then the chain). Every token id and content string must match.

    python -m testing.verify_grammar_e2e [--only ID] [--file server_lazy.json]

Developer tool (needs the oracle build); the suite's replay on bankml's own forward pass and sampler is
tests/pending/replay_grammar_e2e.py.
"""

from __future__ import annotations

import ctypes as C
import json
import sys

import numpy as np

from bankml.grammar import GrammarVocab, chat as chat_mod
from bankml.grammar import request as req
from testing.grammar_oracle import _TokenData, _TokenDataArray
from testing.libllama import Llama
from testing.oracle import REPO, model_path

GEN_PROMPT_CHATML = "<|im_start|>assistant\n"


class Chain:
    """common_sampler_init's chain for the request's sampling fields (defaults of llama-server)."""

    def __init__(self, L: Llama, body: dict):
        lib = self.lib = L.lib
        P = C.c_void_p
        lib.llama_sampler_chain_default_params.restype = C.c_bool  # struct of one bool
        lib.llama_sampler_chain_init.argtypes = [C.c_bool]
        lib.llama_sampler_chain_init.restype = P
        lib.llama_sampler_chain_add.argtypes = [P, P]
        for name, args in (("llama_sampler_init_penalties", [C.c_int32, C.c_int32, C.c_float, C.c_float, C.c_float]),
                           ("llama_sampler_init_dry", [P, C.c_float, C.c_float, C.c_int32, C.c_int32,
                                                       C.POINTER(C.c_char_p), C.c_size_t]),
                           ("llama_sampler_init_top_n_sigma", [C.c_float]),
                           ("llama_sampler_init_top_k", [C.c_int32]),
                           ("llama_sampler_init_typical", [C.c_float, C.c_size_t]),
                           ("llama_sampler_init_top_p", [C.c_float, C.c_size_t]),
                           ("llama_sampler_init_min_p", [C.c_float, C.c_size_t]),
                           ("llama_sampler_init_xtc", [C.c_float, C.c_float, C.c_size_t, C.c_uint32]),
                           ("llama_sampler_init_temp_ext", [C.c_float, C.c_float, C.c_float]),
                           ("llama_sampler_init_dist", [C.c_uint32])):
            getattr(lib, name).argtypes = args
            getattr(lib, name).restype = P
        lib.llama_sampler_apply.argtypes = [P, C.POINTER(_TokenDataArray)]
        lib.llama_sampler_accept.argtypes = [P, C.c_int32]
        lib.llama_sampler_free.argtypes = [P]
        seed = int(body.get("seed", 0xFFFFFFFF)) & 0xFFFFFFFF
        temp = float(body.get("temperature", 0.8))
        ch = lib.llama_sampler_chain_init(True)
        add = lambda s: lib.llama_sampler_chain_add(ch, s)  # noqa: E731
        add(lib.llama_sampler_init_penalties(L.n_vocab, 64, 1.0, 0.0, 0.0))
        breakers = (C.c_char_p * 4)(b"\n", b":", b"\"", b"*")
        add(lib.llama_sampler_init_dry(C.c_void_p(L.vocab), 0.0, 1.75, 2, 64, breakers, 4))
        add(lib.llama_sampler_init_top_n_sigma(-1.0))
        add(lib.llama_sampler_init_top_k(40))
        add(lib.llama_sampler_init_typical(1.0, 0))
        add(lib.llama_sampler_init_top_p(0.95, 0))
        add(lib.llama_sampler_init_min_p(0.05, 0))
        add(lib.llama_sampler_init_xtc(0.0, 0.1, 0, seed))
        add(lib.llama_sampler_init_temp_ext(temp, 0.0, 1.0))
        add(lib.llama_sampler_init_dist(seed))
        self.h = ch

    def run(self, cand: np.ndarray) -> int:
        """apply the chain to a candidate array (structured: id, logit, p); the selected token"""
        arr = _TokenDataArray(cand.ctypes.data_as(C.POINTER(_TokenData)), len(cand), -1, False)
        self.lib.llama_sampler_apply(C.c_void_p(self.h), C.byref(arr))
        return int(cand["id"][arr.selected])

    def accept(self, t: int) -> None:
        self.lib.llama_sampler_accept(C.c_void_p(self.h), int(t))

    def free(self):
        self.lib.llama_sampler_free(C.c_void_p(self.h))


def candidates(logits: np.ndarray) -> np.ndarray:
    cand = np.zeros(len(logits), dtype=[("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
    cand["id"] = np.arange(len(logits), dtype=np.int32)
    cand["logit"] = logits
    return cand


def sample(chain: Chain, grammar, logits: np.ndarray) -> int:
    """common_sampler_sample with grammar_first = false"""
    tok = chain.run(candidates(logits))
    if grammar is None or grammar.allowed(tok):
        return tok
    cand = candidates(logits)
    grammar.apply(cand["id"], cand["logit"])
    return chain.run(cand)


def tokenize(L: Llama, text: str, add_special: bool, parse_special: bool) -> list[int]:
    lib = L.lib
    lib.llama_tokenize.argtypes = [C.c_void_p, C.c_char_p, C.c_int32, C.POINTER(C.c_int32), C.c_int32, C.c_bool,
                                   C.c_bool]
    raw = text.encode()
    buf = (C.c_int32 * (len(raw) + 8))()
    n = lib.llama_tokenize(C.c_void_p(L.vocab), raw, len(raw), buf, len(raw) + 8, add_special, parse_special)
    return list(buf[:n])


def resolve(rec: dict, vocab: GrammarVocab, L: Llama):
    """(grammar spec, chat response format or None, prefill tokens) for a recorded request"""
    body = rec["request"]
    if rec["endpoint"] == "/completion":
        spec = req.completion_grammar_fields(body, lambda text: tokenize(L, text, False, True))
        gp = body.get("generation_prompt", "")
        fmt = None
    else:
        schema = req.chat_json_schema(body)
        gp = GEN_PROMPT_CHATML
        fmt = req.chat_response_format(schema, gp)
        spec = req.completion_grammar(req.chat_llama_params(body, fmt))
    prefill = req.prefill_tokens(gp, tokenize(L, gp, False, True), lambda t: vocab.pieces[t]) if gp else []
    return spec, fmt, prefill


def replay(rec: dict, L: Llama, vocab: GrammarVocab) -> tuple[bool, str]:
    body, resp = rec["request"], rec["response"]
    if rec["endpoint"] == "/completion":
        want_tokens, want_content = resp["tokens"], resp["content"]
        n_predict = body.get("n_predict", -1)
        cache_n = resp["timings"]["cache_n"]
    else:
        want_tokens = resp["__verbose"]["tokens"]
        want_content = resp["choices"][0]["message"]["content"]
        n_predict = body.get("max_tokens", -1)
        cache_n = resp["usage"]["prompt_tokens_details"]["cached_tokens"]
    spec, fmt, prefill = resolve(rec, vocab, L)
    grammar = req.sampler_grammar(spec, vocab, prefill)
    prompt = rec["prompt_tokens"]
    chain = Chain(L, body)
    for t in prompt:
        chain.accept(t)
    L.clear()
    if cache_n:
        L.decode(prompt[:cache_n], 0)
    L.decode(prompt[cache_n:], cache_n)
    out: list[int] = []
    pos = len(prompt)
    while True:
        tok = sample(chain, grammar, L.logits(-1))
        if grammar is not None:
            grammar.accept(tok)
        chain.accept(tok)
        out.append(tok)
        if tok in vocab.eog_ids or len(out) >= n_predict:
            break
        L.decode([tok], pos)
        pos += 1
    chain.free()
    text = b"".join(vocab.pieces[t] for t in out if t not in vocab.eog_ids).decode("utf-8", "replace")
    content = text
    if fmt is not None:
        parsed = fmt.content(text)
        content = text if parsed is None else parsed
    ok = out == want_tokens and content == want_content
    return ok, f"tokens {out[:12]}... vs {want_tokens[:12]}..., content {content[:60]!r} vs {want_content[:60]!r}"


def main(argv: list[str]) -> int:
    only = argv[argv.index("--only") + 1] if "--only" in argv else None
    name = argv[argv.index("--file") + 1] if "--file" in argv else "server_e2e.json"
    recs = json.loads((REPO / "tests" / "oracle" / "grammar" / name).read_text(encoding="utf-8"))
    vocab = GrammarVocab.from_gguf_file(model_path("smollm2"))
    n_ok = n_bad = 0
    with Llama(model_path("smollm2"), n_ctx=4096, n_threads=2) as L:
        for rec in recs["records"]:
            if only and rec["id"] != only:
                continue
            if rec["status"] != 200:
                continue
            ok, info = replay(rec, L, vocab)
            n_ok += ok
            n_bad += not ok
            print(("ok  " if ok else "FAIL"), rec["id"], "" if ok else info, flush=True)
    print(f"{n_ok} identical, {n_bad} different")
    return 0 if n_bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
