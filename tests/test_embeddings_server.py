"""bankml-serve's embedding and rerank routes against llama-server b11192's recorded answers
(tests/oracle/server/embeddings_http.json, recorded by testing/record_embeddings_http.py): each session's requests
replayed in order on a fresh bankml-serve started with the session's flags, every answer's status and body bytes
identical (floats as nlohmann writes them, base64 of the float32 bits, the rank order of tied scores), the model
path of the recording machine read as this one's. A completion after embeddings is compared on its text and
token counts (its timings differ by nature).

Also: the real `openai` client's embeddings.create (which asks for base64) decodes to the recorded vectors'
bits; the refusals bankml adds where llama-server's answer is not reproduced (embeddings under rank pooling, an empty
rerank) say why.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import server_replay as sr

REC = json.loads((Path(__file__).parent / "oracle" / "server" / "embeddings_http.json").read_text())
SESSIONS = REC["sessions"]
RECORDED_MODEL = "/root/.local/share/bankml/models/smollm2-135m-instruct-q4_1.gguf"


def test_enough_recorded():
    rows = [r for s in SESSIONS for r in s["requests"]]
    assert len(rows) >= 130
    assert sum(r["status"] == 200 for r in rows) >= 80
    assert sum(r["status"] >= 400 for r in rows) >= 35
    assert {r["path"] for r in rows} >= {"/embedding", "/embeddings", "/v1/embeddings", "/rerank", "/reranking",
                                         "/v1/rerank", "/v1/reranking"}


def _post(port: int, path: str, body: str):
    return sr.send(port, {"method": "POST", "path": path, "raw": body})


def _compare(row: dict, status: int, body: bytes, model: str) -> str | None:
    text = body.decode("utf-8", "replace").replace(json.dumps(model)[1:-1], RECORDED_MODEL)
    if status != row["status"]:
        return f"status {status} != {row['status']}: {text[:300]}"
    if row["path"] == "/completion":
        got, want = json.loads(text), json.loads(row["answer"])
        keys = ("content", "tokens_evaluated", "tokens_cached", "stop_type", "tokens_predicted")
        diff = {k: (got.get(k), want.get(k)) for k in keys if got.get(k) != want.get(k)}
        return f"completion differs: {diff}" if diff else None
    if "answer" in row:
        if text != row["answer"]:
            i = next((i for i, (a, b) in enumerate(zip(text, row["answer"])) if a != b),
                     min(len(text), len(row["answer"])))
            return f"body differs at {i}: {text[max(0, i - 80):i + 80]!r} != {row['answer'][max(0, i - 80):i + 80]!r}"
        return None
    raw = text.encode("utf-8")
    if (hashlib.sha256(raw).hexdigest(), len(raw)) != (row["sha256"], row["length"]):
        return f"body of {len(raw)} bytes differs from the recorded {row['length']}: {text[:200]!r}"
    return None


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", SESSIONS, ids=[s["name"] for s in SESSIONS])
def test_session_replays_identically(session, smollm2_path):
    flags = list(session["flags"])
    np_flags = [] if "-np" in flags else ["-np", "1"]
    argv = ["-m", str(smollm2_path), "-t", "2", "-c", "4096", *np_flags, "--jinja", "--reasoning", "off",
            "--no-webui", *flags]
    replay(session, argv, smollm2_path)


def replay(session: dict, argv: list, model_path) -> None:
    """The session's requests in order on a fresh bankml-serve started with argv: every answer as recorded."""
    problems = []
    with sr.BankmlServe(argv) as srv:
        for i, row in enumerate(session["requests"]):
            status, _, body = _post(srv.port, row["path"], row["body"])
            why = _compare(row, status, body, str(model_path))
            if why:
                problems.append(f"{i} {row['path']} {row['body'][:60]}: {why}")
    assert not problems, f"{session['name']}: {len(problems)} of {len(session['requests'])} differ:\n" + \
        "\n".join(problems[:6])


def _recorded(session: str, path: str, body: dict) -> dict:
    sess = next(s for s in SESSIONS if s["name"] == session)
    raw = json.dumps(body, ensure_ascii=False)
    return json.loads(next(r["answer"] for r in sess["requests"] if r["path"] == path and r["body"] == raw))


