"""Seeded generations from llama-server b11192 started with `--backend-sampling`, recorded into
tests/oracle/sampling/backend_<model>.json (python -m testing.record_sampling backend). Developer tool.

Each record is record_sampling_e2e's (body, prompt index, answer) with `backend_sampling` true, false or absent
(absent: the server's default, true under `--backend-sampling`), over the samplers that run in the sampling
graph (top-k, top-p, min-p, temperature, dist, logit bias), chains whose tail falls back to the CPU samplers
(typical, XTC, top-n-sigma, mirostat after the graph's temperature), and the cases where the server does not
use the graph (pre-sampling probabilities, a grammar). Also /props' default_generation_settings.
"""

from __future__ import annotations

import json

from testing.oracle import LlamaServer, model_path
from testing.record_sampling_e2e import ARGS as E2E_ARGS, OUT, PROMPTS, _run, _tokens

ARGS = E2E_ARGS + ["--backend-sampling"]
N_PREDICT = 32

SUITE_PROMPT = "The countries of Europe, in random order, are:"
PROMPTS_BS = PROMPTS + [SUITE_PROMPT]

# (variant, n_probs, post_sampling_probs)
VARIANTS: list[tuple[dict, int, bool]] = [
    ({}, 0, False),
    ({}, 10, True),
    ({"temperature": 0}, 5, True),
    ({"temperature": 0.5}, 0, False),
    ({"temperature": 1.5}, 8, True),
    ({"top_k": 1}, 3, True),
    ({"top_k": 5, "temperature": 1.2}, 5, True),
    ({"top_k": 0, "top_p": 0.9}, 6, True),
    ({"top_k": 200, "temperature": 1.3}, 0, False),
    ({"top_k": 0, "top_p": 1.0, "min_p": 0.0, "temperature": 1.0}, 10, True),
    ({"top_p": 0.5}, 4, True),
    ({"top_p": 1.0}, 0, False),
    ({"min_p": 0.0}, 5, True),
    ({"min_p": 0.2, "temperature": 1.5}, 5, True),
    ({"min_keep": 5, "top_p": 0.1, "temperature": 1.4}, 5, True),
    ({"samplers": "kt"}, 5, True),
    ({"samplers": ["top_p", "temperature"], "top_p": 0.8}, 0, False),
    ({"samplers": "tkpm"}, 5, True),
    ({"samplers": []}, 3, True),
    ({"logit_bias": [[11, False], [30, -2.5], [28, 3.0]]}, 4, True),
    ({"ignore_eos": True}, 0, False),
    ({"typical_p": 0.5}, 4, True),
    ({"xtc_probability": 0.5, "xtc_threshold": 0.1}, 4, True),
    ({"top_n_sigma": 1.0}, 4, True),
    ({"mirostat": 2, "mirostat_tau": 3.0, "mirostat_eta": 0.2}, 4, True),
    ({"mirostat": 1}, 0, False),
    ({"samplers": ["top_k", "adaptive_p"], "adaptive_target": 0.5}, 0, False),
    ({"dynatemp_range": 0.5}, 0, False),
    ({"repeat_penalty": 1.3}, 0, False),
    ({"frequency_penalty": 0.5, "presence_penalty": 0.7}, 0, False),
    ({"dry_multiplier": 0.8}, 0, False),
    ({}, 5, False),                                   # pre-sampling probabilities: the CPU chain
    ({"grammar": 'root ::= [a-z ,]+ "."'}, 3, True),   # a grammar: the CPU chain
    ({"repeat_penalty": 1.3}, 5, True),
    ({"frequency_penalty": 0.5, "presence_penalty": 0.7, "repeat_penalty": 1.1}, 5, True),
    ({"samplers": ["top_k", "penalties", "temperature"], "repeat_penalty": 1.3, "frequency_penalty": 0.2}, 5, True),
    ({"repeat_penalty": 1.2, "repeat_last_n": 4}, 5, True),
    ({"repeat_penalty": 1.2, "presence_penalty": -0.3, "repeat_last_n": -1}, 4, True),
    ({"dynatemp_range": 0.5}, 5, True),
    ({"dynatemp_range": 1.0, "dynatemp_exponent": 2.0, "top_k": 0}, 5, True),
    ({"dynatemp_range": 0.3, "temperature": 1.0, "dynatemp_exponent": 0.5}, 5, True),
    ({"samplers": ["temperature", "top_k", "top_p"], "dynatemp_range": 0.4, "top_p": 0.7}, 5, True),
    ({"logit_bias": [[11, -1.5], [11, 2.0]]}, 0, False),   # a token twice: bankml refuses (set_rows races)
    ({"ignore_eos": True, "logit_bias": [[28, 2.0], [30, -1.0]]}, 5, True),
    ({"top_k": 3, "top_p": 0.3, "min_p": 0.3, "temperature": 2.0}, 3, True),
    ({"mirostat": 2, "temperature": 0.5}, 4, True),
]
# generation_settings of a one-token request (backend_sampling as the slot's task reports it)
SETTINGS = [{}, {"backend_sampling": False}, {"backend_sampling": True, "grammar": 'root ::= "a"'},
            {"backend_sampling": True, "n_probs": 3}, {"grammar": 'root ::= "a"'}]
