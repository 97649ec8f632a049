"""Seeded generations from llama-server b11192 over sampler variants, recorded into
tests/oracle/sampling/e2e_<model>.json (python -m testing.record_sampling e2e). Developer tool.

Each record: the /completion body (the prompt text, `return_tokens`, `cache_prompt: false`, 64 new tokens, a
fixed seed, the variant's fields), the prompt's token ids (/tokenize with add_special and parse_special, as
the server tokenizes a /completion prompt), and the answer: generated ids, content, stop type and, with
n_probs, completion_probabilities (streams: the chunks' tokens and probabilities, concatenated).

The server runs with `-t 1`: on the shared 2-core machine `-t 2` spent most of its time in thread barriers
(about one token a second); the replay opens bankml's Model with the record's thread count (oracle_threads).
"""

from __future__ import annotations

import json

from testing.oracle import REPO, LlamaServer, model_path

OUT = REPO / "tests" / "oracle" / "sampling"
ARGS = ["-t", "1", "-c", "4096", "-np", "1", "--jinja", "--reasoning", "off", "--no-webui"]
N_PREDICT = 64

PROMPTS = [
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWrite a short story about a robot who learns to paint.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nList five fruits and one fact about each.<|im_end|>\n<|im_start|>assistant\n",
    "Once upon a time, in a small village by the sea,",
    "def quicksort(arr):\n",
]

VARIANTS: list[dict] = [
    {},
    {"temperature": 0},
    {"temperature": 0.5},
    {"temperature": 1.0},
    {"temperature": 1.6},
    {"top_k": 1},
    {"top_k": 5, "temperature": 1.2},
    {"top_k": 0, "top_p": 0.9},
    {"top_k": 200, "temperature": 1.3},
    {"top_k": 0, "top_p": 1.0, "min_p": 0.0, "temperature": 1.0},
    {"top_p": 0.5},
    {"min_p": 0.0},
    {"min_p": 0.2, "temperature": 1.5},
    {"typical_p": 0.5},
    {"typical_p": 0.9, "top_k": 0, "temperature": 1.1},
    {"top_n_sigma": 1.0},
    {"top_n_sigma": 2.0, "top_k": 0, "temperature": 1.2},
    {"xtc_probability": 0.5, "xtc_threshold": 0.1},
    {"xtc_probability": 1.0, "xtc_threshold": 0.05, "min_keep": 2},
    {"repeat_penalty": 1.3},
    {"frequency_penalty": 0.5, "presence_penalty": 0.7},
    {"repeat_penalty": 1.2, "frequency_penalty": 0.3, "presence_penalty": 0.3, "repeat_last_n": 16},
    {"repeat_penalty": 1.5, "repeat_last_n": 0},
    {"dry_multiplier": 0.8},
    {"dry_multiplier": 1.5, "dry_base": 1.5, "dry_allowed_length": 1, "dry_penalty_last_n": 32},
    {"dry_multiplier": 0.8, "dry_sequence_breakers": ["\n", ".", " the"], "temperature": 1.2},
    {"dynatemp_range": 0.5},
    {"dynatemp_range": 1.0, "dynatemp_exponent": 2.0, "top_k": 0},
    {"mirostat": 1},
    {"mirostat": 2, "mirostat_tau": 3.0, "mirostat_eta": 0.2},
    {"mirostat": 2, "temperature": 0.7},
    {"mirostat": 1, "mirostat_tau": 8.0, "temperature": 1.2},
    {"samplers": "kt"},
    {"samplers": ["top_p", "temperature"], "top_p": 0.8},
    {"samplers": "tkpm"},
    {"samplers": []},
    {"samplers": ["penalties", "temperature", "top_k"], "repeat_penalty": 1.3},
    {"samplers": ["dry", "top_k", "xtc", "temperature"], "dry_multiplier": 1.0, "xtc_probability": 0.7},
    {"min_keep": 5, "top_p": 0.1, "temperature": 1.4},
    {"ignore_eos": True},
    {"logit_bias": [[11, False], [30, -2.5], [28, 3.0]]},
    {"logit_bias": {" the": -5, "The": 2}},
    {"samplers": ["top_k", "adaptive_p"], "adaptive_target": 0.5},
    {"samplers": ["top_k", "min_p", "adaptive_p"], "adaptive_target": 0.2, "adaptive_decay": 0.5},
    {"samplers": ["top_k", "adaptive_p"], "adaptive_target": -1},
    {"temperature": 5.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0},
    {"top_p": 0.0},
    {"min_p": 1.0},
    {"temperature": 0.9, "top_k": 30, "top_p": 0.85, "min_p": 0.02, "typical_p": 0.95, "repeat_penalty": 1.1,
     "frequency_penalty": 0.1, "presence_penalty": 0.1, "dry_multiplier": 0.5, "xtc_probability": 0.3,
     "xtc_threshold": 0.15, "top_n_sigma": 2.5, "dynatemp_range": 0.2},
]

