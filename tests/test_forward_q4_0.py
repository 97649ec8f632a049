"""Replay the logits oracle of the llama and qwen3 graphs on files with Q4_0 matrices (tests/oracle/forward/q4_0.json,
qwen3_q4_0.json, q2_k.json, q3_k_m.json, q3_k_s.json, q3_k_l.json and qwen3_q3_k_m.json, recorded by
`testing/record_forward.py <set>` from libllama b11192 with llama-server's context: -c 4096, n_ubatch 512, flash
attention, F16 cache, -t 2).

The files (testing/record_forward.py Q4_0_SETS):
- q4_0: SmolLM2-135M-Instruct Q4_1 re-encoded by `bankml quantize ... Q4_0` (bankml's rule: every matrix and the
  tied token embedding Q4_0). llama-server puts every matrix in its CPU_REPACK buffer as q4_0_8x8 (all rows are
  multiples of 8), the tied output head's MUL_MAT copy included, and the embedding's GET_ROWS reads the file's
  Q4_0 rows. 42 prompts of 1 .. 1,500 tokens.
- qwen3_q4_0: the qwen3 re-description re-encoded the same way (per-head Q/K norms on Q4_0 products): 13 prompts
  of 1 .. 1,500 tokens (testing/record_forward.py SHAPE_PICK) + 8 decode steps.
- q2_k, q3_k_m: the Q4_1 file quantized by `bankml quantize` in llama-quantize's plain Q2_K and Q3_K_M mixes
  (llama-quantize's bytes: tests/oracle/quantize/ggml.json smollm2-q2_k, smollm2-q3_k_m): rows of 576 send the
  attention, gate and up matrices to Q4_0; ffn_down is Q3_K (Q2_K) or Q4_K / Q5_K (Q3_K_M, with Q5_0 / Q5_1 on
  some attention matrices). 40 prompts of 1 .. 1,300 tokens.
- q3_k_s, q3_k_l, qwen3_q3_k_m: the Q4_1 file in the plain Q3_K_S (Q4_0, Q3_K) and Q3_K_L (Q4_0, Q5_1, Q5_K)
  mixes and the qwen3 file in Q3_K_M (llama-quantize's bytes: smollm2-q3_k_s, smollm2-q3_k_l, qwen3-q3_k_m):
  qwen3_q4_0's 13 prompts + 8 steps.
Decode (q4_0, q2_k, q3_k_m): 24 steps after each prompt (40 after text-1000, 100 after text-3), crossing 512 and
1,024.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import _quantized
from engine_replay import assert_covers, open_recorded, record_sets, replay

NAMES = ("q4_0", "qwen3_q4_0", "q2_k", "q3_k_m", "q3_k_s", "q3_k_l", "qwen3_q3_k_m")
SHAPE_PICKED = ("qwen3_q4_0", "q3_k_s", "q3_k_l", "qwen3_q3_k_m")  # the shape sets' 13 prompts of 1 .. 1,500 tokens
SETS = {k: record_sets(k) for k in NAMES}
# the source file's fixture and the type `bankml quantize` writes (testing/record_forward.py Q4_0_SETS)
SOURCES = {"q4_0": ("smollm2_path", "Q4_0"), "qwen3_q4_0": ("smollm2_qwen3_path", "Q4_0"),
           "q2_k": ("smollm2_path", "Q2_K"), "q3_k_s": ("smollm2_path", "Q3_K_S"),
           "q3_k_m": ("smollm2_path", "Q3_K_M"), "q3_k_l": ("smollm2_path", "Q3_K_L"),
           "qwen3_q3_k_m": ("smollm2_qwen3_path", "Q3_K_M")}
# the tensor types each file holds (F32 norms aside)
TYPES = {"q4_0": {"Q4_0"}, "qwen3_q4_0": {"Q4_0"}, "q2_k": {"Q4_0", "Q3_K", "Q8_0"},
         "q3_k_s": {"Q4_0", "Q3_K", "Q8_0"}, "q3_k_m": {"Q4_0", "Q4_K", "Q5_0", "Q5_1", "Q5_K", "Q8_0"},
         "q3_k_l": {"Q4_0", "Q5_1", "Q5_K", "Q8_0"}, "qwen3_q3_k_m": {"Q4_0", "Q4_K", "Q5_0", "Q5_1", "Q5_K", "Q8_0"}}
# llama-quantize's file with the same mix (tests/oracle/quantize/ggml.json)
QUANTIZE = json.loads((Path(__file__).parent / "oracle" / "quantize" / "ggml.json").read_text())["llama_quantize"]
LLAMA_QUANTIZE = {k: ("qwen3-" + k[6:] if k.startswith("qwen3") else "smollm2-" + k) for k in NAMES
                  if k not in ("q4_0", "qwen3_q4_0")}


def _types(path) -> set:
    from bankml.models import gguf
    with gguf.GGUFFile(path) as f:
        return {t.type.name for t in f.tensors.values()} - {"F32"}


@pytest.fixture(scope="module", params=list(SETS))
def model(request):
    name = request.param
    if not SETS[name]:
        pytest.fail(f"tests/oracle/forward/{name}.json is missing")
    fixture, out_type = SOURCES[name]
    path = _quantized(request.getfixturevalue(fixture), out_type)
    with open_recorded(path, SETS[name][0]) as m:
        yield name, path, m


@pytest.mark.oracle
def test_the_records_cover_the_brief():
    for name, sets in SETS.items():
        assert sets, f"the {name} record is missing"
        if name in SHAPE_PICKED:
            assert len(sets[0]["cases"]) == 13 and max(len(c["prompt"]) for c in sets[0]["cases"]) == 1500
        else:
            assert_covers(sets[0]["cases"], 1500 if name == "q4_0" else 1100)


@pytest.mark.oracle
def test_the_mixes_are_llama_quantizes_files():
    for name, key in LLAMA_QUANTIZE.items():
        rec = QUANTIZE[key]
        assert rec["returncode"] == 0 and rec["sha256"] == SETS[name][0]["model_sha256"]
        assert set(rec["tensor_types"].values()) - {"F32"} == TYPES[name]


@pytest.mark.slow
@pytest.mark.oracle
def test_rows_identical(model):
    name, path, m = model
    assert _types(path) == TYPES[name]
    n = sum(replay(m, case) for case in SETS[name][0]["cases"])
    assert n == sum(c["steps"] + 1 for c in SETS[name][0]["cases"])


# --- the forward pass's MUL_MAT driver (matmul.c bk_matmul) on the Q4_0 op records of tests/oracle/kquants ------------
# mul_mat.json's Q4_0 nodes (testing/record_kquants.py: the oracle's CPU backend with the weight in the buffer the
# loader gives it, q4_0_8x8 when the rows are a multiple of 8, vec_dot / tinyBLAS_Q0_AVX otherwise) through the
# engine's driver instead of the kquant shim: repacked as forward_common.c repacks, rows whole and in shares of 32
# (bk_matmul_split's multiples), as the graphs' sites call it.

MM = json.loads((Path(__file__).parent / "oracle" / "kquants" / "mul_mat.json").read_text())["cases"]
MM_Q4_0 = [c for c in MM if c["type"] == "Q4_0"]


def _mm_id(c):
    w = c["weights"]
    return f"{w.get('smollm2') or 'rand' + str(w.get('seed'))}-{c['m']}x{c['k']}-n{c['n']}-" \
           f"{'repack' if c['repack'] else 'vecdot'}-{c['act']['kind']}"


@pytest.fixture(scope="module")
def q4_1_file(smollm2_path):
    from bankml.models import gguf
    with gguf.GGUFFile(smollm2_path) as f:
        yield f


@pytest.mark.oracle
@pytest.mark.parametrize("case", MM_Q4_0, ids=_mm_id)
def test_bk_matmul_q4_0_matches_the_op_oracle(case, request):
    from bankml.engine._shims import _kernels_shim as K
    from kquant_inputs import make_inputs, sha256
    f = request.getfixturevalue("q4_1_file") if "smollm2" in case["weights"] else None
    w, x = make_inputs(case, f)
    assert sha256(w, x) == case["input_sha256"], "the inputs drifted from the recorded ones"
    for chunk in (0, 32):
        y = K.matmul("Q4_0", w, case["k"], x, chunk=chunk, regroup=case["repack"])
        assert sha256(y) == case["sha256"], f"rows in pieces of {chunk or case['m']}"


def test_the_q4_0_op_cases_take_both_paths():
    assert sum(c["repack"] for c in MM_Q4_0) >= 100 and sum(not c["repack"] for c in MM_Q4_0) >= 20
    assert any(not c["repack"] and c["n"] > 1 for c in MM_Q4_0)  # tinyBLAS_Q0_AVX's bits
