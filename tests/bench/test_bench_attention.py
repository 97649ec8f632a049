"""Flash attention speed, bankml's kernels against ggml's own op (the oracle's libggml-cpu through ctypes) on the
same inputs, same thread count. One group per shape, so the two sit side by side:

    PYTHONPATH=. python -m pytest tests/bench/test_bench_attention.py --benchmark-only

The ggml side needs the oracle build (testing/build_oracle.sh); without it those entries are skipped.
SmolLM2-135M shapes: 9 query heads, 3 KV heads, head size 64, scale 0.125; one layer's attention per call.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from bankml.engine._shims import _attention_shim as S

NTH = int(os.environ.get("BANKML_BENCH_THREADS", "2"))
CASES = {
    # name: (n_tokens, n_kv, used cells)
    "decode-one_chunk-kv256": (1, 256, 200),
    "decode-split_kv-kv512": (1, 512, 300),
    "decode-split_kv-kv1024": (1, 1024, 1000),
    "decode-split_kv-kv4096": (1, 4096, 4000),
    "ubatch32-one_chunk-kv512": (32, 512, 400),
    "prefill512-tiled-kv512": (512, 512, 512),
    "prefill512-tiled-kv1536": (512, 1536, 1500),
}


def _inputs(n_tokens, n_kv, used):
    rng = np.random.default_rng(0)
    q = (rng.standard_normal((n_tokens, 9, 64)) * 2).astype(np.float32)
    k = rng.standard_normal((n_kv, 192)).astype(np.float16).view(np.uint16)
    v = rng.standard_normal((n_kv, 192)).astype(np.float16).view(np.uint16)
    m = np.zeros((n_tokens, n_kv), np.float16)
    for t in range(n_tokens):
        m[t, used - n_tokens + t + 1:] = -np.inf
    return q, k, v, m.view(np.uint16)


@pytest.mark.parametrize("name", list(CASES))
def test_bench_bankml(benchmark, name):
    benchmark.group = name
    q, k, v, m = _inputs(*CASES[name])
    A = S.Attention(9, 64, 64, oracle_nth=NTH, nth=NTH)
    out = np.empty((q.shape[0], 9, 64), np.float32)
    benchmark(A, q, k, v, m, k.shape[0], 3, np.float32(0.125), out)


@pytest.mark.parametrize("name", list(CASES))
def test_bench_ggml(benchmark, name):
    benchmark.group = name
    try:
        from testing import ggml_ops
        ggml_ops.lib()
    except Exception as e:  # no oracle build here
        pytest.skip(f"the oracle's libggml is not available: {e}")
    q, k, v, m = _inputs(*CASES[name])
    plan = ggml_ops.FlashAttnPlan(q, k, v, m, n_kv=k.shape[0], n_head_kv=3, scale=0.125, nth=NTH)
    ref = plan.run().copy()
    A = S.Attention(9, 64, 64, oracle_nth=NTH, nth=NTH)
    assert np.array_equal(A(q, k, v, m, k.shape[0], 3, np.float32(0.125)).view(np.uint32), ref.view(np.uint32))
    benchmark(plan.run)
