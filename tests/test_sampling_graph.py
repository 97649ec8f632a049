"""Backend-sampling graphs (bankml.sampling.backend over src/kernels/backend_sampling.c) against llama.cpp
b11192's own graphs on ggml-cpu: tests/oracle/sampling/graph.json, recorded through libllama's samplers'
backend_init / backend_apply / backend_set_input and a ggml-cpu compute (testing/record_sampling_graph.py).
Per step: the split of the chain (graph prefix, CPU tail), the graph's candidate array (ids, logits,
probabilities, as bytes) and sampled token, then the CPU tail's array and selection, all identical."""

from __future__ import annotations

import hashlib
import json

import pytest

from bankml.sampling import backend
from bankml.sampling import chain as ch
from test_sampling_chain import _steps
from testing.record_sampling_chain import synthetic_logits


def _sha(c) -> str:
    return hashlib.sha256(c.array().tobytes()).hexdigest()


@pytest.fixture(scope="module")
def records(oracle_dir):
    return json.loads((oracle_dir / "sampling" / "graph.json").read_text())


def test_graph_cases(records):
    n_steps = n_sampled = n_tail = 0
    for k, case in enumerate(records["cases"]):
        inp = records["inputs"][case["input"]]
        row = synthetic_logits(inp["kind"], inp["n"], inp["seed"])
        n = len(row)
        steps = _steps(case["steps"], None, n)
        chain = ch.Chain(steps)
        plan = backend.plan_steps(steps, n)
        head, *outs = case["out"]
        assert (not plan.tail) == head["all_graph"], (k, case["steps"])
        chain.reset()
        for t in case["history"]:
            chain.accept(t)
        c = ch.Candidates(n)
        for j, want in enumerate(outs):
            c.fill(row)
            for s, has_cands in plan.graph:
                backend._GRAPH[type(s)](plan, s, c, has_cands)
            got = {"n": c.size, "graph": _sha(c)}
            assert got == {"n": want["n"], "graph": want["graph"]}, (k, j, case["steps"])
            if want["sampled"] >= 0:
                assert c.selected_id() == want["sampled"] == want["token"], (k, j)
                n_sampled += 1
            else:
                for s in plan.tail:
                    s.apply(c)
                tok = c.selected_id() if 0 <= c.selected < c.size else -1
                assert (c.selected, c.size, _sha(c), tok) == \
                    (want["selected"], want["size"], want["tail"], want["token"]), (k, j, case["steps"])
                n_tail += 1
            chain.accept(want["token"] if want["token"] >= 0 else (j * 31) % n)
            n_steps += 1
    print(f"graph: {n_steps} steps identical ({n_sampled} sampled in the graph, {n_tail} through a CPU tail)")
    assert n_steps >= 550 and n_sampled >= 300 and n_tail >= 100


def test_graph_refusals_and_split():
    """what llama-server cannot run in the graph (it aborts or races) is refused with 501 naming it; the split
    stops at the first sampler without a graph, disabled ones do not stop it"""
    from bankml.sampling.params import RequestError
    n = 100
    for steps, what in (([ch.LogitBias([(3, 1.0), (3, -1.0)]), ch.Dist(1)], "a token twice"),
                        ([ch.TopK(101), ch.Dist(1)], "top_k 101 above the 100"),
                        ([ch.TopK(5), ch.TopP(0.9, 0), ch.TopK(2), ch.Dist(1)], "top-k after"),
                        ([ch.TopP(0.9, 0), ch.TopP(0.5, 0), ch.TopP(0.4, 0), ch.Dist(1)], "top-p after")):
        with pytest.raises(RequestError) as e:
            backend.plan_steps(steps, n)
        assert e.value.status == 501 and what in e.value.message and "backend sampling" in e.value.message
    steps = [ch.TopK(40), ch.Typical(1.0, 0), ch.Xtc(0.0, 0.1, 0, 1), ch.TopP(0.9, 0), ch.Typical(0.5, 0),
             ch.MinP(0.05, 0), ch.Dist(1)]
    plan = backend.plan_steps(steps, n)
    assert [s for s, _ in plan.graph] == [steps[0], steps[3]] and plan.tail == steps[4:]
    assert [h for _, h in plan.graph] == [False, True]
