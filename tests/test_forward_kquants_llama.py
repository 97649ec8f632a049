"""Replay the logits oracle of the llama and qwen3 graphs on K-mix files (tests/oracle/forward/q4_k_m.json and
qwen3_q4_k_m.json, recorded by `testing/record_forward.py q4_k_m qwen3_q4_k_m` from libllama b11192 with
llama-server's context: -c 4096, n_ubatch 512, flash attention, F16 cache, -t 2).

The files: SmolLM2-135M-Instruct Q4_1 and its qwen3 re-description quantized by `bankml quantize ... Q4_K_M`
(llama-quantize's bytes, tests/test_quantize.py): rows of 576 send the mix's Q4_K and Q6_K to their fallbacks
Q5_0 and Q8_0 (attention, gate, up), the ffn_down matrices (rows of 1536) are Q4_K, or Q6_K on the "more bits"
layers; the tied embedding stays Q8_0. What they exercise: Q5_0 and Q6_K products through the graph's sites, and
the repacked Q4_K (q4_K_8x8) down projection with its residual, as llama-server's CPU_REPACK buffer runs it.
40 prompts of 1 .. 1,300 tokens (crossing 64, 256, 512, 1,024) + 24 steps (40 after text-1000, 100 after text-3).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine_replay import assert_covers, open_recorded, record_sets, replay

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

SETS = {k: record_sets(k) for k in ("q4_k_m", "qwen3_q4_k_m")}
FIXTURES = {"q4_k_m": "smollm2_q4_k_m_path", "qwen3_q4_k_m": "smollm2_qwen3_q4_k_m_path"}
QUANTIZE = json.loads((Path(__file__).parent / "oracle" / "quantize" / "ggml.json").read_text())["llama_quantize"]


@pytest.fixture(scope="module", params=list(SETS))
def model(request):
    name = request.param
    if not SETS[name]:
        pytest.fail(f"tests/oracle/forward/{name}.json is missing")
    with open_recorded(request.getfixturevalue(FIXTURES[name]), SETS[name][0]) as m:
        yield name, m


def test_the_records_cover_the_brief_and_are_llama_quantizes_files():
    for name, sets in SETS.items():
        assert sets, f"the {name} record is missing"
        assert_covers(sets[0]["cases"], 1100)
        src = "qwen3" if name.startswith("qwen3") else "smollm2"
        assert sets[0]["model_sha256"] == QUANTIZE[f"{src}-q4_k_m"]["sha256"]
        assert {"Q4_K", "Q6_K", "Q5_0"} <= set(QUANTIZE[f"{src}-q4_k_m"]["tensor_types"].values())


def test_rows_identical(model):
    name, m = model
    n = sum(replay(m, case) for case in SETS[name][0]["cases"])
    assert n == sum(c["steps"] + 1 for c in SETS[name][0]["cases"])
