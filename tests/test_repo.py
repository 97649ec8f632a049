"""The README's commands are true: .ci/run runs the README's test command, piece by piece."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text(), re.S)


def test_readme_has_the_two_commands():
    blocks = _readme_blocks()
    assert blocks[0] == "pip install . && bankml-serve"
    assert blocks[1].startswith("pip install '.[test]' && ") and blocks[1].endswith(" && python -m pytest")


def test_ci_runs_the_readme_test_command():
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    pieces = [p.strip() for p in _readme_blocks()[1].split("&&")]
    at = [ci_lines.index(p) for p in pieces]  # each piece is a line of .ci/run ...
    assert at == sorted(at)                  # ... in the README's order
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111
