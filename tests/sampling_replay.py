"""A small generation loop over bankml's parts, as llama-server runs a /completion slot with cache_prompt
false: the prompt decoded as one batch, the sampler begun with the prompt, then sample / accept / decode one
token at a time until an end-of-generation token or n_predict tokens. Used by the sampling and grammar replays."""

from __future__ import annotations

import numpy as np

import bankml.sampling as sampling
from bankml.sampling.probs import logprob, pre_sampling
from bankml.sampling.sampler import Sampler


def generate(model, tok, params, prompt: list[int], sampler=None, cache_n: int = 0):
    """-> (tokens, probs): probs[i] = (TokenProbs, post_sampling) for every generated token when n_probs > 0"""
    sampler = sampler or Sampler(params, tok)
    model.truncate(0)
    if cache_n:
        model.decode(prompt[:cache_n], 0)
    model.decode(prompt[cache_n:], cache_n)
    sampler.begin(prompt)
    n_predict = params.n_predict if params.n_predict >= 0 else 2**31
    out, probs, pos = [], [], len(prompt)
    while True:
        logits = np.asarray(model.logits(), dtype=np.float32)
        t = sampler.sample(logits)
        sampler.accept(t)
        if params.n_probs > 0:
            if params.post_sampling_probs:
                probs.append(sampler.post_sampling(params.n_probs, t))
            else:
                probs.append(pre_sampling(logits, params.n_probs, t))
        out.append(t)
        if tok.is_eog(t) or len(out) >= max(n_predict, 1):
            break
        model.decode([t], pos)
        pos += 1
    return out, probs


def assert_same(tok, params, out, probs, resp, rid) -> bool:
    """the generated tokens and (with n_probs) the probability entries equal the recorded answer's; returns
    whether there were probabilities"""
    assert out == resp["tokens"], rid
    if params.n_probs <= 0:
        return False
    post = params.post_sampling_probs
    want = strip_entries(resp["probs"], post)
    assert align(probs_entries(tok, out, probs, post), want) == want, rid
    return True


def probs_entries(tok, tokens, probs, post: bool) -> list[dict]:
    """the inner parts of llama-server's completion_probabilities (ids, values, token bytes), per token"""
    key, top = ("prob", "top_probs") if post else ("logprob", "top_logprobs")
    out = []
    for t, pr in zip(tokens, probs):
        val = (lambda p: float(p)) if post else logprob
        out.append({"id": t, key: val(pr.token_prob), top: [
            {"id": int(i), "bytes": list(tok.token_to_piece(int(i), special=False)), key: val(float(p))}
            for i, p in zip(pr.ids, pr.probs)]})
    return out


def strip_entries(entries: list[dict], post: bool) -> list[dict]:
    """a recorded completion_probabilities list without the text fields that depend on the stream's text"""
    key, top = ("prob", "top_probs") if post else ("logprob", "top_logprobs")
    return [{"id": e["id"], key: e[key], top: [{"id": x["id"], "bytes": x["bytes"], key: x[key]} for x in e[top]]}
            for e in entries]


def align(mine: list[dict], recorded: list[dict]) -> list[dict]:
    """the server leaves out tokens whose text is held (incomplete UTF-8): keep my entries in recorded order"""
    out, j = [], 0
    for e in recorded:
        while j < len(mine) and mine[j]["id"] != e["id"]:
            j += 1
        if j < len(mine):
            out.append(mine[j])
            j += 1
    return out


__all__ = ["generate", "assert_same", "probs_entries", "strip_entries", "align", "sampling"]
