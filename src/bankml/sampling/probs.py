"""Token probabilities as llama-server b11192 reports them (`n_probs`, chat `logprobs` / `top_logprobs`).

    pre_sampling(logits, n, token)      # get_token_probabilities: softmax of the raw logits, top n by logit
    post_sampling_of(cands, n, token)   # the chain's candidates, sorted by p (common_sampler_get_candidates)

Both give TokenProbs: `ids` and `probs` (float32) of the top entries, and `token_prob`, the probability of the
sampled token (1.0 when it is not among the candidates, as the server's default). The server turns a
probability into `logprob` = ln(p) (-FLT_MAX... see logprob()).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bankml.sampling import _chain


@dataclass
class TokenProbs:
    ids: np.ndarray      # int32[k]
    probs: np.ndarray    # float32[k]
    token_prob: float


def _lookup(arr, token) -> float:
    if token is None:
        return 1.0
    hit = np.flatnonzero(arr["id"] == token)
    return float(arr["p"][hit[0]]) if hit.size else 1.0


def pre_sampling(logits, n: int, token: int | None = None, _cands=None) -> TokenProbs:
    """populate_token_probs(post_sampling = false): n_probs > 0"""
    logits = np.ascontiguousarray(logits, dtype=np.float32)
    c = _cands if _cands is not None else _chain.Candidates(len(logits))
    c.fill(logits)
    k = c.top_by_logit(max(int(n), 0))
    arr = c.array()
    return TokenProbs(arr["id"][:k].copy(), arr["p"][:k].copy(), _lookup(arr, token))


def post_sampling_of(cands, n: int, token: int | None = None) -> TokenProbs:
    """populate_token_probs(post_sampling = true): the candidates sorted by p (std::sort when not sorted),
    at most n, stopping at the first p == 0"""
    cands.sort_by_p()
    arr = cands.array()
    k = min(len(arr), max(int(n), 0))
    p = arr["p"][:k]
    zero = np.flatnonzero(p == 0.0)
    if zero.size:
        k = int(zero[0])
    return TokenProbs(arr["id"][:k].copy(), arr["p"][:k].copy(), _lookup(arr, token))


def logprob(p: float) -> float:
    """completion_token_output::logarithm: ln(p) in float, -FLT_MAX... for p == 0 (llama-server emits
    std::numeric_limits<float>::lowest())"""
    if p == 0.0:
        return -3.4028234663852886e38
    return float(np.log(np.float32(p)))
