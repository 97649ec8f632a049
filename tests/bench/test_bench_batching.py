"""Aggregate decode through bankml.Engine with 1, 2 and 4 concurrent streams at -np 4 (split cache: continuous
batching, bankml.server.batching), and the same 4 streams at -np 4 with -kvu (served one at a time) for the
comparison. Each stream: a short prompt, 64 greedy tokens (ignore_eos). One group, so they sit side by side;
divide the streams' tokens (`extra_info["tokens"]`) by the time for tokens/s:

    python -m pytest tests/bench/test_bench_batching.py --benchmark-only
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

pytestmark = pytest.mark.slow

N_NEW = 64


def body(i: int) -> dict:
    return {"prompt": f"Story number {i}: once upon a time", "n_predict": N_NEW, "temperature": 0,
            "cache_prompt": False, "ignore_eos": True}


def _engine(path, *extra):
    import bankml
    return bankml.Engine(["-m", str(path), "-c", "4096", "-np", "4", "-t", "2", *extra])


@pytest.fixture(scope="module")
def batched(smollm2_path):
    eng = _engine(smollm2_path)
    assert eng.ctx.worker.batcher is not None
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def unbatched(smollm2_path):
    eng = _engine(smollm2_path, "-kvu")
    assert eng.ctx.worker.batcher is None
    yield eng
    eng.close()


def _streams(eng, n: int) -> int:
    with ThreadPoolExecutor(n) as ex:
        answers = list(ex.map(lambda i: eng.completion(body(i)), range(n)))
    assert all(a["tokens_predicted"] == N_NEW for a in answers)
    return n * N_NEW


@pytest.mark.benchmark(group="aggregate-decode")
@pytest.mark.parametrize("n", [1, 2, 4])
def test_batched_streams(benchmark, batched, n):
    benchmark.extra_info["tokens"] = benchmark.pedantic(_streams, args=(batched, n), rounds=3, iterations=1)


@pytest.mark.benchmark(group="aggregate-decode")
def test_unbatched_four_streams(benchmark, unbatched):
    benchmark.extra_info["tokens"] = benchmark.pedantic(_streams, args=(unbatched, 4), rounds=3, iterations=1)
