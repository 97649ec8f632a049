"""Backend sampling as llama-server b11192 runs it on the CPU backend (`--backend-sampling`, `backend_sampling`).

    plan = backend.plan(params, steps, n_vocab)   # None: the server keeps the CPU chain; RequestError 501
    plan.apply(cands)                             # the sampling graph's prefix, then the CPU tail

The server hands the slot's chain to the context (llama_set_sampler) when the request asks for backend
sampling, has no grammar (common_sampler_init turns it off then) and does not want pre-sampling probabilities.
The chain's leading samplers that have a graph (logit bias, penalties, top-k, top-p, min-p, temperature, dist,
and every disabled - "empty" - sampler) run in the graph (src/kernels/backend_sampling.c); from the first one
without (DRY, top-n-sigma, typical, XTC, mirostat, adaptive-p) on, the rest runs on the CPU over the graph's
candidates, unsorted. Not reproduced (501): the penalties' graph, dynamic temperature's entropy graph,
duplicate logit-bias tokens (set_rows races) and a top-k above the candidates it gets (ggml_top_k aborts).
"""

from __future__ import annotations

import numpy as np

from bankml.sampling import chain as ch
from bankml.sampling.params import Params, RequestError

_CPU_ONLY = (ch.Dry, ch.TopNSigma, ch.Typical, ch.Xtc, ch.Mirostat, ch.MirostatV2, ch.AdaptiveP)


def _unsupported(what: str) -> RequestError:
    return RequestError(f"bankml does not reproduce {what} with backend sampling "
                        "(llama-server b11192 would run it)", 501)


def is_empty(s) -> bool:
    """llama_sampler_init_* returns the empty sampler (which has a graph: nothing) for these arguments"""
    if isinstance(s, ch.TopK):
        return s.args[0] <= 0
    if isinstance(s, (ch.TopP, ch.Typical)):
        return s.args[0] >= 1.0
    if isinstance(s, ch.MinP):
        return s.args[0] <= 0.0
    if isinstance(s, ch.TopNSigma):
        return s.args[0] <= 0.0
    if isinstance(s, ch.Xtc):
        return s.probability <= 0.0 or s.threshold > 0.5
    if isinstance(s, ch.TempExt):
        return s.args[0] == 1.0 and s.args[1] <= 0.0
    if isinstance(s, ch.Temp):
        return s.args[0] == 1.0
    return False


def wants_backend(p: Params, grammar) -> bool:
    """server-context's use_backend_sampling (after common_sampler_init turned it off for a grammar)"""
    return bool(p.backend_sampling) and grammar is None and not (p.n_probs > 0 and not p.post_sampling_probs)


class Plan:
    def __init__(self, graph: list, tail: list):
        self.graph, self.tail = graph, tail

    def apply(self, c) -> None:
        for s in self.graph:
            _GRAPH[type(s)](s, c)
        for s in self.tail:
            s.apply(c)


def plan(p: Params, steps: list, n_vocab: int, grammar=None) -> Plan | None:
    if not wants_backend(p, grammar):
        return None
    graph: list = []
    size = n_vocab
    i = 0
    while i < len(steps) and not (isinstance(steps[i], _CPU_ONLY) and not is_empty(steps[i])):
        s = steps[i]
        i += 1
        if is_empty(s):
            continue
        if isinstance(s, ch.Penalties):
            raise _unsupported("the penalties sampler (repeat/frequency/presence penalty)")
        if isinstance(s, ch.TempExt) and s.args[1] > 0.0 and s.args[0] > 0.0:
            raise _unsupported("dynamic temperature (dynatemp_range > 0)")
        if isinstance(s, ch.LogitBias) and len(set(s.tokens.tolist())) != len(s.tokens):
            raise _unsupported("a logit bias naming a token twice")
        if isinstance(s, ch.TopK):
            if s.args[0] > size:
                raise _unsupported(f"top_k {s.args[0]} above the {size} candidates (ggml_top_k aborts)")
            size = s.args[0]
        if isinstance(s, (ch.Temp, ch.TempExt)) and s.args[0] <= 0.0:
            size = 1
        graph.append(s)
    return Plan(graph, [s for s in steps[i:]])


def _dist(s: ch.Dist, c) -> None:
    # llama_sampler_dist_backend_set_input: a uniform_real_distribution<double> draw, stored as float
    c.be_dist(float(np.float32(s.rng.uniform_double())))


_GRAPH = {
    ch.LogitBias: lambda s, c: c.be_logit_bias(s.tokens, s.biases),
    ch.TopK: lambda s, c: c.be_top_k(s.args[0]),
    ch.TopP: lambda s, c: c.be_top_p(s.args[0]),
    ch.MinP: lambda s, c: c.be_min_p(s.args[0]),
    ch.TempExt: lambda s, c: c.be_temp(s.args[0]),
    ch.Temp: lambda s, c: c.be_temp(s.args[0]),
    ch.Dist: _dist,
}
