"""The `openai` Python package (a client no one here wrote) against bankml-serve: chat, stream, logprobs,
completions and an error (n = 2 on one slot), each compared with what llama-server b11192 answered to the
same body (session `openai_client` of tests/oracle/server/sessions.json).
"""

from __future__ import annotations

import openai   # a test extra: `pip install '.[test]'` brings it
import pytest

import server_replay as sr

SESSION = next(s for s in sr.load("sessions.json") if s["name"] == "openai_client")
Q = [{"role": "user", "content": "What is the capital of France?"}]


def want(i: int) -> dict:
    step = SESSION["steps"][i]
    return step["answer"]


@pytest.fixture(scope="module")
def client(smollm2_path):
    with sr.BankmlServe(sr.server_argv(SESSION["flags"], str(smollm2_path))) as srv:
        yield openai.OpenAI(base_url=f"http://127.0.0.1:{srv.port}/v1", api_key="none", max_retries=0)


def test_requests_are_what_the_client_sends():
    bodies = [s["request"]["body"] for s in SESSION["steps"]]
    assert bodies[0] == {"messages": Q, "model": "bankml", "max_tokens": 16, "temperature": 0}


@pytest.mark.slow
def test_chat(client):
    r = client.chat.completions.create(model="bankml", messages=Q, max_tokens=16, temperature=0)
    w = want(0)["json"]
    assert r.choices[0].message.content == w["choices"][0]["message"]["content"]
    assert r.choices[0].finish_reason == w["choices"][0]["finish_reason"]
    assert r.usage.model_dump(exclude_none=True) == w["usage"]
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-")


@pytest.mark.slow
def test_stream(client):
    chunks = list(client.chat.completions.create(model="bankml", messages=Q, max_tokens=16, stream=True,
                                                 temperature=0))
    events = [e["data"] for e in want(1)["sse"] if isinstance(e.get("data"), dict)]
    assert [c.choices[0].delta.content if c.choices else None for c in chunks] == \
        [e["choices"][0]["delta"].get("content") if e["choices"] else None for e in events]
    assert [c.choices[0].finish_reason for c in chunks] == [e["choices"][0]["finish_reason"] for e in events]


@pytest.mark.slow
def test_logprobs(client):
    r = client.chat.completions.create(model="bankml", messages=Q, logprobs=True, max_tokens=6, temperature=0,
                                       top_logprobs=2)
    w = want(2)["json"]["choices"][0]["logprobs"]["content"]
    got = r.choices[0].logprobs.content
    assert [(e.token, e.logprob, e.bytes) for e in got] == [(e["token"], e["logprob"], e["bytes"]) for e in w]
    assert [[(t.token, t.logprob) for t in e.top_logprobs] for e in got] == \
        [[(t["token"], t["logprob"]) for t in e["top_logprobs"]] for e in w]


@pytest.mark.slow
def test_error_is_raised_with_llama_servers_body(client):
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model="bankml", messages=Q, max_tokens=8, n=2, temperature=0)
    w = want(3)
    assert w["status"] == 400 and ei.value.status_code == 400
    assert ei.value.body == w["json"]["error"]


@pytest.mark.slow
def test_completions(client):
    r = client.completions.create(model="bankml", prompt="The capital of France is", max_tokens=8, temperature=0)
    w = want(4)["json"]
    assert r.choices[0].text == w["choices"][0]["text"]
    assert r.choices[0].finish_reason == w["choices"][0]["finish_reason"]
    assert r.usage.model_dump(exclude_none=True) == w["usage"]
