"""Several inputs on several slots: bankml-serve against llama-server b11192's recorded answers
(tests/oracle/server/embeddings_batch.json, recorded by testing/record_embeddings_batch.py): requests of 2 to 8
inputs on `-np 2`, 3 and 4 (split KV cache), `-np -1` (auto: 4 slots on a unified KV cache) and `-np 2 -kvu`,
pooling none, mean, cls, last and rank, float and base64, each session replayed in order on a fresh bankml-serve,
every status and body identical byte for byte (the floats' bits included). Also the engine's embed_batch and
embed_unified: one sequence gives embed's rows and pool's vector, split_equal's plan, and pool_mean_rows on
grouped rows is pool_mean_ubatch.
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
    assert {s["flags"][s["flags"].index("-np") + 1] for s in SESSIONS} == {"-1", "2", "3", "4"}
    unified = [s for s in SESSIONS if s["flags"][s["flags"].index("-np") + 1] == "-1" or "-kvu" in s["flags"]]
    assert {s["name"].split("-")[0] for s in unified} == {"mean", "cls", "last", "none", "rerank"}
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


def test_pool_mean_rows_is_pool_mean_ubatch():
    """Rows grouped by sequence in equal counts: the general mean pooling (split_simple's ubatch) has the bits of
    split_equal's, through both of ggml's paths (tinyBLAS from 2 columns and 8 rows, vec_dot otherwise)."""
    from bankml.engine import _forward
    rng = np.random.default_rng(17)
    for ns, nst in ((1, 5), (2, 4), (3, 3), (4, 8), (2, 7)):
        rows = rng.standard_normal((ns * nst, 64)).astype(np.float32)
        cols = np.repeat(np.arange(ns, dtype=np.int32), nst)
        got = _forward.pool_mean_rows(rows, cols, ns)
        assert got.view(np.uint32).tobytes() == _forward.pool_mean_ubatch(rows, ns).view(np.uint32).tobytes()
    with pytest.raises(ValueError, match="one column"):
        _forward.pool_mean_rows(rows, cols[:-1], ns)


@pytest.mark.slow
def test_embed_unified_one_sequence_is_embed(smollm2_path):
    """embed_unified of one sequence on an empty unified cache gives embed's rows and pool's vectors, bit for bit;
    two sequences take the stream's cells in batch order."""
    from bankml.engine.model import Model
    toks = [1, 504, 3458, 282, 253, 1756, 28, 905]
    with Model.open(smollm2_path, n_ctx=2048, n_threads=2) as m:
        rows = m.embed(toks, 0, cache=m.new_cache(1024))
        for pooling in ("none", "mean", "cls", "last", "rank"):
            got = m.embed_unified(m.new_unified_cache(1024, n_seq_max=2), [(0, toks, 0)], pooling)[0]
            want = rows if pooling == "none" else m.pool(rows, pooling)
            assert np.asarray(got).tobytes() == np.asarray(want[:1] if pooling == "rank" else want).tobytes()
        u = m.new_unified_cache(1024, n_seq_max=2)
        got = m.embed_unified(u, [(1, toks, 0), (0, toks[:5], 0)], "none")
        assert [g.shape for g in got] == [(8, 576), (5, 576)] and (u.n_past(1), u.n_past(0)) == (8, 5)
        assert list(u.cells()[1][:13]) == [1] * 8 + [0] * 5
        with pytest.raises(ValueError, match="twice"):
            m.embed_unified(u, [(0, toks, 5), (0, toks, 5)], "mean")
        assert u.used == 13


def test_unified_vectors_differ_from_split_ones():
    """What the unified sessions show: for the same request, mean, cls and rank answers at -np auto differ from the
    split cache's at -np 4 (one stream's rows, masks and pooling are not split_equal's), so the replay of both
    checks two placements."""
    answers = {s["name"]: {r["body"]: r.get("answer") for r in s["requests"]} for s in SESSIONS}
    for unified, split in (("mean-auto", "mean-np4"), ("cls-auto", "cls-np4"), ("rerank-auto", "rerank-np4"),
                           ("mean-np2-kvu", "mean-np2")):
        differ = [b for b, a in answers[unified].items() if b in answers[split] and a != answers[split][b]]
        assert len(differ) >= 4, (unified, split)
