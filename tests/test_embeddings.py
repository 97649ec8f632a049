"""llama-server b11192's embeddings and rerank scores (tests/oracle/server/embeddings.json, recorded by
testing/record_embeddings.py) replayed bit for bit through the engine: Model.embed (the final norm's output of
every token, src/llama-context.cpp decode with embeddings on), Model.pool (src/llama-graph.cpp build_pooling:
none, mean, cls, last, rank on a llama file without a classifier head) and Model.normalize
(common/common.cpp common_embd_normalize, send_embedding's server-context.cpp:2182 (b11192): only with pooling).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from bankml.engine import Model
from bankml.models.gguf import read_header_file
from bankml.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def record(oracle_dir):
    return json.loads((oracle_dir / "server" / "embeddings.json").read_text())


@pytest.fixture(scope="module")
def model(smollm2_path):
    with Model.open(smollm2_path, n_ctx=4096, oracle_threads=2) as m:
        yield m


@pytest.fixture(scope="module")
def tok(smollm2_path):
    return Tokenizer.from_gguf(read_header_file(smollm2_path))


def _rows(model, tokens):
    model.truncate(0)                   # an embedding task recomputes its prompt (n_past = 0 or an erased slot)
    return model.embed(tokens, 0)


def _hex(v) -> str:
    return np.asarray(v, dtype=np.float32).tobytes().hex()


def test_record_sizes(record):
    assert len(record["pooling"]["none"]) >= 100
    for p in ("mean", "cls", "last"):
        assert len(record["pooling"][p]) >= 100
    assert len(record["rank"]) >= 100


def test_pooling_none_rows(record, model, tok):
    for case in record["pooling"]["none"]:
        assert tok.tokenize(case["input"], True, True) == case["tokens"]
        rows = _rows(model, case["tokens"])
        assert rows.shape[0] == case["n_rows"]
        assert _hex(rows[0]) == case["row0"], case["input"]
        assert hashlib.sha256(rows.tobytes()).hexdigest() == case["sha256"], case["input"]


@pytest.mark.parametrize("pooling", ["mean", "cls", "last"])
def test_pooled_normalized(record, model, pooling):
    for case in record["pooling"][pooling]:
        assert case["status"] == 200
        rows = _rows(model, case["tokens"])
        vec = Model.normalize(Model.pool(rows, pooling), case["embd_normalize"])
        assert _hex(vec) == case["bits"], (pooling, case["input"])


def test_rank_scores(record, model, tok):
    # format_prompt_rerank without a rerank template (server-common.cpp:1833 (b11192)): SmolLM2 adds no BOS, EOS
    # or SEP, so the prompt is the query's tokens then the document's; the score is element 0 of the first
    # token's t_embd (send_rerank, n_cls_out 1), unnormalised
    assert not tok.add_bos and not tok.add_eos
    for case in record["rank"]:
        assert case["status"] == 200
        scores = {}
        for i, doc in enumerate(case["documents"]):
            ids = tok.tokenize(case["query"], False, False) + tok.tokenize(doc, False, False)
            scores[i] = float(Model.pool(_rows(model, ids), "rank")[0])
        got = {r["index"]: r["relevance_score"] for r in case["body"]["results"]}
        assert got == scores, case["query"]
