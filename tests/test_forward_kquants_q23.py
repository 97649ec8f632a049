"""Replay the logits oracle of the llama and qwen3 graphs on files with Q2_K / Q3_K matrices
(tests/oracle/forward/q2_k_overrides.json, q3_k_s_overrides.json and qwen3_q2_k_overrides.json, recorded by
`testing/record_forward.py q2_k_overrides q3_k_s_overrides qwen3_q2_k_overrides` from libllama b11192 with
llama-server's context: -c 4096, n_ubatch 512, flash attention, F16 cache, -t 2).

The files (testing/record_forward.py Q23_SETS): SmolLM2-135M-Instruct F16 quantized by `bankml quantize` as Q2_K
and Q3_K_S, and its qwen3 re-description as Q2_K, each with --tensor-type overrides that keep attention, gate and
up Q8_0 (SmolLM2's rows of 576 would send them to Q4_0, not played yet): ffn_down (rows of 1536) is Q2_K, Q3_K
(the Q3_K_S mix's type), or Q2_K on layers 0-9 and Q3_K after. What they exercise: ggml_vec_dot_q2_K_q8_K and
ggml_vec_dot_q3_K_q8_K per output (no repack, no sgemm on the AVX2 build) at the down projection, prefill and
decode. 40 prompts of 1 .. 1,300 tokens (crossing 64, 256, 512, 1,024) + 24 steps (40 after text-1000, 100 after
text-3).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine_replay import assert_covers, open_recorded, record_sets, replay
from quantize_cases import Q23_OVERRIDES, llama_quantize_key

ORACLE = Path(__file__).parent / "oracle"

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

SETS = {k: record_sets(k) for k in ("q2_k_overrides", "q3_k_s_overrides", "qwen3_q2_k_overrides")}
# the matrix types each file holds (checked on the file the fixture makes, against the record's sha256)
TYPES = {"q2_k_overrides": {"Q8_0", "Q2_K"}, "q3_k_s_overrides": {"Q8_0", "Q3_K"},
         "qwen3_q2_k_overrides": {"Q8_0", "Q2_K", "Q3_K"}}


def test_the_records_cover_the_brief():
    for name, sets in SETS.items():
        assert sets, f"the {name} record is missing"
        assert_covers(sets[0]["cases"], 1100)


def test_the_files_are_llama_quantizes():
    # each record's file is the one the oracle's llama-quantize writes with the same mix and --tensor-type overrides
    # (tests/oracle/quantize/ggml.json; tests/test_quantize.py makes it with `bankml quantize` and compares)
    lq = json.loads((ORACLE / "quantize" / "ggml.json").read_text())["llama_quantize"]
    for name, (src, mix, tts) in Q23_OVERRIDES.items():
        rec = lq[llama_quantize_key(src, mix, tts)]
        assert rec["returncode"] == 0 and rec["sha256"] == SETS[name][0]["model_sha256"]
        assert set(rec["tensor_types"].values()) - {"F32"} == TYPES[name]


@pytest.mark.parametrize("name", list(SETS))
def test_rows_identical(name, smollm2_q23_path):
    if not SETS[name]:
        pytest.fail(f"tests/oracle/forward/{name}.json is missing")
    cases = SETS[name][0]["cases"]
    with open_recorded(smollm2_q23_path(name), SETS[name][0]) as m:
        assert m.weight_types == TYPES[name]
        assert sum(replay(m, case) for case in cases) == sum(c["steps"] + 1 for c in cases)
