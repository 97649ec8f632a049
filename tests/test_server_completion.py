"""bankml.server.api.completion, shapes and engine_api on the SmolLM2 model: the shapes llama-server answers in,
streams that add up to the non-stream answer, the in-process Engine giving the HTTP answer, disconnects.
(The oracle's own answers are replayed by tests/test_server_sessions*.py.)"""

from __future__ import annotations

import json
import re

import pytest
from starlette.testclient import TestClient

from bankml.server.app import build_app

pytestmark = pytest.mark.slow

CHAT = {"messages": [{"role": "user", "content": "Name three colors."}], "temperature": 0, "max_tokens": 12}


@pytest.fixture(scope="module")
def client(smollm2_path):
    app = build_app(["-m", str(smollm2_path), "-c", "1024", "-np", "1", "--metrics", "--slot-save-path", "/tmp/"])
    with TestClient(app) as c:
        yield c                       # leaving the client runs the lifespan's shutdown: the model closes


def _events(r) -> list:
    out = []
    for block in r.text.split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: "):]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_chat_shape_and_usage(client):
    r = client.post("/v1/chat/completions", json=CHAT)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json; charset=utf-8"
    b = r.json()
    assert list(b) == ["choices", "created", "model", "system_fingerprint", "object", "usage", "id", "timings"]
    assert re.fullmatch(r"chatcmpl-[0-9A-Za-z]{32}", b["id"]) and b["object"] == "chat.completion"
    assert b["system_fingerprint"] == "b0-unknown"
    ch = b["choices"][0]
    assert list(ch) == ["finish_reason", "index", "message"] and ch["message"]["role"] == "assistant"
    u = b["usage"]
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    assert u["prompt_tokens_details"]["cached_tokens"] == b["timings"]["cache_n"]
    assert b["timings"]["predicted_n"] == u["completion_tokens"]


def test_chat_stream_adds_up_to_the_answer(client):
    whole = client.post("/v1/chat/completions", json=CHAT).json()
    r = client.post("/v1/chat/completions", json=dict(CHAT, stream=True, stream_options={"include_usage": True}))
    assert r.headers["content-type"].startswith("text/event-stream") and r.headers["x-accel-buffering"] == "no"
    ev = _events(r)
    assert ev[-1] == "[DONE]"
    chunks = ev[:-1]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == whole["choices"][0]["message"]["content"]
    final, usage = chunks[-2], chunks[-1]
    assert final["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == whole["usage"]["completion_tokens"]
    assert "timings" in usage and "timings" not in final
    assert len({c["id"] for c in chunks}) == 1


def test_completion_stream_and_return_tokens(client):
    body = {"prompt": "The capital of France is", "temperature": 0, "n_predict": 6, "return_tokens": True}
    whole = client.post("/completion", json=body).json()
    assert len(whole["tokens"]) == whole["tokens_predicted"] == 6 and whole["stop_type"] == "limit"
    ev = _events(client.post("/completion", json=dict(body, stream=True)))
    assert "[DONE]" not in ev
    parts = ev[:-1]
    assert [p["tokens"][0] for p in parts] == whole["tokens"]
    assert "".join(p["content"] for p in parts) == whole["content"]
    assert ev[-1]["stop"] is True and ev[-1]["content"] == "" and ev[-1]["tokens"] == []


def test_v1_completions_and_logprobs(client):
    b = client.post("/v1/completions", json={"prompt": "Hello", "temperature": 0, "max_tokens": 3,
                                             "logprobs": 2}).json()
    assert b["object"] == "text_completion" and b["choices"][0]["finish_reason"] == "length"
    lp = b["choices"][0]["logprobs"]["content"]
    assert len(lp) == 3 and all(len(e["top_logprobs"]) == 2 for e in lp)
    assert all(e["logprob"] == e["top_logprobs"][0]["logprob"] for e in lp)     # greedy: the top candidate
    c = client.post("/v1/chat/completions", json=dict(CHAT, logprobs=True, top_logprobs=1)).json()
    assert len(c["choices"][0]["logprobs"]["content"]) == c["usage"]["completion_tokens"]


def test_errors_keep_llama_server_shapes(client):
    r = client.post("/completion", json={"prompt": "x", "n_predict": -2})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = client.post("/completion", json={"prompt": "word " * 1100})
    assert r.status_code == 400 and r.json()["error"]["type"] == "exceed_context_size_error"
    assert r.json()["error"]["n_ctx"] == 1024
    r = client.post("/completion", json={"prompt": "word " * 1100, "stream": True})     # plain JSON, not SSE
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/json")
    r = client.post("/v1/chat/completions", content=b"{")
    assert r.status_code == 500 and "parse_error" in r.json()["error"]["message"]


def test_slots_metrics_and_slot_files(client, tmp_path):
    client.post("/completion", json={"prompt": "Save me", "temperature": 0, "n_predict": 2})
    s = client.get("/slots").json()[0]
    assert s["is_processing"] is False and s["n_prompt_tokens"] > 0
    m = client.get("/metrics")
    assert m.headers["content-type"] == "text/plain; version=0.0.4"
    assert "llamacpp:tokens_predicted_total" in m.text and "# TYPE llamacpp:n_decode_total counter" in m.text
    n = s["n_prompt_tokens"]
    r = client.post("/slots/0?action=save", json={"filename": "bankml-test-slot.bin"}).json()
    assert r["n_saved"] == n
    assert client.post("/slots/0?action=erase").json() == {"id_slot": 0, "n_erased": n}
    r = client.post("/slots/0?action=restore", json={"filename": "bankml-test-slot.bin"}).json()
    assert r["n_restored"] == n and r["n_read"] > 0
    again = client.post("/completion", json={"prompt": "Save me", "temperature": 0, "n_predict": 2}).json()
    assert again["timings"]["cache_n"] == again["tokens_evaluated"] - 1       # the restored cells are reused
    assert client.post("/slots/0?action=save", json={"filename": "../x"}).status_code == 400


def test_engine_answers_what_http_answers(smollm2_path, client):
    import bankml
    with bankml.Engine(["-m", str(smollm2_path), "-c", "1024", "-np", "1"]) as eng:
        a = eng.chat(CHAT)
        chunks = list(eng.chat_stream(CHAT))
        with pytest.raises(bankml.EngineError) as e:
            eng.completion({"prompt": "x", "n_predict": -2})
    b = client.post("/v1/chat/completions", json=CHAT).json()
    assert a["choices"] == b["choices"] and a["usage"]["completion_tokens"] == b["usage"]["completion_tokens"]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == \
        a["choices"][0]["message"]["content"]
    assert e.value.status == 400
