"""Per-request overhead of Ollama's /api/chat over the engine, beside /v1/chat/completions', both through one
bankml-serve's HTTP API (`-t 2 -c 4096 -np 1 --jinja --reasoning off --no-webui`, loopback), in one run:

    python -m pytest tests/bench/test_bench_ollama.py --benchmark-only -s

The same request in each API's words (one short question, 8 greedy tokens, seeded; Ollama's DefaultOptions
spelled out for /v1), so both answer the same tokens (checked). A request's wall time is measured at the
client (HTTP and JSON included); the engine's share is what the server reports it spent evaluating (Ollama's
prompt_eval_duration + eval_duration; llama-server's timings.prompt_ms + predicted_ms); the overhead is the
difference. No timing is asserted; the medians go to extra_info and to PERFORMANCE.md ("Ollama API").
"""

from __future__ import annotations

import os
import statistics
import time

import pytest

from ollama_serve import MODEL, call, serve

pytestmark = pytest.mark.slow

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
OLLAMA = {"model": MODEL, "messages": QUESTION, "stream": False,
          "options": {"temperature": 0, "seed": 42, "num_predict": 8}}
V1 = {"messages": QUESTION, "max_tokens": 8, "temperature": 0, "seed": 42, "top_k": 40, "top_p": 0.9,
      "min_p": 0.0, "typical_p": 1.0, "repeat_last_n": 64, "repeat_penalty": 1.1, "presence_penalty": 0.0,
      "frequency_penalty": 0.0}
CASES = {"/api/chat": OLLAMA, "/v1/chat/completions": V1}
RESULTS: dict[str, dict] = {}


def _engine_s(path: str, res: dict) -> float:
    if path == "/api/chat":
        return (res.get("prompt_eval_duration", 0) + res.get("eval_duration", 0)) / 1e9
    return (res["timings"]["prompt_ms"] + res["timings"]["predicted_ms"]) / 1e3


def _text(path: str, res: dict) -> str:
    return res["message"]["content"] if path == "/api/chat" else res["choices"][0]["message"]["content"]


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("ollama-bench-models")) as srv:
        yield srv.port


@pytest.mark.parametrize("path", sorted(CASES))
def test_request(benchmark, port, path):
    benchmark.group = "ollama vs openai chat (bankml-serve, 8 greedy tokens)"
    walls, engines, texts = [], [], []

    def run():
        t0 = time.perf_counter()
        a = call(port, "POST", path, body=CASES[path])
        walls.append(time.perf_counter() - t0)
        assert a.status == 200, a.body
        res = a.json()
        engines.append(_engine_s(path, res))
        texts.append(_text(path, res))

    benchmark.pedantic(run, rounds=20, warmup_rounds=1)
    walls, engines = walls[1:], engines[1:]           # the warm-up round is not counted
    assert len(set(texts)) == 1
    RESULTS[path] = {"wall_ms": statistics.median(walls) * 1e3, "engine_ms": statistics.median(engines) * 1e3,
                     "overhead_ms": statistics.median(w - e for w, e in zip(walls, engines)) * 1e3,
                     "text": texts[-1]}
    benchmark.extra_info.update({k: round(v, 3) for k, v in RESULTS[path].items() if k != "text"},
                                load=os.getloadavg()[0])


def test_overhead_side_by_side(benchmark):
    benchmark.group = "ollama vs openai chat: /api/chat overhead - /v1/chat/completions overhead (ms)"
    if len(RESULTS) < len(CASES):
        pytest.skip("both APIs must have run in this session")
    assert RESULTS["/api/chat"]["text"] == RESULTS["/v1/chat/completions"]["text"]
    extra = RESULTS["/api/chat"]["overhead_ms"] - RESULTS["/v1/chat/completions"]["overhead_ms"]
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info.update(extra_overhead_ms=round(extra, 3))
    print("\nOllama /api/chat vs /v1/chat/completions (median ms):",
          {p: {k: round(v, 2) for k, v in r.items() if k != "text"} for p, r in RESULTS.items()},
          f"/api/chat extra overhead {extra:.2f} ms; load", os.getloadavg())
