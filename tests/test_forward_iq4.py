"""Replay the logits oracle of the llama and qwen3 graphs on files with IQ4_NL and IQ4_XS matrices
(tests/oracle/forward/iq4_nl.json, qwen3_iq4_nl.json, iq4_xs.json, qwen3_iq4_xs.json, iq4_nl_embd.json, recorded by
`testing/record_forward.py <set>` from libllama b11192 with llama-server's context: -c 4096, n_ubatch 512, flash
attention, F16 cache, -t 2).

The files (testing/record_forward.py IQ4_SETS): SmolLM2-135M-Instruct's F16 file and the qwen3 re-description of
its Q4_1 file, quantized by `bankml quantize SRC DST IQ4_NL` / `IQ4_XS` in llama-quantize's mixes (the bytes
llama-quantize writes: tests/oracle/quantize/ggml.json f16-iq4_nl ... qwen3-iq4_xs):
- IQ4_NL: every attention and feed-forward matrix IQ4_NL, except ffn_down of layers 0-2 (Q5_K: the first eighth,
  no importance matrix); the tied embedding Q8_0 (Q6_K's fallback on rows of 576). All IQ4_NL matrices have a row
  count that is a multiple of 8, so llama-server repacks them all as iq4_nl_8x8 (CPU_REPACK).
- IQ4_XS: the rows of 576 fall back to IQ4_NL (attention, gate, up: repacked as above); ffn_down (rows of 1536)
  IQ4_XS on layers 3-29 (ggml_vec_dot_iq4_xs_q8_K per output), Q5_K on 0-2; the embedding Q8_0.
- iq4_nl_embd: the F16 file as IQ4_NL with `--tensor-type token_embd=iq4_nl` (llama-quantize's bytes,
  f16-iq4_nl-overrides): the token embedding IQ4_NL too, read by GET_ROWS, and the tied output head repacked.
Each: SHAPE_PICK's 13 prompts of 1 .. 1,500 tokens (both sides of 64, 256, 512, 1024) x (1 + 8 decode steps).

Below, the MUL_MAT driver on the IQ4 op records of tests/oracle/kquants/iq4.json (134 nodes of n = 1 .. 512 columns).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

import quantize_cases as cases

from conftest import _quantized
from engine_replay import open_recorded, record_sets, replay

NAMES = ("iq4_nl", "qwen3_iq4_nl", "iq4_xs", "qwen3_iq4_xs")
EMBD = "iq4_nl_embd"  # the F16 file as IQ4_NL with an IQ4_NL token embedding (tests/quantize_cases.py IQ4_EMBD)
SETS = {k: record_sets(k) for k in NAMES + (EMBD,)}
# the source file's fixture and the type `bankml quantize` writes (testing/record_forward.py IQ4_SETS)
SOURCES = {k: ("smollm2_qwen3_path" if k.startswith("qwen3") else "smollm2_f16_path", k.removeprefix("qwen3_").upper())
           for k in NAMES}
# the tensor types each file holds (F32 norms aside)
TYPES = {"iq4_nl": {"IQ4_NL", "Q5_K", "Q8_0"}, "iq4_xs": {"IQ4_NL", "IQ4_XS", "Q5_K", "Q8_0"}}
TYPES.update({"qwen3_" + k: v for k, v in TYPES.items()})
TYPES[EMBD] = {"IQ4_NL", "Q5_K"}
GGML = json.loads((Path(__file__).parent / "oracle" / "quantize" / "ggml.json").read_text())
QUANTIZE = GGML["llama_quantize"]


def _lq_key(name: str) -> str:
    if name == EMBD:
        return cases.llama_quantize_key(*cases.IQ4_EMBD)
    return ("qwen3-" + name[6:]) if name.startswith("qwen3") else "f16-" + name


def _record(name: str) -> dict:
    if not SETS[name]:
        pytest.fail(f"tests/oracle/forward/{name}.json is missing")
    return SETS[name][0]


@pytest.mark.oracle
def test_the_records_cover_the_brief():
    for name in NAMES + (EMBD,):
        cases = _record(name)["cases"]
        assert len(cases) == 13 and max(len(c["prompt"]) for c in cases) == 1500
        assert all(c["steps"] == 8 for c in cases)


@pytest.mark.oracle
def test_the_files_are_llama_quantizes():
    for name in NAMES + (EMBD,):
        rec = QUANTIZE[_lq_key(name)]
        assert rec["returncode"] == 0 and rec["sha256"] == _record(name)["model_sha256"]
        assert set(rec["tensor_types"].values()) - {"F32"} == TYPES[name]


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("name", NAMES + (EMBD,))
def test_rows_identical(name, request):
    from bankml.models import gguf
    rec = _record(name)
    if name == EMBD:  # made with the override, as testing/record_forward.py makes it
        path = request.getfixturevalue("smollm2_q23_path")(name)
    else:
        fixture, out_type = SOURCES[name]
        path = _quantized(request.getfixturevalue(fixture), out_type)
    with gguf.GGUFFile(path) as f:
        assert {t.type.name for t in f.tensors.values()} - {"F32"} == TYPES[name]
    with open_recorded(path, rec) as m:
        rows = [replay(m, case) for case in rec["cases"]]
    assert rows == [c["steps"] + 1 for c in rec["cases"]]


# --- the forward pass's MUL_MAT driver (matmul.c bk_matmul) on the IQ4 op records of tests/oracle/kquants ----------
# iq4.json's nodes (testing/record_kquants.py iq4: the oracle's CPU backend; IQ4_NL in CPU_REPACK, repacked
# iq4_nl_8x8, where `repack` is set, else in the CPU buffer: vec_dot for one column, tinyBLAS_Q0_AVX for more;
# IQ4_XS in the CPU buffer: vec_dot, or the IQ panel gemm from 8 columns on a multiple of 8 rows)
# through the engine's driver: repacked as forward_common.c repacks where the oracle repacked, rows whole and in
# shares of 32 (bk_matmul_split's multiples), as the graphs' sites call it.

MM = json.loads((Path(__file__).parent / "oracle" / "kquants" / "iq4.json").read_text())["cases"]


def _mm_id(c):
    w = c["weights"]
    return (f"{c['type']}-{w.get('smollm2') or 'rand' + str(w.get('seed'))}-{c['m']}x{c['k']}-n{c['n']}-"
            f"{'repack' if c['repack'] else 'cpu'}-{c['act']['kind']}")


@pytest.mark.oracle
@pytest.mark.parametrize("case", MM, ids=_mm_id)
def test_bk_matmul_iq4_matches_the_op_oracle(case, smollm2_path):
    from bankml.engine._shims import _kernels_shim as K
    from bankml.models import gguf
    from kquant_inputs import make_inputs, sha256
    with gguf.GGUFFile(smollm2_path) as f:  # the rows of SmolLM2's matrices (or none: seeded random blocks)
        w, x = make_inputs(case, f)
        assert sha256(w, x) == case["input_sha256"], "the inputs drifted from the recorded ones"
        ys = [K.matmul(case["type"], w, case["k"], x, chunk=chunk, regroup=case["repack"]) for chunk in (0, 32)]
    assert [sha256(y) for y in ys] == [case["sha256"]] * 2, "whole rows / rows in pieces of 32"


def test_the_iq4_op_cases_take_every_path():
    nl = [c for c in MM if c["type"] == "IQ4_NL"]
    assert sum(c["repack"] for c in nl) >= 40 and sum(not c["repack"] for c in nl) >= 20
    assert any(not c["repack"] and c["n"] > 1 for c in nl)  # tinyBLAS_Q0_AVX for several columns
    assert any(c["repack"] and c["n"] == 512 for c in nl)   # the repacked gemm
    xs = [c for c in MM if c["type"] == "IQ4_XS"]
    assert any(c["n"] >= 8 and c["m"] % 8 == 0 for c in xs)  # the IQ panel gemm
    assert any(c["n"] >= 8 and c["m"] % 8 for c in xs) and any(1 < c["n"] < 8 for c in xs)  # vec_dot


# --- GET_ROWS: the engine's row decoders against ggml-base's to_float (tests/oracle/quantize/ggml.json "decode":
# random IQ4_NL / IQ4_XS blocks with finite half scales, recorded by testing/record_quantize.py decode). The guard
# takes an IQ4_NL embedding on llama only (record iq4_nl_embd above); no mix writes an IQ4 embedding.

@pytest.mark.parametrize("tname", ["IQ4_NL", "IQ4_XS"])
def test_get_row_is_ggmls_to_float(tname):
    from bankml.engine._shims import _kernels_shim as K
    raw_type, raw, rows = cases.decode_cases()[f"{tname.lower()}_random"]
    assert raw_type == tname
    row = raw.reshape(rows, -1)
    y = np.stack([K.get_row(tname, row[r], cases.N_PER_ROW) for r in range(rows)])
    assert hashlib.sha256(y.tobytes()).hexdigest() == GGML["decode"][f"{tname.lower()}_random"]["sha256"]
