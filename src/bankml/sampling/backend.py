"""Backend sampling as llama-server b11192 runs it on the CPU backend (`--backend-sampling`, `backend_sampling`).

    plan = backend.plan(params, steps, n_vocab)   # None: the server keeps the CPU chain; RequestError 501
    plan.apply(cands)                             # the sampling graph's prefix, then the CPU tail

The server hands the slot's chain to the context (llama_set_sampler) when the request asks for backend
sampling, has no grammar (common_sampler_init turns it off then) and does not want pre-sampling probabilities.
The chain's leading samplers that have a graph (logit bias, penalties, top-k, top-p, min-p, temperature, dist,
and every disabled - "empty" - sampler) run in the graph (src/kernels/backend_sampling.c); from the first one
without (DRY, top-n-sigma, typical, XTC, mirostat, adaptive-p) on, the rest runs on the CPU over the graph's
candidates, unsorted. Not reproduced (501): duplicate logit-bias tokens (set_rows races), a top-k above the
candidates it gets (ggml_top_k aborts), a top-k or top-p after a sampler that gave 2-D candidates (a second
top-k / top-p: llama-server aborts).
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
    def __init__(self, graph: list, tail: list, n_vocab: int):
        self.graph, self.tail, self.n_vocab = graph, tail, n_vocab

    def apply(self, c) -> None:
        for s, has_cands in self.graph:
            _GRAPH[type(s)](self, s, c, has_cands)
        for s in self.tail:
            s.apply(c)


def plan(p: Params, steps: list, n_vocab: int, grammar=None) -> Plan | None:
    if not wants_backend(p, grammar):
        return None
    return plan_steps(steps, n_vocab)


def plan_steps(steps: list, n_vocab: int) -> Plan:
    """llama_sampler_chain_backend_init's split of the chain, with the graph shapes that make llama-server abort
    refused"""
    graph: list = []
    size = n_vocab
    cands = 0      # the graph's candidates so far: 0 none, 1 a 1-D tensor (or one row), else a 2-D tensor's rows
    i = 0
    while i < len(steps) and not (isinstance(steps[i], _CPU_ONLY) and not is_empty(steps[i])):
        s = steps[i]
        i += 1
        if is_empty(s):
            continue
        if isinstance(s, ch.LogitBias) and len(set(s.tokens.tolist())) != len(s.tokens):
            raise _unsupported("a logit bias naming a token twice")
        if isinstance(s, ch.TopK):
            if s.args[0] > size:
                raise _unsupported(f"top_k {s.args[0]} above the {size} candidates (ggml_top_k aborts)")
        if isinstance(s, (ch.TopK, ch.TopP)):
            if cands > 1:
                raise _unsupported(f"{s.name} after a sampler that gave candidates rows (llama-server aborts)")
            size = s.args[0] if isinstance(s, ch.TopK) else size
        graph.append((s, cands > 0))
        if isinstance(s, (ch.TopK, ch.TopP)):
            cands = 1 if cands == 0 else size
        if isinstance(s, (ch.Temp, ch.TempExt)) and s.args[0] <= 0.0:
            size, cands = 1, 1
    return Plan(graph, [s for s in steps[i:]], n_vocab)


def _dist(plan, s: ch.Dist, c, has_cands) -> None:
    # llama_sampler_dist_backend_set_input: a uniform_real_distribution<double> draw, stored as float
    c.be_dist(float(np.float32(s.rng.uniform_double())))


def _penalties(plan, s: ch.Penalties, c, has_cands) -> None:
    c.be_penalties(s.counts, min(s.last_n, plan.n_vocab), has_cands, s.repeat, s.freq, s.present)


def _temp_ext(plan, s: ch.TempExt, c, has_cands) -> None:
    temp, delta, exponent = s.args
    if delta <= 0.0 or temp <= 0.0:
        c.be_temp(temp)
    else:
        c.be_dynatemp(temp, delta, exponent)


_GRAPH = {
    ch.LogitBias: lambda plan, s, c, h: c.be_logit_bias(s.tokens, s.biases),
    ch.Penalties: _penalties,
    ch.TopK: lambda plan, s, c, h: c.be_top_k(s.args[0]),
    ch.TopP: lambda plan, s, c, h: c.be_top_p(s.args[0]),
    ch.MinP: lambda plan, s, c, h: c.be_min_p(s.args[0]),
    ch.TempExt: _temp_ext,
    ch.Temp: lambda plan, s, c, h: c.be_temp(s.args[0]),
    ch.Dist: _dist,
}