SEEDS = [4242, 42, 7, 123456]


def record_backend_all() -> None:
    record_backend("smollm2-135m-instruct-q4_1.gguf", 9551)
    record_backend("smollm2-135m-instruct-q8_0.gguf", 9553, every=3)


def record_backend(model: str = "smollm2-135m-instruct-q4_1.gguf", port: int = 9551, every: int = 1) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    out_path = OUT / f"backend_{model.replace('.gguf', '')}.json"
    recs: list[dict] = []
    with LlamaServer(model_path(model), port=port, base_args=ARGS) as srv:
        ptoks = [_tokens(srv, p) for p in PROMPTS_BS]
        status, _, raw = srv.get("/props")
        props = json.loads(raw)["default_generation_settings"] if status == 200 else {"status": status}
        jobs = []
        # the llama.cpp server suite's case first: true and false, seed 4242, 20 tokens, 10 post-sampling probs
        for bs in (True, False):
            jobs.append((f"suite-{bs}", {"backend_sampling": bs}, 4, 4242, 10, True, 20))
        for vi, (v, n, post) in enumerate(VARIANTS):
            if vi % every:
                continue
            for pi in (0, 2, 4) if vi < 2 else (vi % 4, 4):
                seed = SEEDS[(vi + pi) % len(SEEDS)]
                jobs.append((f"v{vi}-p{pi}", dict(v, backend_sampling=True), pi, seed, n, post, N_PREDICT))
        for vi in (0, 1, 4, 9):   # the field absent (the flag's default) and false
            v, n, post = VARIANTS[vi]
            jobs.append((f"v{vi}-default", dict(v), 1, 99, n, post, N_PREDICT))
            jobs.append((f"v{vi}-false", dict(v, backend_sampling=False), 1, 99, n, post, N_PREDICT))
        jobs.append(("stream-post", {"backend_sampling": True, "stream": True}, 3, 5, 3, True, N_PREDICT))
        jobs.append(("stream", {"backend_sampling": True, "stream": True}, 0, 11, 0, False, N_PREDICT))
        settings = []
        for body in SETTINGS:
            sent = dict(body, prompt="Hi", n_predict=1, cache_prompt=False, seed=1)
            status, _, raw = srv.post("/completion", sent, timeout=60)
            settings.append({"body": sent, "status": status,
                             "generation_settings": json.loads(raw).get("generation_settings")})
        for name, v, pi, seed, n, post, n_predict in jobs:
            body = {"prompt": PROMPTS_BS[pi], "n_predict": n_predict, "cache_prompt": False, "return_tokens": True,
                    "seed": seed}
            body.update(v)
            if n:
                body.update(n_probs=n, post_sampling_probs=post)
            out = _run(srv, body)
            recs.append({"id": name, "body": body, "prompt": pi, "response": out})
            print(model, name, out.get("tokens_predicted", len(out.get("tokens", []))), flush=True)
            if len(recs) % 10 == 0 or len(recs) == len(jobs):
                out_path.write_text(
                    json.dumps({"model": model, "server_args": ARGS, "prompts": PROMPTS_BS, "prompt_tokens": ptoks,
                                "props": props, "settings": settings, "records": recs}, ensure_ascii=False, indent=0) + "\n",
                    encoding="utf-8")
