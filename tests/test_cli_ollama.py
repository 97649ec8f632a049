"""`bankml create`, `show`, `cp`, `rm` / `list` of derived models and `run` (Ollama's commands, cmd/cmd.go at
v0.13.3) in a temporary models directory with a hard link of the SmolLM2 Q4_1 file."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from bankml import cli
from bankml.models import derived

BASE = "smollm2-135m-instruct-q4_1"


@pytest.fixture
def shelf(tmp_path, monkeypatch, smollm2_path):
    d = tmp_path / "models"
    d.mkdir()
    f = d / smollm2_path.name
    try:
        os.link(smollm2_path, f)
    except OSError:
        shutil.copyfile(smollm2_path, f)
    shutil.copyfile(str(smollm2_path) + ".FORK.json", str(f) + ".FORK.json")
    monkeypatch.setenv("BANKML_MODELS", str(d))
    monkeypatch.setenv("BANKML_FORKS", str(tmp_path / "forks"))
    return d, f


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_create_show_cp_list_rm(shelf, capsys, tmp_path):
    d, f = shelf
    (tmp_path / "Modelfile").write_text(f"FROM {BASE}\nPARAMETER temperature 0.2\nPARAMETER stop <|im_end|>\n"
                                        "SYSTEM You are terse.\n")
    code, out, err = run(capsys, "create", "terse", "-f", str(tmp_path / "Modelfile"))
    assert code == 0 and err.splitlines()[-2:] == ["writing manifest", "success"]
    code, out, _ = run(capsys, "show", "terse", "--parameters")
    assert (code, out) == (0, 'stop                           "<|im_end|>"\ntemperature                    0.2\n')
    assert run(capsys, "show", "TERSE", "--system")[1] == "You are terse.\n"
    code, out, _ = run(capsys, "show", "terse")
    assert code == 0 and "    architecture        llama\n" in out and "    quantization        Q4_1\n" in out
    assert run(capsys, "cp", "terse", "other:v2")[:2] == (0, "copied 'terse' to 'other:v2'\n")
    rows = {r["name"]: r for r in json.loads(run(capsys, "list", "--json")[1])}
    assert rows["terse:latest"]["source"] == "derived" and rows["terse:latest"]["path"] == str(f)
    assert rows["other:v2"]["status"] == f"derived from {BASE}:latest" and BASE in rows
    assert run(capsys, "rm", "terse")[:2] == (0, "deleted 'terse'\n")
    assert f.exists() and derived.find("terse") is None and derived.find("other:v2") is not None
    code, _, err = run(capsys, "show", "terse")
    assert code == 1 and err == "bankml: show: model 'terse' not found\n"


def test_create_refusals(shelf, capsys, tmp_path):
    mf = tmp_path / "Modelfile"
    mf.write_text("FROM x\nBAD line\n")
    assert run(capsys, "create", "m", "-f", str(mf))[2] == (
        'bankml: create: (line 2): command must be one of "from", "license", "template", "system", "adapter", '
        '"renderer", "parser", "parameter", or "message"\n')
    mf.write_text(f"FROM {BASE}\nTEMPLATE {{{{ .Prompt }}}}\n")
    code, _, err = run(capsys, "create", "m", "-f", str(mf))
    assert code == 2 and "Go templates" in err
    mf.write_text("FROM nothere\n")
    code, _, err = run(capsys, "create", "m", "-f", str(mf))
    assert code == 2 and err.endswith("pull model manifest: file does not exist\n")
    assert run(capsys, "create", "m", "-f", str(tmp_path / "none"))[0] == 1
    assert run(capsys, "cp", "a:b:c", "x")[2] == "bankml: cp: source 'a:b:c' is invalid\n"


def test_run_answers_as_api_chat(shelf, capsys):
    """One answer to a PROMPT: the text /api/chat streams for the same request (in-process app)."""
    from starlette.testclient import TestClient

    from bankml.server.app import build_app

    d, f = shelf
    # Ollama's default seed is random: a derived model stores one, so both answers are the same draw
    mf = d / "Modelfile.seeded"
    mf.write_text(f"FROM {BASE}\nPARAMETER seed 42\n")
    assert run(capsys, "create", "seeded", "-f", str(mf))[0] == 0
    app = build_app(["-m", str(f), "-c", "4096", "-np", "1", "--jinja"])
    with TestClient(app) as c:
        r = c.post("/api/chat", json={"model": "seeded", "messages": [{"role": "user", "content": "Say hi"}],
                                      "stream": False})
        assert r.status_code == 200, r.text
        want = r.json()["message"]["content"]
    code, out, err = run(capsys, "run", "seeded", "Say", "hi")
    assert (code, out) == (0, want + "\n")
