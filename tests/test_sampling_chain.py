"""The sampler chain (bankml.sampling.chain over src/kernels/sampling.c) against llama.cpp b11192's own samplers:
tests/oracle/sampling/chain.json, recorded through libllama's llama_sampler_* API
(testing/record_sampling_chain.py). Every step's selected token and the whole candidate array (ids, logits,
probabilities, as bytes) must be identical."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from bankml.sampling import chain as ch
from testing.record_sampling_chain import synthetic_logits

N_VOCAB = 49152


def _steps(spec, tok, n_vocab=N_VOCAB):
    out = []
    for st in spec:
        name, a = st[0], st[1:]
        if name == "logit_bias":
            out.append(ch.LogitBias([(t, b) for t, b in a[0]]))
        elif name == "penalties":
            out.append(ch.Penalties(n_vocab, *a))
        elif name == "dry":
            mult, base, allowed, last_n, brk = a
            if mult != 0.0 and base >= 1.0 and max(last_n, 0) != 0:
                out.append(ch.Dry(n_vocab, mult, base, allowed, last_n, ch.dry_breakers(tok, brk)))
        elif name == "top_k":
            out.append(ch.TopK(*a))
        elif name == "top_p":
            out.append(ch.TopP(*a))
        elif name == "min_p":
            out.append(ch.MinP(*a))
        elif name == "typical":
            out.append(ch.Typical(*a))
        elif name == "temp":
            out.append(ch.Temp(*a))
        elif name == "temp_ext":
            out.append(ch.TempExt(*a))
        elif name == "xtc":
            out.append(ch.Xtc(*a))
        elif name == "top_n_sigma":
            out.append(ch.TopNSigma(*a))
        elif name == "dist":
            out.append(ch.Dist(*a))
        elif name == "mirostat":
            seed, tau, eta, m = a
            out.append(ch.Mirostat(n_vocab, seed, tau, eta, m))
        elif name == "mirostat_v2":
            out.append(ch.MirostatV2(*a))
        elif name == "adaptive_p":
            out.append(ch.AdaptiveP(n_vocab, *a))
        else:
            raise AssertionError(name)
    # the oracle's penalties with nothing to do is an empty sampler
    return [s for s in out if not (isinstance(s, ch.Penalties) and s.disabled)]


@pytest.fixture(scope="module")
def records(oracle_dir):
    return json.loads((oracle_dir / "sampling" / "chain.json").read_text())


@pytest.fixture(scope="module")
def tok(smollm2_path):
    from bankml.models.gguf import read_header_file
    from bankml.tokenizer import Tokenizer
    return Tokenizer.from_gguf(read_header_file(smollm2_path))


@pytest.fixture(scope="module")
def rows(records, smollm2_path):
    out = {}
    need = [i for i, inp in enumerate(records["inputs"]) if inp["kind"] == "real"]
    model = None
    for i, inp in enumerate(records["inputs"]):
        if inp["kind"] != "real":
            out[i] = synthetic_logits(inp["kind"], inp["n"], inp["seed"])
    if need:
        import bankml.engine
        model = bankml.engine.Model.open(smollm2_path, n_ctx=4096, oracle_threads=2)
        for i in need:
            inp = records["inputs"][i]
            model.truncate(0)
            model.decode(inp["tokens"], 0)
            row = np.array(model.logits(), dtype=np.float32)
            assert hashlib.sha256(row.tobytes()).hexdigest() == inp["sha256"]
            out[i] = row
    return out


def test_chain_cases(records, rows, tok):
    n_steps = 0
    for k, case in enumerate(records["cases"]):
        row = rows[case["input"]]
        chain = ch.Chain(_steps(case["steps"], tok))
        chain.reset()
        for t in case["history"]:
            chain.accept(t)
        c = ch.Candidates(len(row))
        for j, want in enumerate(case["out"]):
            c.fill(row)
            chain.apply(c)
            arr = c.array()
            got = {"selected": c.selected, "size": c.size, "sorted": c.sorted, "offset": c.offset,
                   "sha256": hashlib.sha256(arr.tobytes()).hexdigest()}
            got["token"] = int(arr["id"][c.selected]) if 0 <= c.selected < c.size else -1
            assert got == want, (k, j, case["steps"])
            chain.accept(got["token"] if got["token"] >= 0 else (j * 31) % len(row))
            n_steps += 1
    assert n_steps >= 900


def test_mt19937_and_canonical():
    g = ch.MT19937(5489)
    assert g.next_u32() == 3499211612          # the C++ standard's check value is the 10000th: below
    g = ch.MT19937(5489)
    for _ in range(9999):
        g.next_u32()
    assert g.next_u32() == 4123659995
    g = ch.MT19937(1)
    a, b = g.next_u32(), g.next_u32()
    g.seed(1)
    assert g.uniform_double() == (a + b * 2.0**32) / 2.0**64


def test_reasoning_gate_follows_the_reasoning_block():
    # common_reasoning_budget at an unlimited budget: IDLE until the start marker's tokens, COUNTING inside the
    # block, DONE after the longest end marker ending the tokens (its tokens kept for the grammar), COUNTING
    # again on a new start marker
    from bankml.sampling.sampler import COUNTING, DONE, IDLE, ReasoningGate
    g = ReasoningGate([1, 2], [[7], [6, 7], [6, 7]])
    states = []
    for t in (5, 1, 3, 1, 2, 4, 6, 7, 9, 1, 2, 8):
        g.accept(t)
        states.append(g.state)
    assert states == [IDLE, IDLE, IDLE, IDLE, COUNTING, COUNTING, COUNTING, DONE, DONE, DONE, COUNTING, COUNTING]
    assert g.end_tokens() == [] and g.end.seqs == [[7], [6, 7]]
    g.accept(7)
    assert g.state == DONE and g.end_tokens() == [7]
