"""A real bankml-serve for the Ollama API tests (tests/test_ollama_*.py, tests/bench/test_bench_ollama.py), and
the HTTP calls they make to it.

- `serve(tmp)` starts `bankml-serve` (tests/server_replay.BankmlServe: a subprocess on a free loopback port)
  on the default model with llama-server's flags, over a private models directory `tmp` that holds hard links
  of the model file and its pin: /api/create, /api/copy and /api/delete write there, never in the user's
  models directory. It skips (pytest.skip, with the path) only when the model file is missing.
- `call(port, method, path, body=..., raw=...)` sends one request on a fresh connection and returns an
  `Answer`: status, headers (lower-case names), the body bytes, with .json() and .lines() (NDJSON).
- `go_json(value)`: the bytes Go's encoding/json writes for a value made of dicts, lists, strings, numbers
  (compact, keys in the order given, <, >, & and U+2028/2029 escaped as \\uXXXX): what gin's c.JSON sends.

Knows nothing of bankml's code: only its command line and its HTTP answers.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from server_replay import BankmlServe, send

MODEL_FILE = "smollm2-135m-instruct-q4_1.gguf"
#: the model's Ollama name as a client types it (DisplayShortest drops nothing else: host and namespace default)
MODEL = "smollm2-135m-instruct-q4_1"
#: its full name (types/model/name.go String()), which scheduleRunner's capability errors print
MODEL_FULL = f"registry.ollama.ai/library/{MODEL}:latest"
SERVE_ARGV = ["-t", "2", "-c", "4096", "-np", "1", "--jinja", "--reasoning", "off", "--no-webui"]


def models_dir() -> Path:
    return Path(os.environ.get("BANKML_MODELS", Path.home() / ".local" / "share" / "bankml" / "models"))


def model_file() -> Path:
    p = models_dir() / MODEL_FILE
    if not p.exists():
        pytest.skip(f"{p} is missing: `bankml pull {p.stem}` fetches it")
    return p


def _link(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


@contextmanager
def serve(tmp: Path, extra_argv: tuple = (), env: dict | None = None):
    """bankml-serve on the default model over the private models directory `tmp` (made here)."""
    src = model_file()
    tmp.mkdir(parents=True, exist_ok=True)
    for f in (src, src.with_name(src.name + ".FORK.json")):
        if f.exists() and not (tmp / f.name).exists():
            _link(f, tmp / f.name)
    saved = {k: os.environ.get(k) for k in ("BANKML_MODELS", *(env or {}))}
    os.environ.update({"BANKML_MODELS": str(tmp), **(env or {})})
    try:
        srv = BankmlServe(["-m", str(tmp / MODEL_FILE), *SERVE_ARGV, *extra_argv]).__enter__()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        yield srv
    finally:
        srv.__exit__()


@dataclass
class Answer:
    status: int
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)

    def lines(self) -> list:
        """An NDJSON body as its objects; every line must end in a newline."""
        assert self.body.endswith(b"\n"), self.body[-200:]
        return [json.loads(line) for line in self.body.decode().split("\n")[:-1]]

    @property
    def content_type(self) -> str | None:
        return self.headers.get("content-type")


def call(port: int, method: str, path: str, body=None, raw: bytes | str | None = None, headers=None,
         timeout: float = 120) -> Answer:
    req = {"method": method, "path": path, "headers": dict(headers or {})}
    if body is not None:
        req["body"] = body
    elif isinstance(raw, bytes):
        req["raw_hex"] = raw.hex()
    elif raw is not None:
        req["raw"] = raw
    status, hdrs, data = send(port, req, timeout=timeout)
    return Answer(status, {k.lower(): v for k, v in hdrs}, data)


def go_json(value) -> bytes:
    s = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    for a, b in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"),
                 ("\u2029", "\\u2029")):
        s = s.replace(a, b)
    return s.encode()
