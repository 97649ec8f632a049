"""Backend sampling (`--backend-sampling`, `backend_sampling`): seeded /completion generations recorded from
llama-server b11192 started with --backend-sampling (tests/oracle/sampling/backend_*.json,
testing/record_sampling_backend.py) replayed on bankml's engine and bankml.sampling.backend: every generated
token and every post-sampling probability identical; what bankml refuses (501) names the part it does not
reproduce."""

from __future__ import annotations

import json

import pytest

import bankml.sampling as sampling
from bankml.sampling.params import props_json
from sampling_replay import assert_same, generate

REC = "backend_smollm2-135m-instruct-q4_1.json"


def _load(oracle_dir):
    return json.loads((oracle_dir / "sampling" / REC).read_text(encoding="utf-8"))


def _defaults(header, tok):
    return sampling.Defaults.from_gguf(header, tok.n_vocab, tok.eog_ids, backend_sampling=True)


@pytest.mark.oracle
def test_backend_props(smollm2_path, oracle_dir):
    import bankml.tokenizer
    from bankml.gguf import read_header_file
    rec = _load(oracle_dir)
    header = read_header_file(smollm2_path)
    tok = bankml.tokenizer.Tokenizer.from_gguf(header)
    got = props_json(_defaults(header, tok), rec["props"]["n_ctx"])
    assert got["params"]["backend_sampling"] is True
    assert got == rec["props"]


@pytest.mark.slow
@pytest.mark.oracle
def test_backend_replay(smollm2_path, oracle_dir):
    import bankml.engine
    import bankml.tokenizer
    from bankml.gguf import read_header_file
    from bankml.sampling.params import RequestError
    from bankml.sampling.sampler import Sampler
    rec = _load(oracle_dir)
    header = read_header_file(smollm2_path)
    tok = bankml.tokenizer.Tokenizer.from_gguf(header)
    args = rec["server_args"]
    model = bankml.engine.Model.open(smollm2_path, n_ctx=4096, oracle_threads=int(args[args.index("-t") + 1]),
                                     n_threads=1)
    defaults = _defaults(header, tok)
    n = n_probs = n_graph = 0
    refused = []
    for r in rec["records"]:
        body, resp = r["body"], r["response"]
        assert resp["status"] == 200, r["id"]
        prompt = rec["prompt_tokens"][r["prompt"]]
        params = sampling.from_request(body, defaults, tok)
        try:
            smp = Sampler(params, tok)
        except RequestError as e:
            assert e.status == 501 and "with backend sampling" in e.message, (r["id"], e.message)
            refused.append(r["id"])
            continue
        n_graph += smp.backend is not None
        out, probs = generate(model, tok, params, prompt, sampler=smp)
        n_probs += assert_same(tok, params, out, probs, resp, r["id"])
        n += 1
    print(f"backend replay: {n} identical ({n_probs} with probabilities, {n_graph} through the graph), "
          f"refused {len(refused)}: {refused}")
    assert n >= 60 and n_probs >= 40 and n_graph >= 50 and len(refused) <= 8
