"""Replay the logits oracle of the llama and qwen3 graphs on BF16 files (tests/oracle/forward/bf16.json and
qwen3_bf16.json, recorded by `testing/record_forward.py bf16 qwen3_bf16` from libllama b11192 with llama-server's
context: -c 4096, n_ubatch 512, flash attention, F16 cache, -t 2).

The files (testing/record_forward.py BF16_SETS): SmolLM2-135M-Instruct's F16 file and its qwen3 re-description
written as BF16 by `bankml quantize` (every matrix and the tied token embedding BF16, the norms F32; the bytes
llama-quantize writes: tests/oracle/quantize/ggml.json). What they exercise: the activations rounded to BF16, then
tinyBLAS's BF16 order at the products of 2 or more columns (SmolLM2's m and k are multiples of 4 and 8) and
ggml_vec_dot_bf16's order at the one-column ones (decode, the head), the tied BF16 head; GET_ROWS of the BF16
embedding. bf16: 42 prompts of 1 .. 1,500 tokens (crossing 64, 256, 512, 1,024) x (1 + 24; 40 after text-1000, 100
after text-3) rows; qwen3_bf16: the qwen3 set's 40 prompts of 1 .. 1,300 tokens and steps.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine_replay import assert_covers, open_recorded, record_sets, replay
from quantize_cases import llama_quantize_key

ORACLE = Path(__file__).parent / "oracle"

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

SETS = {k: record_sets(k) for k in ("bf16", "qwen3_bf16")}
FIXTURES = {"bf16": "smollm2_bf16_path", "qwen3_bf16": "smollm2_qwen3_bf16_path"}
SOURCES = {"bf16": "f16", "qwen3_bf16": "qwen3"}
LONGEST = {"bf16": 1500, "qwen3_bf16": 1300}


@pytest.mark.parametrize("name", list(SETS))
def test_the_record_covers_the_brief(name):
    assert SETS[name], f"tests/oracle/forward/{name}.json is missing"
    assert_covers(SETS[name][0]["cases"], LONGEST[name])


@pytest.mark.parametrize("name", list(SETS))
def test_the_file_is_llama_quantizes(name):
    # the record's file is the one the oracle's llama-quantize writes (tests/test_quantize.py makes it with
    # `bankml quantize` and compares the bytes)
    lq = json.loads((ORACLE / "quantize" / "ggml.json").read_text())["llama_quantize"]
    rec = lq[llama_quantize_key(SOURCES[name], "BF16", ())]
    assert rec["returncode"] == 0 and rec["sha256"] == SETS[name][0]["model_sha256"]
    assert set(rec["tensor_types"].values()) == {"F32", "BF16"}


@pytest.mark.parametrize("name", list(SETS))
def test_rows_identical(name, request):
    if not SETS[name]:
        pytest.fail(f"tests/oracle/forward/{name}.json is missing")
    cases = SETS[name][0]["cases"]
    with open_recorded(request.getfixturevalue(FIXTURES[name]), SETS[name][0]) as m:
        assert m.weight_types == {"BF16"}
        assert sum(replay(m, case) for case in cases) == sum(c["steps"] + 1 for c in cases)
