"""bankml on Ray Serve (docs/scale.md): 2 replicas against 1 on a local Ray cluster (ray.init(num_cpus=2), one CPU
and one compute thread a replica), under a mixed load of 8 conversations (3 turns each, 4 clients at once), and
the routing overhead per request (GET /health and a 1-token completion through Ray's proxy and the ingress,
against the same requests to one bankml-serve):

    python -m pytest tests/bench/test_bench_ray.py --benchmark-only

extra_info of the load runs: tokens_per_s (generated tokens over the wall time), prefix_hit_rate (the share of
follow-up turns whose answer reports cached tokens) and cached_share (cached over prompt tokens of the follow-ups).
Skipped by default like every benchmark (--benchmark-skip); needs `pip install 'bankml[ray]'`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

ray = pytest.importorskip("ray", reason="Ray Serve is not installed (pip install 'bankml[ray]')")
serve = pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'bankml[ray]')")

import server_replay as sr  # noqa: E402

pytestmark = pytest.mark.slow

FLAGS = ["-c", "4096", "-np", "1", "-t", "2", "--jinja", "--reasoning", "off", "--no-webui"]
TOPICS = ["lighthouses", "bread", "glaciers", "chess", "owls", "copper", "tides", "violins"]


@pytest.fixture(scope="module")
def cluster():
    tmp = tempfile.mkdtemp(prefix="bkray", dir="/tmp")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=tmp,
             object_store_memory=80 * 1024 * 1024)
    port = sr.free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    yield port
    serve.shutdown()
    ray.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)


def _deploy(model: str, replicas: int) -> None:
    from bankml.ray import serving
    serve.run(serving.application(["-m", model] + FLAGS, replicas=replicas, replica_cpus=1), name="bankml",
              route_prefix="/")


def _conversation(port: int, topic: str) -> list[dict]:
    messages, usages = [], []
    for turn in range(3):
        messages.append({"role": "user", "content": f"Tell me one more fact about {topic}." if turn else
                         f"Tell me a fact about {topic}."})
        req = {"method": "POST", "path": "/v1/chat/completions",
               "body": {"messages": messages, "max_tokens": 24, "temperature": 0}}
        status, _, body = sr.send(port, req)
        assert status == 200
        answer = json.loads(body)
        messages.append(answer["choices"][0]["message"])
        usages.append(answer["usage"])
    return usages


def _load(port: int) -> dict:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda t: _conversation(port, t), TOPICS))
    wall = time.perf_counter() - t0
    generated = sum(u["completion_tokens"] for run in runs for u in run)
    follow = [u for run in runs for u in run[1:]]
    cached = [u["prompt_tokens_details"]["cached_tokens"] for u in follow]
    return {"tokens_per_s": generated / wall,
            "prefix_hit_rate": sum(c > 0 for c in cached) / len(follow),
            "cached_share": sum(cached) / sum(u["prompt_tokens"] for u in follow)}


@pytest.mark.benchmark(group="ray-load")
@pytest.mark.parametrize("replicas", [1, 2])
def test_mixed_load(benchmark, cluster, smollm2_path, replicas):
    _deploy(str(smollm2_path), replicas)
    stats = benchmark.pedantic(lambda: _load(cluster), rounds=1, iterations=1)
    benchmark.extra_info.update(stats)
    assert stats["prefix_hit_rate"] > 0


HEALTH = {"method": "GET", "path": "/health"}
ONE = {"method": "POST", "path": "/completion",
       "body": {"prompt": "Hello", "n_predict": 1, "temperature": 0, "cache_prompt": False}}


@pytest.mark.benchmark(group="ray-overhead")
@pytest.mark.parametrize("req", [HEALTH, ONE], ids=["health", "one-token"])
def test_through_ray(benchmark, cluster, smollm2_path, req):
    _deploy(str(smollm2_path), 1)
    status = benchmark(lambda: sr.send(cluster, req)[0])
    assert status == 200


@pytest.mark.benchmark(group="ray-overhead")
@pytest.mark.parametrize("req", [HEALTH, ONE], ids=["health", "one-token"])
def test_one_server(benchmark, smollm2_path, req):
    with sr.BankmlServe(["-m", str(smollm2_path)] + FLAGS) as srv:
        status = benchmark(lambda: sr.send(srv.port, req)[0])
    assert status == 200