@pytest.mark.slow
def test_openai_client_embeddings(smollm2_path):
    """openai's embeddings.create asks for base64 and decodes it: the floats are the recorded ones, bit for bit."""
    openai = pytest.importorskip("openai")
    want = _recorded("mean", "/v1/embeddings", {"input": "Test base64 embedding output", "encoding_format": "float"})
    want_bits = np.asarray(want["data"][0]["embedding"], dtype=np.float32).tobytes()
    argv = ["-m", str(smollm2_path), "-t", "2", "-c", "4096", "-np", "1", "--embeddings", "--pooling", "mean"]
    with sr.BankmlServe(argv) as srv:
        client = openai.OpenAI(api_key="dummy", base_url=f"http://127.0.0.1:{srv.port}/v1")
        res = client.embeddings.create(model="text-embedding-3-small", input="Test base64 embedding output")
        assert np.asarray(res.data[0].embedding, dtype=np.float32).tobytes() == want_bits
        assert res.usage.prompt_tokens == want["usage"]["prompt_tokens"]
        res = client.embeddings.create(model="m", input=["Test base64 embedding output"] * 2,
                                       encoding_format="float")
        assert [np.asarray(d.embedding, dtype=np.float32).tobytes() for d in res.data] == [want_bits] * 2


@pytest.mark.slow
def test_refusals_name_their_reason(smollm2_path):
    """Where llama-server's answer is not reproduced, a 501 that says why."""
    # (several inputs on several slots, split or unified KV cache: replayed by test_embeddings_batch.py)
    argv = ["-m", str(smollm2_path), "-t", "2", "-c", "4096", "-np", "1", "--reranking"]
    with sr.BankmlServe(argv) as srv:
        status, _, body = _post(srv.port, "/embeddings", json.dumps({"input": "x"}))
        assert status == 501 and "rank score" in json.loads(body)["error"]["message"]
        # an empty query and document: nothing to decode (llama-server aborts on its assertion here)
        status, _, body = _post(srv.port, "/rerank", json.dumps({"query": "", "documents": [""]}))
        assert status == 400 and "nothing to rank" in json.loads(body)["error"]["message"]
        status, _, _ = sr.send(srv.port, {"method": "GET", "path": "/health"})
        assert status == 200


def test_base64_is_the_float32_bits():
    """The recorded base64 vectors are the float vectors' bits (what the replay compares byte for byte)."""
    f = _recorded("mean", "/v1/embeddings", {"input": "Test base64 embedding output", "encoding_format": "float"})
    b = _recorded("mean", "/v1/embeddings", {"input": "Test base64 embedding output", "encoding_format": "base64"})
    assert base64.b64decode(b["data"][0]["embedding"]) == \
        np.asarray(f["data"][0]["embedding"], dtype="<f4").tobytes()


@pytest.mark.slow
def test_engine_api_answers_as_the_routes(smollm2_path):
    """bankml.Engine's embeddings / embedding / rerank give llama-server's recorded answers (floats to the bit)."""
    import bankml
    base = ["-m", str(smollm2_path), "-t", "2", "-c", "4096", "-np", "1"]
    cases = [("mean", "/v1/embeddings", {"input": "Test base64 embedding output", "encoding_format": "float"}),
             ("mean", "/v1/embeddings", {"input": ["two", "base64 inputs"], "encoding_format": "base64",
                                         "model": "mine"}),
             ("mean", "/embeddings", {"input": "Hello world"})]
    with bankml.Engine(base + ["--embeddings", "--pooling", "mean"]) as eng:
        for _, path, body in cases:
            want = _recorded("mean", path, body)
            got = eng.embeddings(body) if path == "/v1/embeddings" else eng.embedding(body)
            got = json.loads(json.dumps(got).replace(json.dumps(str(smollm2_path))[1:-1], RECORDED_MODEL))
            assert got == want
        with pytest.raises(bankml.EngineError) as e:
            eng.embeddings({"input": ""})
        assert e.value.status == 400 and e.value.message == "Input content cannot be empty"
    with bankml.Engine(base + ["--reranking"]) as eng:
        body = {"query": "a", "documents": ["Hello", "Hello world", "I believe the meaning of life is"],
                "model": "my-reranker"}
        assert eng.rerank(body) == _recorded("rerank", "/v1/rerank", body)
