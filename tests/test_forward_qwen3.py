"""Replay the qwen3 logits oracle (tests/oracle/forward/qwen3.json, recorded by `testing/record_forward.py qwen3`
from libllama b11192 with llama-server's context: -c 4096, n_ubatch 512, flash attention, F16 cache) on the
SmolLM2 Q4_1 file re-described as qwen3 (bankml.models.redescribe: the same weights, per-layer attn_q_norm /
attn_k_norm by a fixed rule; its answers are not sensible text, its logits are the judge). Every recorded row, a
whole prompt's last-token logits and then each greedy decode step, must have the same float32 bits (hashes of
the bytes) and the same argmax.

The prompts (1 .. 1300 tokens) cross 64 (the tiled attention), 256 (n_kv padding), 512 (the ubatch) and 1024,
and decode steps cross 512 and 1024 from below. What they exercise: the qwen3 graph (src/kernels/forward_llama.c
with the per-head Q/K RMS norm and NEOX RoPE step of forward_common.c). A Q8_0 KV cache and the context shift
(NEOX) are verified by tests/test_context_shift.py, serving by tests/test_server_qwen3.py; what is refused for
qwen3 (not recorded): several sequences in one decode (the server's batching of slots) and embeddings.

The same prompts and steps on that file quantized by `bankml quantize` in the Bonsai types (records
qwen3_q2_0.json and qwen3_q1_0.json, `testing/record_forward.py qwen3_q2_0 qwen3_q1_0`): Q2_0 (every matrix but
the Q8_0 embedding) and Q1_0 (the ffn_down matrices; the rows of 576 are not a multiple of 128, kept Q8_0 by
--tensor-type as llama-quantize needs). The files are llama-quantize's bytes (tests/test_quantize.py); they run
src/kernels/quants_bonsai.c.
"""

from __future__ import annotations

import pytest

from engine_replay import assert_covers, open_recorded, record_sets, replay

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

SETS = record_sets("qwen3")
BONSAI = {t: record_sets(f"qwen3_{t}") for t in ("q2_0", "q1_0")}


@pytest.fixture(scope="module")
def qwen3(smollm2_qwen3_path):
    with open_recorded(smollm2_qwen3_path, SETS[0]) as m:
        yield m


def test_the_record_covers_the_brief():
    assert_covers(SETS[0]["cases"], 1100)


@pytest.mark.parametrize("case", SETS[0]["cases"] if SETS else [], ids=lambda c: c["id"])
def test_qwen3_rows_identical(qwen3, case):
    assert replay(qwen3, case) == case["steps"] + 1


def test_what_is_not_recorded_is_refused(qwen3):
    # (several sequences in one decode are recorded: tests/test_multiseq.py's qwen3 records)
    qwen3.cache.clear()
    with pytest.raises(NotImplementedError, match="embeddings of a qwen3 model"):
        qwen3.embed([1, 2, 3], 0)
    assert qwen3.cache.n_past == 0


def _open_bonsai(request, t):
    if not BONSAI[t]:
        pytest.fail(f"tests/oracle/forward/qwen3_{t}.json is missing")
    return open_recorded(request.getfixturevalue(f"smollm2_qwen3_{t}_path"), BONSAI[t][0])


@pytest.fixture(scope="module")
def qwen3_q2_0(request):
    with _open_bonsai(request, "q2_0") as m:
        yield m


@pytest.fixture(scope="module")
def qwen3_q1_0(request):
    with _open_bonsai(request, "q1_0") as m:
        yield m


def test_the_bonsai_records_cover_the_brief():
    for t, sets in BONSAI.items():
        assert sets, f"the qwen3_{t} record is missing"
        assert_covers(sets[0]["cases"], 1100)


def _cases(t):
    return BONSAI[t][0]["cases"] if BONSAI[t] else []


@pytest.mark.parametrize("case", _cases("q2_0"), ids=lambda c: c["id"])
def test_qwen3_q2_0_rows_identical(qwen3_q2_0, case):
    assert replay(qwen3_q2_0, case) == case["steps"] + 1


@pytest.mark.parametrize("case", _cases("q1_0"), ids=lambda c: c["id"])
def test_qwen3_q1_0_rows_identical(qwen3_q1_0, case):
    assert replay(qwen3_q1_0, case) == case["steps"] + 1


def test_the_bonsai_files_hold_the_types(qwen3_q2_0, qwen3_q1_0):
    assert {"Q2_0", "Q8_0"} == qwen3_q2_0.weight_types
    assert {"Q1_0", "Q8_0"} == qwen3_q1_0.weight_types
