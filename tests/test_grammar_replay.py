"""Replay of the constrained requests recorded from llama-server b11192 (tests/oracle/grammar/server_e2e*.json,
server_lazy.json) on bankml's own parts: tokenizer, forward pass, request parameters, sampler chain, grammar.
Every token id and content string must be identical.

The server's prompt cache is reproduced from the records (`cache_n`: the first cache_n prompt tokens are
decoded as one batch before the rest, as they were already in the slot).
"""

from __future__ import annotations

import json

import pytest

from bankml.grammar import request as req
from sampling_replay import generate

GEN_PROMPT = "<|im_start|>assistant\n"   # SmolLM2's generation prompt (bankml.chat.template renders it)


def _parts(smollm2_path):
    import bankml.engine
    import bankml.sampling
    import bankml.tokenizer
    from bankml.models.gguf import read_header_file
    header = read_header_file(smollm2_path)
    tok = bankml.tokenizer.Tokenizer.from_gguf(header)
    model = bankml.engine.Model.open(smollm2_path, n_ctx=4096, oracle_threads=2)
    defaults = bankml.sampling.Defaults.from_gguf(header, tok.n_vocab, tok.eog_ids)
    return bankml.sampling, tok, model, defaults


@pytest.mark.slow
@pytest.mark.oracle
def test_constrained_requests_replay(smollm2_path, oracle_dir):
    sampling, tok, model, defaults = _parts(smollm2_path)
    recs = []
    for name in ("server_e2e.json", "server_e2e_more.json", "server_lazy.json"):
        recs += json.loads((oracle_dir / "grammar" / name).read_text(encoding="utf-8"))["records"]
    n = 0
    for rec in recs:
        if rec["status"] != 200:
            continue
        body, resp = rec["request"], rec["response"]
        if rec["endpoint"] == "/completion":
            data, fmt = body, None
            want_tokens, want_content = resp["tokens"], resp["content"]
            cache_n = resp["timings"]["cache_n"]
        else:
            # oaicompat_chat_params_parse: the template's grammar and generation prompt, then every body key
            fmt = req.chat_response_format(req.chat_json_schema(body), GEN_PROMPT)
            data = dict(req.chat_llama_params(body, fmt), generation_prompt=GEN_PROMPT)
            for k, v in body.items():
                data.setdefault(k, v)
            want_tokens = resp["__verbose"]["tokens"]
            want_content = resp["choices"][0]["message"]["content"]
            cache_n = resp["usage"]["prompt_tokens_details"]["cached_tokens"]
        params = sampling.from_request(data, defaults, tok)
        sampler = sampling.Sampler(params, tok)   # the grammar comes from bankml.grammar.request.sampler_grammar
        out, _ = generate(model, tok, params, rec["prompt_tokens"], sampler=sampler, cache_n=cache_n)
        assert out == want_tokens, rec["id"]
        text = tok.detokenize([t for t in out if t not in tok.eog_ids]).decode("utf-8", "replace")
        parsed = fmt.content(text) if fmt is not None else None
        assert (text if parsed is None else parsed) == want_content, rec["id"]
        n += 1
    assert n >= 119
