"""Speed of the weight kernels Gemma 3 needs, bankml against ggml's own op (the oracle's CPU backend through
ctypes: MUL_MAT with the weight in the buffer llama-server gives it, GEGLU) on the same inputs and thread count.
One group per (matrix, columns, threads), so the two sit side by side:

    PYTHONPATH=. python -m pytest tests/bench/test_bench_kquants.py --benchmark-only
    BANKML_BENCH_THREADS=1 ...        # one thread count only (default: 1 and 2)

The ggml side needs the oracle build (testing/build_oracle.sh); without it those entries are skipped. Weights
are seeded random blocks in Gemma 3 270M's shapes (speed does not depend on the values); n = 1 is a decode
step, 512 a prefill micro-batch.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from bankml.engine._shims import _kquant_shim as S
from kquant_inputs import Q4_K, Q5_0, Q6_K, Q8_0, activations, glu_inputs, random_weights

THREADS = [int(t) for t in os.environ.get("BANKML_BENCH_THREADS", "1,2").split(",")]
MATS = {
    # name: (wtype, k, m, repacked by llama-server)
    "attn_q-Q5_0": (Q5_0, 640, 1024, False),
    "ffn_up-Q5_0": (Q5_0, 640, 2048, False),
    "attn_v-Q8_0": (Q8_0, 640, 256, False),
    "attn_output-Q4_K": (Q4_K, 1024, 640, True),
    "ffn_down-Q4_K": (Q4_K, 2048, 640, True),
    "ffn_down-Q6_K": (Q6_K, 2048, 640, False),
    "output-Q8_0": (Q8_0, 640, 262144, False),
}
CASES = [(name, n, nth) for name in MATS for n in ((1,) if name.startswith("output") else (1, 8, 512))
         for nth in THREADS]
GLU = [(n, nth) for n in (1, 512) for nth in THREADS]

_W: dict = {}


def _weights(name):
    if name not in _W:
        wt, k, m, _ = MATS[name]
        _W[name] = random_weights(wt, m, k, 99)
    return _W[name]


def _ids(c):
    return f"{c[0]}-n{c[1]}-t{c[2]}"


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_bench_bankml(benchmark, case):
    name, n, nth = case
    benchmark.group = _ids(case)
    wt, k, m, rep = MATS[name]
    mm = S.MatMul(wt, _weights(name), k, repack=rep)
    x = activations(dict(seed=1, kind="normal"), n, k)
    out = np.empty((n, m), np.float32)
    benchmark(mm, x, nth, out)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_bench_ggml(benchmark, case):
    name, n, nth = case
    benchmark.group = _ids(case)
    try:
        from testing import ggml_kquant_ops as G
        G.lib()
    except Exception as e:  # no oracle build here
        pytest.skip(f"the oracle's libggml is not available: {e}")
    wt, k, m, rep = MATS[name]
    w = _weights(name)
    x = activations(dict(seed=1, kind="normal"), n, k)
    plan = G.MulMat(wt, w, k, n, nth=nth, repack=rep)
    ref = plan.run(x)
    got = S.MatMul(wt, w, k, repack=rep)(x, nth=nth)
    assert np.array_equal(got.view(np.uint32), ref.view(np.uint32))
    benchmark(plan.run_only)
    plan.close()


@pytest.mark.parametrize("case", GLU, ids=lambda c: f"geglu-2048-n{c[0]}-t{c[1]}")
def test_bench_geglu_bankml(benchmark, case):
    n, nth = case
    benchmark.group = f"geglu-2048-n{n}-t{nth}"
    x, g = glu_inputs(dict(seed=3, rows=n, n=2048, scale=3.0))
    benchmark(S.geglu, x, g, nth)


@pytest.mark.parametrize("case", GLU, ids=lambda c: f"geglu-2048-n{c[0]}-t{c[1]}")
def test_bench_geglu_ggml(benchmark, case):
    n, nth = case
    benchmark.group = f"geglu-2048-n{n}-t{nth}"
    try:
        from testing import ggml_kquant_ops as G
        G.lib()
    except Exception as e:
        pytest.skip(f"the oracle's libggml is not available: {e}")
    x, g = glu_inputs(dict(seed=3, rows=n, n=2048, scale=3.0))
    plan = G.GegluPlan(x, g, nth=nth)
    assert np.array_equal(plan.run().view(np.uint32), S.geglu(x, g, nth=nth).view(np.uint32))
    benchmark(plan.run)
