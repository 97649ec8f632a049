"""bankml.models.quantize: the converter's decoders and encoders against ggml-base b11192 (tests/oracle/quantize/
ggml.json, recorded by testing/record_quantize.py), and the derived files it writes."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

import quantize_cases as cases
from bankml import cli
from bankml.models import quantize as qz, verify
from bankml.models.gguf import GGMLType, GGUFFile, read_header_file

RECORD = json.loads((Path(__file__).parent / "oracle" / "quantize" / "ggml.json").read_text())


def _sha(b) -> str:
    return hashlib.sha256(bytes(b)).hexdigest()


@pytest.mark.parametrize("tname", cases.ENCODE_TYPES)
@pytest.mark.parametrize("case", sorted(cases.encode_cases()))
def test_encoders_are_ggmls_reference_encoders(case, tname):
    x = cases.encode_cases()[case]
    assert _sha(qz.quantize(tname, x)) == RECORD["encode"][case][tname]


@pytest.mark.parametrize("case", sorted(cases.bf16_encode_cases()))
def test_bf16_encoder_on_nan_inf_and_ties(case):
    x = cases.bf16_encode_cases()[case]
    assert _sha(qz.quantize("BF16", x)) == RECORD["encode"][case]["BF16"]


@pytest.mark.parametrize("case", sorted(cases.decode_cases()))
def test_decoders_are_ggmls_to_float(case):
    tname, raw, rows = cases.decode_cases()[case]
    y = qz.dequantize(GGMLType[tname], raw, rows, cases.N_PER_ROW)
    assert y.dtype == np.float32 and y.shape == (rows, cases.N_PER_ROW)
    assert _sha(y.tobytes()) == RECORD["decode"][case]["sha256"]


def test_the_record_covers_every_case():
    assert set(RECORD["encode"]) == set(cases.encode_cases()) | set(cases.bf16_encode_cases())
    assert set(RECORD["decode"]) == set(cases.decode_cases())


def test_round_trip_on_the_grid():
    # integers within the Q8_0 grid of each block come back exactly
    x = cases.encode_cases()["grid"].copy()
    x[:, ::32] = 127  # every block reaches 127, so its scale is 1
    y = qz.dequantize(GGMLType.Q8_0, qz.quantize("Q8_0", x).reshape(-1), *x.shape)
    np.testing.assert_array_equal(y, x)


def test_refusals():
    with pytest.raises(qz.QuantizeError, match="cannot write type 'IQ3_S'"):
        qz.quantize("IQ3_S", np.zeros((1, 256), np.float32))
    with pytest.raises(qz.QuantizeError, match="32 elements per row is not a multiple of 256"):
        qz.quantize("Q5_K", np.zeros((1, 32), np.float32))
    with pytest.raises(qz.QuantizeError, match="33 elements per row is not a multiple of 32"):
        qz.quantize("Q8_0", np.zeros((1, 33), np.float32))
    with pytest.raises(qz.QuantizeError, match="type Q6_K cannot be decoded"):
        qz.dequantize(GGMLType.Q6_K, np.zeros(210, np.uint8), 1, 256)


def _tiny(tmp_path):
    from gguf_writer import tiny_llama
    src = tmp_path / "tiny.gguf"
    src.write_bytes(tiny_llama(types={"blk.0.attn_q.weight": GGMLType.Q4_1}))
    return src


def test_convert_a_tiny_model(tmp_path):
    src = _tiny(tmp_path)
    out = qz.convert(src, tmp_path / "tiny-q8_0.gguf", "q8_0")
    h_in, h_out = read_header_file(src), read_header_file(out)
    assert h_out.metadata["general.file_type"] == 7
    assert [k for k in h_out.metadata if k != "general.file_type"] == \
        [k for k in h_in.metadata if k != "general.file_type"]
    with GGUFFile(src) as fi, GGUFFile(out) as fo:
        assert list(fi.tensors) == list(fo.tensors)
        for name, ti in fi.tensors.items():
            to = fo.tensors[name]
            assert to.shape == ti.shape
            if len(ti.shape) < 2:
                assert to.type == ti.type and bytes(fo.tensor_bytes(name)) == bytes(fi.tensor_bytes(name))
            else:
                assert to.type == GGMLType.Q8_0
                x = qz.dequantize(ti.type, fi.tensor_bytes(name), ti.n_elements // ti.shape[0], ti.shape[0])
                assert bytes(fo.tensor_bytes(name)) == qz.quantize("Q8_0", x).tobytes()
    pin = verify.load_pin(verify.pin_path_beside(out))
    assert pin["files"][0]["sha256"] == verify.sha256_file(out)
    assert pin["provenance"]["derived_from"]["sha256"] == verify.sha256_file(src)
    assert verify.check_pin(out)  # the pin beside it verifies
    again = qz.convert(src, tmp_path / "again.gguf", "Q8_0")
    assert again.read_bytes() == out.read_bytes()  # deterministic
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask  # an ordinary file mode, not mkstemp's 0600


def test_convert_refuses_to_overwrite_its_input(tmp_path):
    src = _tiny(tmp_path)
    with pytest.raises(qz.QuantizeError, match="overwrite the input"):
        qz.convert(src, src, "F16")


def test_cli(tmp_path, capsys):
    src = _tiny(tmp_path)
    assert cli.main(["quantize", str(src), str(tmp_path / "t16.gguf"), "f16"]) == 0
    assert "t16.gguf" in capsys.readouterr().out
    assert read_header_file(tmp_path / "t16.gguf").metadata["general.file_type"] == 1
    assert cli.main(["quantize", str(tmp_path / "missing.gguf"), str(tmp_path / "x.gguf"), "F16"]) == 1
    assert "missing.gguf" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["quantize", str(src), str(tmp_path / "x.gguf"), "Q5_K"])
    assert not list(tmp_path.glob(".quantize-*"))


@pytest.mark.slow
@pytest.mark.parametrize("tname", ["F16", "Q8_0"])
def test_smollm2_derived_files_are_ggmls(smollm2_path, tmp_path, tname):
    # the whole file, tensor by tensor, is what ggml's to_float + ggml_quantize_chunk make of the Q4_1 model
    rec = RECORD["files"][f"smollm2-135m-instruct-{tname.lower()}"]
    assert verify.sha256_file(smollm2_path) == rec["source_sha256"]
    out = qz.convert(smollm2_path, tmp_path / f"s-{tname}.gguf", tname)
    with GGUFFile(out) as f:
        got = {name: _sha(f.tensor_bytes(name)) for name in rec["tensors"]}
    assert got == rec["tensors"]
    assert out.stat().st_size == rec["bytes"] and verify.sha256_file(out) == rec["sha256"]
    assert verify.guard(out).verdict == verify.PLAY


# --- the Bonsai types, by llama-quantize's rule: the whole file against the oracle's llama-quantize -------------

def _lq_cases():
    return [pytest.param(src, t, tts, id=cases.llama_quantize_key(src, t, tts))
            for src, t, tts in cases.LLAMA_QUANTIZE_CASES]


def test_the_record_covers_every_llama_quantize_case():
    assert set(RECORD["llama_quantize"]) == {cases.llama_quantize_key(*c) for c in cases.LLAMA_QUANTIZE_CASES}


@pytest.mark.slow
@pytest.mark.parametrize("src_key,tname,tts", _lq_cases())
def test_bonsai_files_are_llama_quantizes(request, tmp_path, src_key, tname, tts):
    rec = RECORD["llama_quantize"][cases.llama_quantize_key(src_key, tname, tts)]
    src = request.getfixturevalue({"smollm2": "smollm2_path", "f16": "smollm2_f16_path",
                                   "qwen3": "smollm2_qwen3_path", "synth": "synth_tq_source"}[src_key])
    assert verify.sha256_file(src) == rec["source_sha256"]
    tt = [tuple(t.split("=", 1)) for t in tts]
    out = tmp_path / "out.gguf"
    if rec["returncode"] != 0:
        # llama-quantize stops on this input; bankml refuses it with the same reason and writes nothing
        with pytest.raises(qz.QuantizeError) as e:
            qz.convert(src, out, tname, tensor_types=tt)
        assert rec["error"] in str(e.value)
        assert not out.exists() and not list(tmp_path.glob(".quantize-*"))
        return
    qz.convert(src, out, tname, tensor_types=tt)
    with GGUFFile(out) as f:
        assert {n: GGMLType(ti.type).name for n, ti in f.tensors.items()} == rec["tensor_types"]
    assert out.stat().st_size == rec["bytes"] and verify.sha256_file(out) == rec["sha256"]


def test_llama_quantize_type_choice():
    # the per-tensor rule on shapes SmolLM2 does not have (llama-quant.cpp: output / tied embedding, untied
    # embedding, the shape fallbacks)
    t = qz.llama_quantize_type
    assert t("token_embd.weight", 2048, "Q2_0", True, []) == "Q6_K"
    assert t("token_embd.weight", 576, "Q2_0", True, []) == "Q8_0"      # Q6_K's 256 does not divide 576
    assert t("token_embd.weight", 2048, "Q2_0", False, []) == "Q4_K"
    assert t("token_embd.weight", 576, "Q2_0", False, []) == "Q5_0"
    assert t("token_embd.weight", 2048, "Q1_0", False, []) == "Q1_0"
    assert t("output.weight", 576, "Q1_0", False, []) == "Q8_0"          # 128 does not divide 576
    assert t("blk.0.attn_q.weight", 96, "Q2_0", False, []) == "Q4_0"
    assert t("blk.0.attn_q.weight", 48, "Q2_0", False, []) == "F16"
    assert t("blk.0.attn_q.weight", 576, "Q1_0", False, [("attn_q", "Q4_0")]) == "Q4_0"
    with pytest.raises(qz.QuantizeError, match="no tensor type fallback is defined for type q1_0"):
        t("blk.0.attn_q.weight", 576, "Q1_0", False, [])


def test_bonsai_encoders_round_trip():
    # Q2_0 keeps -d, 0 and +d of each block exactly; Q1_0 keeps the signs
    x = cases.encode_cases()["grid"].copy()
    x = np.sign(x) * np.float32(3)
    y = qz.dequantize(GGMLType.Q2_0, qz.quantize("Q2_0", x).reshape(-1), *x.shape)
    np.testing.assert_array_equal(y, x)
    y1 = qz.dequantize(GGMLType.Q1_0, qz.quantize("Q1_0", x).reshape(-1), *x.shape)
    assert ((y1 >= 0) == (x >= 0)).all()


def test_cli_tensor_type(tmp_path, capsys):
    src = _tiny(tmp_path)
    with pytest.raises(SystemExit):
        cli.main(["quantize", str(src), str(tmp_path / "x.gguf"), "Q2_0", "--tensor-type", "attn_q"])
    assert "malformed tensor type" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["quantize", str(src), str(tmp_path / "x.gguf"), "Q2_0", "--tensor-type", "attn_q=q9_9"])
    assert cli.main(["quantize", str(src), str(tmp_path / "x.gguf"), "F16", "--tensor-type", "attn_q=q8_0"]) != 0
    assert "--tensor-type applies to Q4_1, Q5_0, Q5_1, Q2_K" in capsys.readouterr().err
