"""Several inputs on several slots: bankml-serve against llama-server b11192's recorded answers
(tests/oracle/server/embeddings_batch.json, recorded by testing/record_embeddings_batch.py): requests of 2 to 8
inputs on `-np 2`, 3 and 4 (split KV cache), pooling none, mean, cls, last and rank, float and base64, each
session replayed in order on a fresh bankml-serve, every status and body identical byte for byte (the floats' bits
included). Also the engine's embed_batch: one sequence gives embed's rows and pool's vector, split_equal's plan,
and the refusal that stays (several inputs on a unified KV cache).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest

from test_embeddings_server import replay

REC = json.loads((Path(__file__).parent / "oracle" / "server" / "embeddings_batch.json").read_text())
SESSIONS = REC["sessions"]


def _n_inputs(row: dict) -> int:
    body = json.loads(row["body"])
    x = body.get("input", body.get("content", body.get("documents", body.get("texts"))))
    return len(x) if isinstance(x, list) else 1


def test_enough_recorded():
    """100+ input vectors (and scores) answered, every pooling type, 2 .. 8 inputs, -np 2, 3 and 4."""
    rows = [(s, r) for s in SESSIONS for r in s["requests"] if r["status"] == 200]
    assert sum(_n_inputs(r) for _, r in rows) >= 300
    assert {_n_inputs(r) for _, r in rows} >= set(range(2, 9))
    names = {s["name"].split("-")[0] for s, _ in rows}
    assert names >= {"mean", "cls", "last", "none", "rerank"}
    assert {s["flags"][s["flags"].index("-np") + 1] for s in SESSIONS} == {"2", "3", "4"}
    assert any('"base64"' in r["body"] for _, r in rows) and any("float" in r["body"] for _, r in rows)


def test_recorded_vectors_depend_on_the_batch():
    """What the record shows: the same input's vector differs with the inputs decoded beside it (else one input at
    a time would do)."""
    sess = next(s for s in SESSIONS if s["name"] == "mean-np2")
    by_body = {r["body"]: json.loads(r["answer"]) for r in sess["requests"] if "answer" in r and r["status"] == 200}
    a = by_body[json.dumps({"input": ["The quick brown fox jumps over the lazy dog", "I believe the meaning of "
                                      "life is", "x " * 40], "encoding_format": "base64"}, ensure_ascii=False)]
    b = by_body[json.dumps({"input": ["Hello", "The quick brown fox jumps over the lazy dog", "I believe the meaning "
                                      "of life is", "x " * 40], "encoding_format": "base64"}, ensure_ascii=False)]
    va = base64.b64decode(a["data"][0]["embedding"])
    vb = base64.b64decode(b["data"][1]["embedding"])
    assert va != vb


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_session_replays_identically(session, smollm2_path):
    argv = ["-m", str(smollm2_path), "-t", "2", "-c", "4096", "--jinja", "--reasoning", "off", "--no-webui",
            *session["flags"]]
    replay(session, argv, smollm2_path)


def test_split_equal_plan():
    """llama_batch_allocr::split_equal(sequential): consecutive ids together, equal shares, capped by n_ubatch."""
    from bankml.engine.model import split_equal
    assert list(split_equal([(0, 10), (1, 5)], 512)) == [([0, 1], 5), ([0], 5)]
    assert list(split_equal([(0, 3), (2, 3)], 512)) == [([0], 3), ([1], 3)]       # ids 0 and 2: never together
    assert list(split_equal([(1, 4), (2, 4), (3, 2)], 512)) == [([0, 1, 2], 2), ([0, 1], 2)]
    assert list(split_equal([(0, 300), (1, 300)], 512)) == [([0, 1], 256), ([0, 1], 44)]
    assert list(split_equal([(0, 9)], 4)) == [([0], 4), ([0], 4), ([0], 1)]


@pytest.mark.slow
def test_one_sequence_is_embed(smollm2_path):
    """embed_batch of one sequence gives embed's rows and pool's vectors, bit for bit; two sequences fill their
    own caches."""
    from bankml.engine.model import Model
    toks = [1, 504, 3458, 282, 253, 1756, 28, 905]
    with Model.open(smollm2_path, n_ctx=2048, n_threads=2) as m:
        rows = m.embed(toks, 0, cache=m.new_cache(1024))
        for pooling in ("none", "mean", "cls", "last", "rank"):
            got = m.embed_batch([(0, m.new_cache(1024), toks, 0)], pooling)[0]
            want = rows if pooling == "none" else m.pool(rows, pooling)
            assert np.asarray(got).tobytes() == np.asarray(want[:1] if pooling == "rank" else want).tobytes()
        a, b = m.new_cache(1024), m.new_cache(1024)
        got = m.embed_batch([(0, a, toks, 0), (1, b, toks[:5], 0)], "none")
        assert [g.shape for g in got] == [(8, 576), (5, 576)] and (a.n_past, b.n_past) == (8, 5)
        with pytest.raises(ValueError):
            m.embed_batch([(0, a, toks, 8), (0, b, toks, 5)], "mean")      # one seq_id twice
        assert (a.n_past, b.n_past) == (8, 5)
