"""`bankml chat-template` (bankml.chat.cli)."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

from bankml.chat import cli as template_cli
from bankml.chat import legacy as tl

pytestmark = pytest.mark.slow                   # these read the SmolLM2 model file


def _run(argv, stdin: str):
    out, err = io.StringIO(), io.StringIO()
    p = template_cli.configure(__import__("argparse").ArgumentParser())
    args = p.parse_args(argv)
    code = template_cli.run(args, stdin=io.StringIO(stdin), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_messages_list_prints_the_prompt(smollm2_path):
    code, out, err = _run(["-m", str(smollm2_path)], json.dumps([{"role": "user", "content": "hi"}]))
    assert code == 0, err
    assert out.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert out.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")


def test_whole_body_and_json_output(smollm2_path):
    body = {"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": False}
    code, out, _ = _run(["-m", str(smollm2_path), "--json", "--chat-template", "chatml"], json.dumps(body))
    assert code == 0
    assert json.loads(out) == {"prompt": "<|im_start|>user\nhi<|im_end|>\n"}


def test_refused_request_exits_2_with_llama_server_error(smollm2_path):
    code, out, err = _run(["-m", str(smollm2_path)], json.dumps({"messages": [{"role": "user"}]}))
    assert code == 2 and out == ""
    assert json.loads(err) == {"error": {"code": 400, "message": "All non-assistant messages must contain 'content'",
                                         "type": "invalid_request_error"}}


def test_template_file_that_cannot_load_exits_2(smollm2_path, tmp_path):
    bad = tmp_path / "bad.jinja"
    bad.write_text("{% include 'x' %}")
    code, _, err = _run(["-m", str(smollm2_path), "--chat-template-file", str(bad)], "[]")
    assert code == 2
    assert "Unknown statement: include" in err


def test_not_json_and_missing_model(smollm2_path, tmp_path):
    code, _, err = _run(["-m", str(smollm2_path)], "{oops")
    assert code == 2 and "not JSON" in err
    code, _, err = _run(["-m", str(tmp_path / "nope.gguf")], "[]")
    assert code == 1 and "no such model file" in err


def test_module_entry_point(smollm2_path):
    r = subprocess.run([sys.executable, "-m", "bankml.chat.cli", "-m", str(smollm2_path), "--json"],
                       input=json.dumps([{"role": "user", "content": "é"}]), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["prompt"].endswith("é<|im_end|>\n<|im_start|>assistant\n")


def test_mounted_in_the_bankml_command(smollm2_path, capsys, monkeypatch):
    from bankml import cli

    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps([{"role": "user", "content": "yo"}])))
    assert cli.main(["chat-template", "-m", str(smollm2_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["prompt"].endswith("yo<|im_end|>\n<|im_start|>assistant\n")


def test_no_jinja_uses_the_builtin_templates(smollm2_path):
    msgs = [{"role": "system", "content": "You are a test."}, {"role": "user", "content": "Hi there"}]
    code, out, _ = _run(["-m", str(smollm2_path), "--no-jinja", "--chat-template", "command-r"], json.dumps(msgs))
    # the CLI goes through the chat step to bankml.chat.legacy (replayed against libllama elsewhere)
    want = tl.apply_template(b"command-r", [(m["role"], m["content"]) for m in msgs], True)
    assert code == 0 and out.encode() == want and want.startswith(b"<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>")
    code, _, err = _run(["-m", str(smollm2_path), "--no-jinja", "--chat-template", "nope"], "[]")
    assert code == 2 and "the supplied chat template is not supported: nope" in err
