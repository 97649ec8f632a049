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

def _load(oracle_dir, quant="q4_1"):
    name = f"backend_smollm2-135m-instruct-{quant}.json"
    return json.loads((oracle_dir / "sampling" / name).read_text(encoding="utf-8"))


def _defaults(header, tok):
    return sampling.Defaults.from_gguf(header, tok.n_vocab, tok.eog_ids, backend_sampling=True)


@pytest.mark.oracle
def test_backend_props(smollm2_path, oracle_dir):
    import bankml.tokenizer
    from bankml.models.gguf import read_header_file
    rec = _load(oracle_dir)
    header = read_header_file(smollm2_path)
    tok = bankml.tokenizer.Tokenizer.from_gguf(header)
    got = props_json(_defaults(header, tok), rec["props"]["n_ctx"])
    assert got["params"]["backend_sampling"] is True
    assert got == rec["props"]


@pytest.mark.oracle
def test_backend_generation_settings(smollm2_path, oracle_dir):
    """generation_settings' backend_sampling: the flag's default, the request's value, false with a grammar"""
    import bankml.tokenizer
    from bankml.models.gguf import read_header_file
    from bankml.sampling.sampler import Sampler
    rec = _load(oracle_dir)
    header = read_header_file(smollm2_path)
    tok = bankml.tokenizer.Tokenizer.from_gguf(header)
    defaults = _defaults(header, tok)
    for r in rec["settings"]:
        p = sampling.from_request(r["body"], defaults, tok)
        Sampler(p, tok)
        assert r["status"] == 200 and p.to_json() == r["generation_settings"], r["body"]
    assert len(rec["settings"]) >= 5


def _replay(path, rec):
    import bankml.engine
    import bankml.tokenizer
    from bankml.models.gguf import read_header_file
    from bankml.sampling.params import RequestError
    from bankml.sampling.sampler import Sampler
    header = read_header_file(path)
    tok = bankml.tokenizer.Tokenizer.from_gguf(header)
    args = rec["server_args"]
    model = bankml.engine.Model.open(path, n_ctx=4096, oracle_threads=int(args[args.index("-t") + 1]),
                                     n_threads=1)
    defaults = _defaults(header, tok)
    n = n_probs = n_graph = n_errors = 0
    refused = []
    for r in rec["records"]:
        body, resp = r["body"], r["response"]
        prompt = rec["prompt_tokens"][r["prompt"]]
        try:
            params = sampling.from_request(body, defaults, tok)
            smp = Sampler(params, tok)
        except RequestError as e:
            if resp["status"] != 200:            # llama-server refuses it too: the same error
                assert (e.status, e.body()) == (resp["status"], resp["error"]), r["id"]
                n_errors += 1
                continue
            assert e.status == 501 and "with backend sampling" in e.message, (r["id"], e.message)
            refused.append(r["id"])
            continue
        assert resp["status"] == 200, r["id"]
        n_graph += smp.backend is not None
        out, probs = generate(model, tok, params, prompt, sampler=smp)
        n_probs += assert_same(tok, params, out, probs, resp, r["id"])
        n += 1
    print(f"backend replay {rec['model']}: {n} identical ({n_probs} with probabilities, {n_graph} through the "
          f"graph), {n_errors} refused by both, bankml's 501 {len(refused)}: {refused}")
    return n, n_probs, n_graph, n_errors, refused


@pytest.mark.slow
@pytest.mark.oracle
def test_backend_replay_q4_1(smollm2_path, oracle_dir):
    n, n_probs, n_graph, n_errors, refused = _replay(smollm2_path, _load(oracle_dir))
    assert n >= 100 and n_probs >= 70 and n_graph >= 90 and len(refused) <= 2


@pytest.mark.slow
@pytest.mark.oracle
def test_backend_replay_q8_0(smollm2_q8_0_path, oracle_dir):
    n, n_probs, n_graph, n_errors, refused = _replay(smollm2_q8_0_path, _load(oracle_dir, "q8_0"))
    assert n >= 40 and n_probs >= 30 and n_graph >= 35 and len(refused) <= 2
