"""The sampler's cost per token against the forward pass's decode step (SmolLM2-135M Q4_1, one token at about
200 cached positions), for llama-server's default chain and a few others:

    PYTHONPATH=. python -m pytest tests/bench/test_bench_sampling.py --benchmark-only

Each sampler entry is one sample() + accept() on a real logits row (49,152 candidates), as the server runs it
per generated token; probabilities entries add n_probs 10 (pre- and post-sampling).
"""

from __future__ import annotations

import numpy as np
import pytest

import bankml.sampling as sampling

CHAINS = {
    "default": {},
    "greedy": {"temperature": 0},
    "top_k0_top_p": {"top_k": 0, "top_p": 0.9},
    "penalties_dry": {"repeat_penalty": 1.2, "dry_multiplier": 0.8},
    "mirostat2": {"mirostat": 2},
    "typical_xtc": {"typical_p": 0.9, "xtc_probability": 0.5},
}


@pytest.fixture(scope="module")
def parts(smollm2_path):
    import bankml.engine
    import bankml.tokenizer
    from bankml.models.gguf import read_header_file
    header = read_header_file(smollm2_path)
    tok = bankml.tokenizer.Tokenizer.from_gguf(header)
    model = bankml.engine.Model.open(smollm2_path, n_ctx=4096, oracle_threads=2)
    prompt = tok.tokenize("Once upon a time, " * 40, add_special=True, parse_special=True)[:200]
    model.decode(prompt, 0)
    logits = np.array(model.logits(), dtype=np.float32)
    defaults = sampling.Defaults.from_gguf(header, tok.n_vocab, tok.eog_ids)
    return tok, model, defaults, prompt, logits


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CHAINS))
def test_bench_sample(benchmark, parts, name):
    tok, _, defaults, prompt, logits = parts
    params = sampling.from_request(dict(CHAINS[name], seed=1), defaults, tok)
    s = sampling.Sampler(params, tok)
    s.begin(prompt)

    def step():
        t = s.sample(logits)
        s.accept(t)
    benchmark.group = "sampling"
    benchmark(step)


@pytest.mark.slow
@pytest.mark.parametrize("post", [False, True])
def test_bench_probs(benchmark, parts, post):
    tok, _, defaults, prompt, logits = parts
    params = sampling.from_request({"seed": 1, "n_probs": 10, "post_sampling_probs": post}, defaults, tok)
    s = sampling.Sampler(params, tok)
    s.begin(prompt)

    def step():
        t = s.sample(logits)
        s.accept(t)
        return s.post_sampling(10, t) if post else sampling.probs.pre_sampling(logits, 10, t)
    benchmark.group = "sampling"
    benchmark(step)


@pytest.mark.slow
def test_bench_decode_step(benchmark, parts):
    _, model, _, prompt, _ = parts
    pos = len(prompt)

    def step():
        model.truncate(pos)
        model.decode([28], pos)
    benchmark.group = "sampling"
    benchmark(step)
