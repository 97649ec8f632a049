"""Replay the logits oracle of the llama and qwen3 graphs on K-mix files (tests/oracle/forward/q4_k_m.json,
qwen3_q4_k_m.json, q5_k_m.json, q5_k_s.json, q5_1.json, qwen3_q5_k_m.json and shapes_q4_k_m.json, recorded by
`testing/record_forward.py <set>` from libllama b11192 with llama-server's context: -c 4096, n_ubatch 512, flash
attention, F16 cache, -t 2).

The SmolLM2 files: SmolLM2-135M-Instruct Q4_1 and its qwen3 re-description quantized by `bankml quantize` (the
bytes llama-quantize writes, tests/oracle/quantize/ggml.json): in Q4_K_M rows of 576 send the mix's Q4_K and
Q6_K to their fallbacks Q5_0 and Q8_0 (attention, gate, up), the ffn_down matrices (rows of 1536) are Q4_K, or Q6_K
on the "more bits" layers; in Q5_K_M / Q5_K_S, Q5_K falls back to Q5_1 on the rows of 576 and ffn_down is Q5_K or
Q6_K; Q5_1 is Q5_1 everywhere. The tied embedding stays Q8_0. What they exercise: Q5_0, Q5_1, Q5_K and Q6_K
products through the graph's sites, and the repacked Q4_K (q4_K_8x8) down projection with its residual, as
llama-server's CPU_REPACK buffer runs it. 40 prompts of 1 .. 1,300 tokens (crossing 64, 256, 512, 1,024) + 24
steps (40 after text-1000, 100 after text-3).

The synthetic shapes (bankml.models.synth) quantized as Q4_K_M: the untied head-size-128 llama (every matrix Q4_K
or Q6_K, token_embd Q4_K: the K-quant GET_ROWS, an untied Q6_K head), the qwen3 one (tied: token_embd Q6_K, both
GET_ROWS and head) and the 1B llama (n_ff 5632: 22 Q8_K blocks, its SwiGLU activations quantized in 256-aligned
thread shares), 13 prompts of 1 .. 1,500 tokens + 8 steps (3 prompts + 6 for the 1B).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine_replay import RecordedModels, assert_covers, open_recorded, record_sets, replay

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

NAMES = ("q4_k_m", "qwen3_q4_k_m", "q5_k_m", "q5_k_s", "q5_1", "qwen3_q5_k_m")
SETS = {k: record_sets(k) for k in NAMES}
FIXTURES = {k: f"smollm2_{k}_path" for k in NAMES}
# the types each file must hold (tensor types of llama-quantize's file where it was recorded)
TYPES = {"q4_k_m": {"Q4_K", "Q6_K", "Q5_0"}, "qwen3_q4_k_m": {"Q4_K", "Q6_K", "Q5_0"},
         "q5_k_m": {"Q5_K", "Q6_K", "Q5_1"}, "q5_k_s": {"Q5_K", "Q5_1"}, "q5_1": {"Q5_1"},
         "qwen3_q5_k_m": {"Q5_K", "Q6_K", "Q5_1"}}
QUANTIZE = json.loads((Path(__file__).parent / "oracle" / "quantize" / "ggml.json").read_text())["llama_quantize"]
SHAPES = record_sets("shapes_q4_k_m")
SHAPE_CASES = [(s, c) for s in SHAPES for c in s["cases"]]


@pytest.fixture(scope="module", params=list(SETS))
def model(request):
    name = request.param
    if not SETS[name]:
        pytest.fail(f"tests/oracle/forward/{name}.json is missing")
    path = request.getfixturevalue(FIXTURES[name])
    with open_recorded(path, SETS[name][0]) as m:
        yield name, path, m


def _types(path) -> set:
    from bankml.models import gguf
    with gguf.GGUFFile(path) as f:
        return {t.type.name for t in f.tensors.values()}


def test_the_records_cover_the_brief_and_are_llama_quantizes_files():
    for name, sets in SETS.items():
        assert sets, f"the {name} record is missing"
        assert_covers(sets[0]["cases"], 1100)
        src, mix = ("qwen3", name[6:]) if name.startswith("qwen3") else ("smollm2", name)
        if f"{src}-{mix}" in QUANTIZE:  # llama-quantize's own file (qwen3 Q5_K_M was not run through it)
            assert sets[0]["model_sha256"] == QUANTIZE[f"{src}-{mix}"]["sha256"]
            assert TYPES[name] <= set(QUANTIZE[f"{src}-{mix}"]["tensor_types"].values())


def test_rows_identical(model):
    name, path, m = model
    assert TYPES[name] <= _types(path)
    n = sum(replay(m, case) for case in SETS[name][0]["cases"])
    assert n == sum(c["steps"] + 1 for c in SETS[name][0]["cases"])


# --- the synthetic shapes in Q4_K_M: K-quant token embeddings, untied K heads, the 1B model ------------------


@pytest.fixture(scope="module")
def shape_models(synth_q4_k_m):
    def path_of(name: str):
        rec = next(s for s in SHAPES if s["model"] == name)
        return synth_q4_k_m(rec["context"]["shape"], rec["context"]["from"])
    with RecordedModels(path_of) as m:
        yield m


def test_the_shape_records_cover_k_embeddings(synth_q4_k_m):
    from bankml.models import gguf
    shapes = {s["context"]["shape"]: s for s in SHAPES}
    assert set(shapes) == {"llama-h128-gqa4-untied", "qwen3-h128-gqa4", "llama-1b"}
    embd = {}
    for shape, s in shapes.items():
        with gguf.GGUFFile(synth_q4_k_m(shape, s["context"]["from"])) as f:
            embd[shape] = f.tensors["token_embd.weight"].type.name
            assert ("output.weight" in f.tensors) == (shape != "qwen3-h128-gqa4")
        if shape != "llama-1b":
            assert len(s["cases"]) >= 13 and max(len(c["prompt"]) for c in s["cases"]) >= 1500
    assert embd == {"llama-h128-gqa4-untied": "Q4_K", "qwen3-h128-gqa4": "Q6_K", "llama-1b": "Q4_K"}


@pytest.mark.parametrize("rec,case", SHAPE_CASES, ids=[f"{s['model']}-{c['id']}" for s, c in SHAPE_CASES])
def test_shape_q4_k_m_rows_identical(shape_models, rec, case):
    assert replay(shape_models(rec), case) == case["steps"] + 1
