"""`bankml tokenize` (bankml.tokenizer.cli): its output is the tokenizer's, with the flags mapped as documented."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bankml.cli import main
from bankml.tokenizer import Tokenizer


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
@pytest.mark.parametrize("text", ["Hello <|im_start|> world", "  x\n\ny 123 😀", ""])
@pytest.mark.parametrize("flags", [[], ["--no-special"], ["--add-special"]], ids=["default", "nospecial", "add"])
def test_tokens_are_the_tokenizers(capsys, smollm2_path, text, flags):
    tok = Tokenizer.from_file(smollm2_path)
    code, out, err = run(capsys, "tokenize", "-m", str(smollm2_path), *flags, text)
    assert code == 0, err
    want = tok.tokenize(text, add_special="--add-special" in flags, parse_special="--no-special" not in flags)
    assert json.loads(out) == {"tokens": want}


@pytest.mark.slow
def test_pieces_and_stdin(smollm2_path):
    r = subprocess.run([sys.executable, "-m", "bankml", "tokenize", "-m", str(smollm2_path), "--pieces", "-"],
                       input="Hi 😀".encode(), capture_output=True, check=True)
    tokens = json.loads(r.stdout)["tokens"]
    tok = Tokenizer.from_file(smollm2_path)
    assert [t["id"] for t in tokens] == tok.tokenize("Hi 😀")
    assert b"".join(bytes(p) if isinstance(p, list) else p.encode() for p in (t["piece"] for t in tokens)) \
        == "Hi 😀".encode()


def test_unreadable_model(capsys, tmp_path):
    code, out, err = run(capsys, "tokenize", "-m", str(tmp_path / "missing.gguf"), "x")
    assert code == 1 and out == ""
    assert "cannot read" in err


def test_refused_model(capsys, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + bytes(64))
    code, out, err = run(capsys, "tokenize", "-m", str(bad), "x")
    assert code == 2 and out == ""
    assert "not a GGUF file" in err
