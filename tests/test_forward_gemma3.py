"""Replay the Gemma 3 logits oracle (tests/oracle/forward/gemma3.json, recorded by
testing/record_forward_gemma3.py from libllama b11192 with llama-server's context: -c 4096, n_ubatch 512,
flash attention, F16 cache, swa_full off): every recorded row, a whole prompt's last-token logits and then each
greedy decode step, must have the same float32 bits (hashes of the bytes) and the same argmax.

The prompts (1 .. 1500 tokens) cross 64 (the tiled attention), 256 (n_kv padding), 512 (the ubatch and the
sliding window) and 1024 (the SWA cache's size, where its cells start to be reused), and the decode steps cross
512 and 1024 from below. What they exercise: the gemma3 graph (src/kernels/forward_gemma3.c), the Q5_0 / Q8_0 /
Q6_K products and the repacked Q4_K ones (gemm and gemv split by the node's columns), GEGLU, NEOX RoPE with the
two bases, and the two KV caches of llama_kv_cache_iswa.
"""

from __future__ import annotations

import pytest

from engine_replay import assert_covers, open_recorded, record_sets, replay

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

SETS = record_sets("gemma3")


@pytest.fixture(scope="module")
def gemma3(gemma3_path):
    with open_recorded(gemma3_path, SETS[0]) as m:
        yield m


def test_the_record_covers_the_brief():
    # prompts of 1 .. 1500 tokens; decode steps that cross the window and the SWA cache's size
    assert_covers(SETS[0]["cases"], 1500)
    assert max(len(c["prompt"]) for c in SETS[0]["cases"]) == 1500


@pytest.mark.parametrize("case", SETS[0]["cases"] if SETS else [], ids=lambda c: c["id"])
def test_gemma3_rows_identical(gemma3, case):
    assert replay(gemma3, case) == case["steps"] + 1
