"""The server's overhead per request: the same greedy request (a 16-token prompt, 8 new tokens, cache_prompt
false) through bankml-serve's HTTP app (in-process ASGI, no socket), through bankml.Engine, and as the bare loop
(Model.decode + Sampler, no slots, no shapes). One group, so the three sit side by side:

    python -m pytest tests/bench/test_bench_server.py --benchmark-only
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

BODY = {"prompt": "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n",
        "n_predict": 8, "temperature": 0, "cache_prompt": False, "ignore_eos": True}


@pytest.fixture(scope="module")
def engine(smollm2_path):
    import bankml
    eng = bankml.Engine(["-m", str(smollm2_path), "-c", "1024", "-np", "1"])
    yield eng
    eng.close()


@pytest.mark.benchmark(group="server-request")
def test_http_app(benchmark, engine):
    from starlette.testclient import TestClient

    from bankml.server.app import build_app
    with TestClient(build_app(ctx=engine.ctx)) as c:
        r = benchmark(lambda: c.post("/completion", json=BODY))
    assert r.status_code == 200 and r.json()["tokens_predicted"] == 8


@pytest.mark.benchmark(group="server-request")
def test_engine_api(benchmark, engine):
    r = benchmark(lambda: engine.completion(BODY))
    assert r["tokens_predicted"] == 8


@pytest.mark.benchmark(group="server-request")
def test_bare_loop(benchmark, engine):
    from bankml import sampling
    from bankml.sampling.sampler import Sampler
    ctx = engine.ctx
    tok = ctx.tokenizer
    ids = tok.tokenize(BODY["prompt"], True, True)
    params = sampling.from_request(dict(BODY), ctx.sampling_defaults, tok)
    model, cache = ctx.model, ctx.slots.slots[0].cache

    def run():
        def go():
            cache.truncate(0)
            model.decode(ids, 0, cache=cache)
            s = Sampler(params, tok)
            s.begin(ids)
            out = []
            for i in range(8):
                t = s.sample(model.logits())
                s.accept(t)
                out.append(t)
                if i < 7:
                    model.decode([t], len(ids) + i, cache=cache)
            return out
        return ctx.worker.call(go)
    out = benchmark(run)
    assert len(out) == 8
