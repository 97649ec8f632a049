"""The constrained generations recorded from llama-server, checked on the grammar side alone: every generated
token is one the grammar allows at its step (EOG only when the grammar is complete), and the content
llama-server returns is what bankml derives from the tokens (the chat parser for JSON answers).

The full replay (bankml's logits and sampler choosing these tokens) is tests/pending/replay_grammar_e2e.py.
"""

from __future__ import annotations

import json

import pytest

from bankml.grammar import GrammarVocab
from bankml.grammar import request as req

GP = "<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def vocab(smollm2_path):
    return GrammarVocab.from_gguf_file(smollm2_path)


def _records(oracle_dir):
    out = []
    for name in ("server_e2e.json", "server_e2e_more.json", "server_lazy.json"):
        out += [r for r in json.loads((oracle_dir / "grammar" / name).read_text(encoding="utf-8"))["records"]
                if r["status"] == 200]
    return out


@pytest.mark.slow
@pytest.mark.oracle
def test_recorded_generations_fit_the_grammar(oracle_dir, vocab):
    tokens = json.loads((oracle_dir / "grammar" / "tokens_smollm2.json").read_text(encoding="utf-8"))["tokens"]
    recs = _records(oracle_dir)
    n_tokens = n_json = 0
    for rec in recs:
        body, resp = rec["request"], rec["response"]
        if rec["endpoint"] == "/completion":
            spec = req.completion_grammar_fields(body, lambda text: tokens[text])
            gp, fmt = body.get("generation_prompt", ""), None
            out, content = resp["tokens"], resp["content"]
        else:
            fmt = req.chat_response_format(req.chat_json_schema(body), GP)
            spec = req.completion_grammar(req.chat_llama_params(body, fmt))
            gp = GP
            out, content = resp["__verbose"]["tokens"], resp["choices"][0]["message"]["content"]
        prefill = req.prefill_tokens(gp, tokens[gp], lambda t: vocab.pieces[t]) if gp else []
        g = req.sampler_grammar(spec, vocab, prefill)
        for t in out:
            if g is not None:
                assert g.allowed(t), (rec["id"], t)
                g.accept(t)
            n_tokens += 1
        text = b"".join(vocab.pieces[t] for t in out if t not in vocab.eog_ids).decode("utf-8", "replace")
        if fmt is not None:
            parsed = fmt.content(text)
            text = text if parsed is None else parsed
            n_json += 1
        assert text == content, rec["id"]
    assert len(recs) >= 119 and n_tokens >= 2500 and n_json >= 35
