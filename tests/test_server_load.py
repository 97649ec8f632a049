"""Load on bankml-serve: 8 concurrent clients x 20 requests on loopback, all answered, each answer identical to
the same request's answer when it is served alone; a stream cut by its client frees the slot at once. At -np 1
and at -np 4 with continuous batching.

The requests carry `cache_prompt: false`, so that an answer does not depend on what the slot held before
(with the prompt cache the reused prefix, and so `cached_tokens`, depends on the order requests arrive in).
"""

from __future__ import annotations

import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import server_replay as sr

C = "/v1/chat/completions"
TOPICS = ["the sea", "a cat", "Paris", "rain", "a robot", "bread", "the moon", "trains"]


def requests_of(client: int) -> list[dict]:
    out = []
    for j in range(20):
        topic = TOPICS[(client + j) % len(TOPICS)]
        common = {"temperature": 0, "cache_prompt": False}
        if j % 4 == 0:
            out.append({"method": "POST", "path": C, "body": {
                "messages": [{"role": "user", "content": f"One sentence about {topic}."}], "max_tokens": 8, **common}})
        elif j % 4 == 1:
            out.append({"method": "POST", "path": C, "body": {
                "messages": [{"role": "user", "content": f"A word for {topic}?"}], "max_tokens": 6, "stream": True,
                **common}})
        elif j % 4 == 2:
            out.append({"method": "POST", "path": "/completion", "body": {
                "prompt": f"Facts about {topic}:", "n_predict": 6, "temperature": 0.8, "seed": client * 100 + j,
                "cache_prompt": False}})
        else:
            out.append({"method": "POST", "path": "/v1/completions", "body": {
                "prompt": f"{topic} is", "max_tokens": 5, **common}})
    return out


def _comparable(answer: dict, model: str) -> dict:
    a = sr.normalize(answer, model)
    if isinstance(a.get("json"), dict):
        # with several slots, which one a request gets depends on what else is running
        a["json"] = {k: v for k, v in a["json"].items() if k != "id_slot"}
    return a


# -np 1: one request at a time; -np 4 (split cache): continuous batching (bankml.server.batching), where a
# request's rows share forward passes with the others' (with these short prompts no row's bits change: the
# answers must equal the answers served alone)
@pytest.fixture(scope="module", params=["1", "4"], ids=["np1", "np4-batched"])
def serve(request, smollm2_path):
    argv = ["-m", str(smollm2_path), "-t", "2", "-c", "4096", "-np", request.param, "--jinja", "--reasoning",
            "off", "--no-webui"]
    with sr.BankmlServe(argv) as srv:
        yield srv


@pytest.mark.slow
def test_concurrent_clients_get_the_answers_served_alone(serve, smollm2_path):
    model = str(smollm2_path)
    per_client = [requests_of(c) for c in range(8)]
    distinct = {sr.dumps(r): r for reqs in per_client for r in reqs}
    alone = {k: _comparable(serve.answer(r), model) for k, r in distinct.items()}

    def client(reqs):
        return [(sr.dumps(r), _comparable(serve.answer(r), model)) for r in reqs]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(client, per_client))
    assert sum(len(r) for r in results) == 160
    bad = []
    for res in results:
        for key, got in res:
            d = sr.differences(alone[key], got)
            if d:
                bad.append(f"{key[:120]}: {d[0][:400]}")
    assert not bad, f"{len(bad)} of 160 answers differ from the request served alone:\n" + "\n".join(bad[:5])


@pytest.mark.slow
def test_cut_stream_frees_the_slot(serve):
    body = (b'{"messages":[{"role":"user","content":"Tell me a very long story."}],"max_tokens":3000,'
            b'"ignore_eos":true,"temperature":0,"stream":true}')
    s = socket.create_connection(("127.0.0.1", serve.port), timeout=60)
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    got = b""
    while got.count(b"data: ") < 3:
        got += s.recv(4096)
    s.close()
    # 3,000 tokens would take far longer than this; the next request must not wait for them
    t = time.time()
    status, _, _ = sr.send(serve.port, {"method": "POST", "path": "/completion", "body": {
        "prompt": "Hi", "n_predict": 4, "temperature": 0}})
    assert status == 200
    assert time.time() - t < 10
    slots = sr.answer_record(*sr.send(serve.port, {"method": "GET", "path": "/slots"}))["json"]
    assert not any(s["is_processing"] for s in slots)
