"""POST /api/chat and /api/generate through the app (Starlette's TestClient): the answer equals
/v1/chat/completions' for the same meaning, token for token; streams; generate's context; load / unload;
num_ctx's truncation (server/routes.go ChatHandler / GenerateHandler, v0.13.3)."""

import json

import pytest
from starlette.testclient import TestClient

from bankml.server.app import build_app

NAME = "smollm2-135m-instruct-q4_1"
SAMPLING = {"temperature": 0.8, "top_k": 40, "top_p": 0.9, "min_p": 0.0, "typical_p": 1.0, "repeat_last_n": 64,
            "repeat_penalty": 1.1, "presence_penalty": 0.0, "frequency_penalty": 0.0, "stop": []}


@pytest.fixture(scope="module")
def client(smollm2_path):
    app = build_app(["-m", str(smollm2_path), "-c", "4096", "-np", "1", "-t", "2", "--jinja", "--reasoning", "off"])
    with TestClient(app) as c:
        yield c


def _v1(client, msgs, n, seed):
    r = client.post("/v1/chat/completions", json=dict(SAMPLING, messages=msgs, seed=seed, n_predict=n))
    return r.json()


MSGS = [{"role": "user", "content": "Name a color."}]


def test_chat_equals_openai_chat(client):
    r = client.post("/api/chat", json={"model": NAME, "messages": MSGS, "stream": False,
                                       "options": {"seed": 7, "num_predict": 12}})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json; charset=utf-8"
    a = r.json()
    b = _v1(client, MSGS, 12, 7)
    assert a["message"] == {"role": "assistant", "content": b["choices"][0]["message"]["content"]}
    assert a["done"] is True and a["done_reason"] == {"length": "length", "stop": "stop"}[b["choices"][0]["finish_reason"]]
    assert a["prompt_eval_count"] == b["usage"]["prompt_tokens"] and a["eval_count"] == b["usage"]["completion_tokens"]
    assert list(a)[:5] == ["model", "created_at", "message", "done", "done_reason"]
    assert a["created_at"].endswith("Z")


def test_stream_equals_non_stream(client):
    body = {"model": NAME, "messages": MSGS, "options": {"seed": 3, "num_predict": 10}}
    r = client.post("/api/chat", json=body)
    assert r.headers["content-type"] == "application/x-ndjson"
    lines = [json.loads(x) for x in r.text.splitlines()]
    assert all(not x["done"] for x in lines[:-1]) and lines[-1]["done"] and lines[-1]["message"]["content"] == ""
    text = "".join(x["message"]["content"] for x in lines)
    whole = client.post("/api/chat", json=dict(body, stream=False)).json()
    assert text == whole["message"]["content"] and lines[-1]["eval_count"] == whole["eval_count"]


def test_generate_and_its_context(client):
    r = client.post("/api/generate", json={"model": NAME, "prompt": "Hi", "stream": False,
                                           "options": {"seed": 5, "num_predict": 6}}).json()
    b = _v1(client, [{"role": "user", "content": "Hi"}], 6, 5)
    assert r["response"] == b["choices"][0]["message"]["content"]
    assert r["context"][:r["prompt_eval_count"]] and len(r["context"]) >= r["prompt_eval_count"]
    r2 = client.post("/api/generate", json={"model": NAME, "prompt": "More", "context": r["context"],
                                            "stream": False, "options": {"seed": 5, "num_predict": 4}}).json()
    assert r2["done"] and r2["prompt_eval_count"] > r["prompt_eval_count"]
    raw = client.post("/api/generate", json={"model": NAME, "prompt": "Hi", "raw": True, "stream": False,
                                             "options": {"num_predict": 3}}).json()
    assert "context" not in raw


def test_load_and_unload(client):
    r = client.post("/api/chat", json={"model": NAME, "messages": []}).json()
    assert (r["done"], r["done_reason"], r["message"]) == (True, "load", {"role": "assistant", "content": ""})
    r = client.post("/api/generate", json={"model": NAME, "keep_alive": 0}).json()
    assert (r["done"], r["done_reason"]) == (True, "unload")
    r = client.post("/api/generate", json={"model": NAME, "prompt": "Hi", "stream": False,
                                           "options": {"num_predict": 2}})
    assert r.status_code == 200 and r.json()["load_duration"] > 0


def test_num_ctx_truncates_history(client):
    long = [{"role": "user", "content": "word " * 200}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "Name a color."}]
    body = {"model": NAME, "messages": long, "_debug_render_only": True, "options": {"num_ctx": 64}}
    short = client.post("/api/chat", json=body).json()["_debug_info"]["rendered_template"]
    assert "word" not in short and "ok" in short and "Name a color." in short    # the walk kept long[1:]
    full = client.post("/api/chat", json=dict(body, options={})).json()["_debug_info"]["rendered_template"]
    assert "word word" in full
    r = client.post("/api/chat", json={"model": NAME, "messages": long, "stream": False,
                                       "options": {"num_ctx": 64, "seed": 1, "num_predict": 5}}).json()
    b = _v1(client, long[1:], 5, 1)
    assert r["message"]["content"] == b["choices"][0]["message"]["content"]


def test_errors(client):
    r = client.post("/api/chat", json={"model": "", "messages": MSGS})
    assert (r.status_code, r.json()) == (400, {"error": "model is required"})
    r = client.post("/api/chat", json={"model": "nope", "messages": MSGS})
    assert (r.status_code, r.json()) == (404, {"error": "model 'nope' not found"})
    r = client.post("/api/chat", json={"model": NAME, "messages": MSGS, "options": {"top_k": "x"}})
    assert (r.status_code, r.json()) == (500, {"error": 'option "top_k" must be of type integer'})
    r = client.post("/api/chat", json={"model": NAME, "messages": MSGS, "think": True})
    assert (r.status_code, r.json()) == (400, {"error": f'"{NAME}" does not support thinking'})
    r = client.post("/api/chat", content=b"")
    assert (r.status_code, r.json()) == (400, {"error": "missing request body"})
    r = client.post("/api/embed", json={"model": NAME, "input": "x"})
    assert r.status_code == 200 and [len(v) for v in r.json()["embeddings"]] == [576]


def test_logprobs_and_tools(client):
    r = client.post("/api/chat", json={"model": NAME, "messages": MSGS, "stream": False, "logprobs": True,
                                       "top_logprobs": 2, "options": {"seed": 2, "num_predict": 4}}).json()
    lp = r["logprobs"]
    assert len(lp) == r["eval_count"] - (1 if r["done_reason"] == "stop" else 0)
    assert "".join(e["token"] for e in lp) == r["message"]["content"]
    assert all(len(e["top_logprobs"]) == 2 and e["logprob"] <= 0 for e in lp)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    r = client.post("/api/chat", json={"model": NAME, "messages": MSGS, "tools": tools})
    assert r.status_code in (400, 501)
