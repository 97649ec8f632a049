"""Seeded /completion generations recorded from llama-server b11192 (tests/oracle/sampling/e2e_*.json,
testing/record_sampling_e2e.py) replayed on bankml's tokenizer, forward pass, request parameters and sampler
chain: every generated token and every probability (n_probs, pre- and post-sampling) identical."""

from __future__ import annotations

import json

import pytest

import bankml.sampling as sampling
from sampling_replay import assert_same, generate


def _replay(path, oracle_dir, name):
    import bankml.engine
    import bankml.tokenizer
    from bankml.models.gguf import read_header_file
    rec = json.loads((oracle_dir / "sampling" / name).read_text(encoding="utf-8"))
    header = read_header_file(path)
    tok = bankml.tokenizer.Tokenizer.from_gguf(header)
    args = rec["server_args"]
    # one thread of bankml's own: the bits do not depend on it, and a loaded machine runs it faster
    model = bankml.engine.Model.open(path, n_ctx=4096, oracle_threads=int(args[args.index("-t") + 1]), n_threads=1)
    defaults = sampling.Defaults.from_gguf(header, tok.n_vocab, tok.eog_ids)
    n = n_probs = 0
    for r in rec["records"]:
        body, resp = r["body"], r["response"]
        prompt = rec["prompt_tokens"][r["prompt"]]
        assert tok.tokenize(rec["prompts"][r["prompt"]], add_special=True, parse_special=True) == prompt
        params = sampling.from_request(body, defaults, tok)
        out, probs = generate(model, tok, params, prompt)
        n_probs += assert_same(tok, params, out, probs, resp, r["id"])
        n += 1
    return n, n_probs


@pytest.mark.slow
@pytest.mark.oracle
def test_e2e_q4_1(smollm2_path, oracle_dir):
    n, n_probs = _replay(smollm2_path, oracle_dir, "e2e_smollm2-135m-instruct-q4_1.json")
    assert n >= 236 and n_probs >= 40


@pytest.mark.slow
@pytest.mark.oracle
def test_e2e_q8_0(smollm2_q8_0_path, oracle_dir):
    n, n_probs = _replay(smollm2_q8_0_path, oracle_dir, "e2e_smollm2-135m-instruct-q8_0.json")
    assert n >= 70 and n_probs >= 20