# probabilities: (variant index, n_probs, post_sampling_probs, stream)
PROB_VARIANTS = [
    ({"temperature": 0}, 5, False, False),
    ({"temperature": 0}, 3, True, False),
    ({}, 5, False, False),
    ({}, 4, True, False),
    ({"top_k": 0, "top_p": 1.0, "min_p": 0.0, "temperature": 1.0}, 10, True, False),
    ({"temperature": 0}, 2, False, True),
    ({}, 3, False, True),
    ({}, 3, True, True),
    ({"mirostat": 2}, 5, True, False),
    ({"xtc_probability": 1.0, "xtc_threshold": 0.05}, 6, True, False),
]


def _tokens(srv, prompt: str) -> list[int]:
    status, _, raw = srv.post("/tokenize", {"content": prompt, "add_special": True, "parse_special": True})
    assert status == 200
    return json.loads(raw)["tokens"]


def _run(srv, body: dict) -> dict:
    status, _, raw = srv.post("/completion", body, timeout=300)
    if not body.get("stream"):
        resp = json.loads(raw)
        if status != 200:
            return {"status": status, "error": resp}
        out = {"status": status, "tokens": resp["tokens"], "content": resp["content"],
               "stop_type": resp["stop_type"], "tokens_predicted": resp["tokens_predicted"]}
        if "completion_probabilities" in resp:
            out["probs"] = resp["completion_probabilities"]
        return out
    toks, content, probs, stop_type = [], "", [], None
    for line in raw.decode("utf-8").split("\n"):
        if not line.startswith("data: "):
            continue
        ev = json.loads(line[6:])
        toks += ev.get("tokens", [])
        content += ev.get("content", "")
        probs += ev.get("completion_probabilities", [])
        if ev.get("stop"):
            stop_type = ev.get("stop_type")
    return {"status": status, "tokens": toks, "content": content, "stop_type": stop_type, "probs": probs}


def record_model(model: str, variants: list[dict], seeds: list[int], port: int, n_prompts: int = 4) -> None:
    recs = []
    out_path = OUT / f"e2e_{model.replace('.gguf', '')}.json"
    with LlamaServer(model_path(model), port=port, base_args=ARGS) as srv:
        ptoks = [_tokens(srv, p) for p in PROMPTS]
        jobs = []
        for qi, (v, n, post, stream) in enumerate(PROB_VARIANTS):
            for pi in range(n_prompts):
                jobs.append((f"probs{qi}-p{pi}", v, pi, seeds[(qi * 3 + pi) % len(seeds)], (n, post, stream)))
        for vi, v in enumerate(variants):
            for pi in range(n_prompts):
                jobs.append((f"v{vi}-p{pi}", v, pi, seeds[(vi + pi) % len(seeds)], None))
        for name, v, pi, seed, probs in jobs:
            body = {"prompt": PROMPTS[pi], "n_predict": N_PREDICT, "cache_prompt": False, "return_tokens": True,
                    "seed": seed}
            body.update(v)
            if probs is not None:
                body.update(n_probs=probs[0], post_sampling_probs=probs[1], stream=probs[2])
            out = _run(srv, body)
            recs.append({"id": name, "body": body, "prompt": pi, "response": out})
            print(model, name, out.get("tokens_predicted", len(out.get("tokens", []))), flush=True)
            if len(recs) % 10 == 0 or len(recs) == len(jobs):   # partial files survive an interruption
                out_path.write_text(
                    json.dumps({"model": model, "server_args": ARGS, "prompts": PROMPTS, "prompt_tokens": ptoks,
                                "records": recs}, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")


def record_e2e() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    record_model("smollm2-135m-instruct-q4_1.gguf", VARIANTS, [42, 7, 123456, 4000000000], 8194)
    record_model("smollm2-135m-instruct-q8_0.gguf", VARIANTS[::2], [99, 5, 31337], 8195, n_prompts=2)
