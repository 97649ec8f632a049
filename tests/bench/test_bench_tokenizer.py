"""Tokenizing 1 MB of mixed text: bankml (the Tokenizer, and its /tokenize route in-process) against llama-server
b11192's POST /tokenize on the same text and model. Run with `python -m pytest tests/bench --benchmark-only`.

The text is the tokenizer oracle's corpus (tests/oracle/tokenizer/, every script, code, digits, whitespace runs,
special-token text, emoji), shuffled with a fixed seed and cut to 1 MiB at a character boundary. The
llama-server rows need the oracle build (testing/build_oracle.sh) and are skipped without it; every row checks
that its tokens equal bankml's. No timing is asserted: the machine is shared. Results: PERFORMANCE.md."""

from __future__ import annotations

import gzip
import json
import os
import random
import sys
from pathlib import Path

import pytest

from bankml.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "tests" / "oracle" / "tokenizer"
MIB = 1 << 20


def mixed_text(size: int = MIB, seed: int = 1) -> str:
    texts = []
    for name in ("smollm2", "gemma3"):
        with gzip.open(RECORDS / f"{name}.json.gz") as fh:
            texts += [r["t"] for r in json.loads(fh.read())["server"]]
    rnd = random.Random(seed)
    parts, n = [], 0
    while n < size:
        t = rnd.choice(texts)
        parts.append(t)
        n += len(t.encode()) + 1
    return "\n".join(parts).encode()[:size].decode("utf-8", "ignore")


TEXT = mixed_text()


def oracle_server(model: Path):
    """A llama-server of the oracle build on `model`, or None when the build is not there."""
    oracle_dir = Path(os.environ.get("BANKML_ORACLE_DIR", Path.home() / ".cache" / "bankml" / "oracle"))
    if not (oracle_dir / "build" / "bin" / "llama-server").exists():
        return None
    sys.path.insert(0, str(ROOT))
    from testing.oracle import LlamaServer
    return LlamaServer(model)


@pytest.fixture(scope="module", params=["smollm2", "gemma3"])
def model(request):
    path = request.getfixturevalue(f"{request.param}_path")
    return request.param, path, Tokenizer.from_file(path)


@pytest.fixture(scope="module")
def expected(model):
    return model[2].tokenize(TEXT)


def test_bankml_tokenize(benchmark, model, expected):
    name, path, tok = model
    benchmark.group = f"tokenize 1 MiB ({name})"
    benchmark.extra_info["tokens"] = len(expected)
    ids = benchmark.pedantic(tok.tokenize, args=(TEXT,), rounds=5, warmup_rounds=1)
    assert ids == expected


def test_bankml_http_tokenize(benchmark, model, expected):
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from bankml.server.api.tokenize import routes
    name, path, tok = model
    app = Starlette(routes=routes)
    app.state.tokenizer = tok
    body = json.dumps({"content": TEXT}).encode()
    benchmark.group = f"tokenize 1 MiB ({name})"
    with TestClient(app) as client:
        r = benchmark.pedantic(client.post, args=("/tokenize",), kwargs={"content": body}, rounds=5,
                               warmup_rounds=1)
    assert r.json()["tokens"] == expected


def test_llama_server_tokenize(benchmark, model, expected):
    name, path, tok = model
    srv = oracle_server(path)
    if srv is None:
        pytest.skip("no oracle build (testing/build_oracle.sh): llama-server row skipped")
    body = json.dumps({"content": TEXT}).encode()
    benchmark.group = f"tokenize 1 MiB ({name})"
    with srv:
        st, _, payload = benchmark.pedantic(srv.post, args=("/tokenize",), kwargs={"raw": body}, rounds=3,
                                            warmup_rounds=1)
    assert st == 200 and json.loads(payload)["tokens"] == expected
