"""Replay the logits oracle of the llama and qwen3 graphs on llama-quantize's ternary mixes (tests/oracle/forward/
tq2_0.json, tq1_0.json, qwen3_tq2_0.json, qwen3_tq1_0.json, synth_tq2_0.json, synth_tq1_0.json,
synth_tq2_0_embd.json, synth_tq1_0_embd.json, recorded by `testing/record_forward.py <set>` from libllama b11192 with
llama-server's context: -c 4096, n_ubatch 512, flash attention, F16 cache, -t 2), and the TQ1_0 / TQ2_0 MUL_MAT and
GET_ROWS ops (ops_tq.json, the oracle's libggml-cpu).

The files (testing/record_forward.py TQ_SETS; `bankml quantize SRC DST TQ2_0 | TQ1_0`, byte-identical to
llama-quantize's: tests/oracle/quantize/ggml.json f16-tq2_0 ... synth-tq1_0-overrides; tests/quantize_cases.py
tq_derived makes them when missing):
- tq2_0, tq1_0: SmolLM2-135M-Instruct F16. Rows of 576 are not a multiple of 256, so attention, gate and up fall
  back to Q4_0 (repacked q4_0_8x8) and the tied embedding is Q8_0; the 30 ffn_down matrices (rows of 1536) are
  ternary.
- qwen3_tq2_0, qwen3_tq1_0: the qwen3 re-description (Q4_1) the same way.
- synth_tq2_0, synth_tq1_0: the untied head-128 synthetic llama (bankml.models.synth, F16; tests/quantize_cases.py
  TQ_SYNTH): rows of 1024 and 2816, so every matrix is ternary, token_embd Q4_K and output Q6_K.
- synth_tq2_0_embd, synth_tq1_0_embd: the same with `--tensor-type token_embd=tq2_0 | tq1_0` (quantize_cases.py
  TQ_EMBD): a ternary token embedding, so the graph's GET_ROWS decodes ternary rows.
Each: 13 prompts of 1 .. 1,500 tokens (testing/record_forward.py SHAPE_PICK) + 8 decode steps.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import forward_inputs as FI
from engine_replay import open_recorded, record_sets, replay
from quantize_cases import TQ_EMBD, llama_quantize_key, tq_derived

TQ = ("TQ2_0", "TQ1_0")
NAMES = tuple(f"{p}{t.lower()}" for p in ("", "qwen3_", "synth_") for t in TQ) + tuple(
    f"synth_{t.lower()}_embd" for t in TQ)
SETS = {k: record_sets(k) for k in NAMES}
SOURCE_FIXTURE = {"": "smollm2_f16_path", "qwen3_": "smollm2_qwen3_path", "synth_": "synth_tq_source"}
QUANTIZE = json.loads((Path(__file__).parent / "oracle" / "quantize" / "ggml.json").read_text())["llama_quantize"]


def _split(name: str) -> tuple[str, str, tuple]:
    """set name -> (source prefix, type, --tensor-type overrides)"""
    base = name.removesuffix("_embd")
    t = base[-5:].upper()
    return base[:-5], t, (TQ_EMBD[t] if name.endswith("_embd") else ())


def _lq_key(name: str) -> str:
    prefix, t, tts = _split(name)
    return llama_quantize_key({"": "f16", "qwen3_": "qwen3", "synth_": "synth"}[prefix], t, tts)


def _types(path) -> set:
    from bankml.models import gguf
    with gguf.GGUFFile(path) as f:
        return {t.type.name for t in f.tensors.values()} - {"F32"}


@pytest.fixture(scope="module", params=NAMES)
def model(request):
    name = request.param
    if not SETS[name]:
        pytest.fail(f"tests/oracle/forward/{name}.json is missing")
    prefix, t, tts = _split(name)
    path = tq_derived(request.getfixturevalue(SOURCE_FIXTURE[prefix]), t, tts)
    with open_recorded(path, SETS[name][0]) as m:
        yield name, path, m


@pytest.mark.oracle
def test_the_records_cover_the_brief():
    for name, sets in SETS.items():
        assert sets, f"the {name} record is missing"
        assert len(sets[0]["cases"]) == 13 and max(len(c["prompt"]) for c in sets[0]["cases"]) == 1500


@pytest.mark.oracle
def test_the_files_are_llama_quantizes():
    # each record's model is llama-quantize's file of the same mix; the ternary type is on the rows it fits
    for name in NAMES:
        prefix, t, tts = _split(name)
        rec = QUANTIZE[_lq_key(name)]
        assert rec["returncode"] == 0 and rec["sha256"] == SETS[name][0]["model_sha256"]
        types = rec["tensor_types"]
        if prefix == "synth_":
            assert {v for k, v in types.items() if k.startswith("blk.") and v != "F32"} == {t}
            assert (types["token_embd.weight"], types["output.weight"]) == (t if tts else "Q4_K", "Q6_K")
        else:
            assert {v for k, v in types.items() if "ffn_down" in k} == {t}
            assert set(types.values()) - {"F32"} == {t, "Q4_0", "Q8_0"}


def test_the_guard_takes_ternary_weights_on_llama_and_qwen3_only():
    from bankml.models import capabilities as caps
    for a in ("llama", "qwen3"):
        assert set(TQ) <= caps.weight_types(a, "matrix") & caps.weight_types(a, "embedding")
    assert not set(TQ) & (caps.weight_types("gemma3", "matrix") | caps.weight_types("gemma3", "embedding"))


@pytest.mark.slow
@pytest.mark.oracle
def test_rows_identical(model):
    name, path, m = model
    assert _split(name)[1] in _types(path)
    n = sum(replay(m, case) for case in SETS[name][0]["cases"])
    assert n == sum(c["steps"] + 1 for c in SETS[name][0]["cases"])


# --- the kernels alone: MUL_MAT of seeded TQ1_0 / TQ2_0 weights (random bytes: any trit code) -------------------------

OPS_TQ = json.loads((Path(__file__).parent / "oracle" / "forward" / "ops_tq.json").read_text())


@pytest.mark.oracle
@pytest.mark.parametrize("case", OPS_TQ["mul_mat"], ids=lambda c: f"{c['type']}-{c['m']}x{c['k']}-n{c['n']}")
def test_mul_mat_tq_oracle(case):
    # ggml: one vec_dot per output for every n; bankml: tiles of up to 4 columns, rows whole and in shares of 7
    from bankml.engine._shims import _kernels_shim as K
    t, m, k, n = case["type"], case["m"], case["k"], case["n"]
    w = FI.weights(t, m, k, case["seed"])
    x = FI.activations(n, k, case["seed"])
    assert FI.sha256(K.matmul(t, w, k, x)) == case["sha256"]
    assert FI.sha256(K.matmul(t, w, k, x, chunk=7)) == case["sha256"]


@pytest.mark.oracle
@pytest.mark.parametrize("case", OPS_TQ["get_rows"], ids=lambda c: f"{c['type']}-k{c['k']}")
def test_get_rows_tq_oracle(case):
    from bankml.engine._shims import _kernels_shim as K
    t, k = case["type"], case["k"]
    table = FI.weights(t, case["rows"], k, case["seed"])
    assert FI.sha256(np.stack([K.get_row(t, table[i], k) for i in case["ids"]])) == case["sha256"]


def test_ops_tq_counts():
    assert [(c["type"], c["m"], c["k"], c["n"]) for c in OPS_TQ["mul_mat"]] == [tuple(c) for c in FI.TQ_MATMUL_CASES]
    assert [(c["type"], c["k"]) for c in OPS_TQ["get_rows"]] == [tuple(c) for c in FI.TQ_GET_ROWS_CASES]


def test_tq_encoders_round_trip():
    # -d, 0 and +d of each block survive TQ1_0 and TQ2_0 exactly (the element of largest magnitude sets d)
    from bankml.models import quantize as qz
    import quantize_cases as cases
    x = np.sign(cases.encode_cases()["grid"]) * np.float32(3)
    for t in TQ:
        np.testing.assert_array_equal((_decode(t, qz.quantize(t, x)) - 1).astype(np.float32) * np.float32(3), x)


def _decode(t: str, raw: np.ndarray) -> np.ndarray:
    # the trits of ggml-common.h's layouts (quants_tq.h), element order
    blocks = raw.reshape(-1, 54 if t == "TQ1_0" else 66).astype(np.int64)
    if t == "TQ2_0":
        q = blocks[:, :64].reshape(-1, 2, 1, 32)
        return ((q >> (2 * np.arange(4)).reshape(1, 1, 4, 1)) & 3).reshape(-1, 256)

    def digits(b, n):  # the n trits of bytes b, most significant first: (((b * 3^s) mod 256) * 3) >> 8
        p = 3 ** np.arange(n).reshape(1, n, 1)
        return (((b[:, None, :] * p) & 0xFF) * 3) >> 8
    return np.concatenate([digits(blocks[:, :32], 5).reshape(-1, 160), digits(blocks[:, 32:48], 5).reshape(-1, 80),
                           digits(blocks[:, 48:52], 4).reshape(-1, 16)], axis=1)
