"""Helpers that replay the forward-pass records (tests/oracle/forward/*.json) through bankml.engine."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

FORWARD = Path(__file__).parent / "oracle" / "forward"


def row_hash(row: np.ndarray) -> str:
    """The records' form of a logits row: the first 24 hex digits of the sha256 of its float32 bytes."""
    return hashlib.sha256(np.ascontiguousarray(row, dtype="<f4").tobytes()).hexdigest()[:24]


def lcg_tokens(seed: int, n_vocab: int):
    """The seeded token ids of tests/oracle/forward/multiseq.json (testing/record_multiseq.py), a draw(k) function
    giving the next k: x = (1103515245 x + 12345) mod 2^31 from the seed, id = (x >> 8) mod n_vocab."""
    x = seed

    def draw(k: int) -> list[int]:
        nonlocal x
        out = []
        for _ in range(k):
            x = (1103515245 * x + 12345) % 2**31
            out.append((x >> 8) % n_vocab)
        return out
    return draw


def record_sets(name: str) -> list[dict]:
    """The sets of one record file (a file holds one set, or several under "sets", whose cases may name their
    prompt from the file's "prompts"); [] when it is missing."""
    p = FORWARD / f"{name}.json"
    if not p.exists():
        return []
    rec = json.loads(p.read_text())
    sets = rec["sets"] if "sets" in rec else [rec]
    for s in sets:
        for c in s["cases"]:
            if "prompt" not in c:
                c["prompt"] = rec["prompts"][c["id"]]
    return sets


def open_recorded(path, rec: dict, check: bool = True):
    """The model of a record: the file's sha256 checked against the record's (unless check is false), opened
    with its context."""
    from bankml.engine import Model
    from bankml.models.verify import sha256_file
    assert not check or sha256_file(path) == rec["model_sha256"]
    ctx = rec["context"]
    return Model.open(path, n_ctx=ctx["n_ctx"], oracle_threads=ctx["threads"], cache_type=ctx["cache_type"])


class RecordedModels:
    """The models of several record sets, one open at a time: called with a set, returns its file opened with its
    context (-t, cache type), reusing the open one while the sets agree and closing it when they do not, so
    replay them grouped. path_of: the path of a file name (the records' "model"), asked when first opened; each
    file's sha256 is checked once against the records'. A context manager (closes the open model)."""

    def __init__(self, path_of):
        self.path_of = path_of
        self.key = self.model = None
        self.hashed = {}

    def __call__(self, rec: dict):
        from bankml.models.verify import sha256_file
        ctx = rec["context"]
        key = (rec["model"], ctx["threads"], ctx["cache_type"])
        if key != self.key:
            self.close()
            path = self.path_of(rec["model"])
            if path not in self.hashed:
                self.hashed[path] = sha256_file(path)
            assert self.hashed[path] == rec["model_sha256"]
            self.model = open_recorded(path, rec, check=False)
            self.key = key
        return self.model

    def close(self) -> None:
        if self.model is not None:
            self.model.close()
        self.key = self.model = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def assert_covers(cases: list[dict], longest: int, edges=(64, 256, 512, 1024), decode_edges=(512, 1024)) -> None:
    """At least 40 prompts of 1 .. `longest` tokens (at least) with some on both sides of each edge, and decode
    steps crossing each of decode_edges from below."""
    lengths = [len(c["prompt"]) for c in cases]
    assert len(cases) >= 40 and min(lengths) == 1 and max(lengths) >= longest
    for edge in edges:
        assert any(n < edge for n in lengths) and any(n > edge for n in lengths)
    for edge in decode_edges:
        assert any(len(c["prompt"]) < edge < len(c["prompt"]) + c["steps"] for c in cases)


def replay(model, case: dict, steps: int | None = None) -> int:
    """Run one case as llama-server runs it (the prompt in one decode call, then one call per token, each the
    recorded argmax) on a cleared cache; assert every row's hash and argmax. Returns the rows compared."""
    rows = case["rows"].split()
    argmax = case["argmax"]
    assert len(rows) == len(argmax) == case["steps"] + 1
    n = len(rows) if steps is None else min(len(rows), steps + 1)
    model.cache.clear()
    model.decode(case["prompt"], 0)
    pos = len(case["prompt"])
    for i in range(n):
        if i:
            model.decode([argmax[i - 1]], pos)
            pos += 1
        row = model.logits()
        where = "prompt" if i == 0 else f"decode step {i} (position {pos - 1})"
        assert row_hash(row) == rows[i], f"{case['id']}: {where}: logits differ from the oracle's"
        assert int(np.argmax(row)) == argmax[i], f"{case['id']}: {where}: argmax differs"
    return n
