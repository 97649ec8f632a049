"""The oracle: llama.cpp b11192 built by testing/build_oracle.sh. Developer tool for recording, never imported
by bankml itself or by the CI test run (CI replays the records in tests/oracle/ and needs no llama.cpp).

    from testing.oracle import oracle_bin, LlamaServer, model_path
    with LlamaServer(model_path("smollm2"), port=18300) as srv:
        srv.post("/tokenize", {"content": "hi"})

Run the server exactly as the project's contract says: `-t 2 -c 4096 -np 1 --jinja --reasoning off --no-webui`,
plus whatever a recorder adds (`extra`).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ORACLE_DIR = Path(os.environ.get("BANKML_ORACLE_DIR", Path.home() / ".cache" / "bankml" / "oracle"))
BASE_ARGS = ["-t", "2", "-c", "4096", "-np", "1", "--jinja", "--reasoning", "off", "--no-webui"]

MODEL_FILES = {
    "smollm2": "smollm2-135m-instruct-q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}


def models_dir() -> Path:
    return Path(os.environ.get("BANKML_MODELS", Path.home() / ".local" / "share" / "bankml" / "models"))


def model_path(name: str) -> Path:
    """Path of a known model ('smollm2', 'gemma3') or of a file name in the models directory."""
    p = models_dir() / MODEL_FILES.get(name, name)
    if not p.exists():
        raise FileNotFoundError(f"{p} is missing: run `bankml pull` for it")
    return p


def oracle_bin_dir() -> Path:
    """The directory holding llama-server and the shared libraries, building them first if missing."""
    out = subprocess.run(["bash", str(REPO / "testing" / "build_oracle.sh")], check=True,
                         capture_output=True, text=True)
    return Path(out.stdout.strip().splitlines()[-1])


def oracle_bin() -> Path:
    return oracle_bin_dir() / "llama-server"


def libllama_path() -> Path:
    return oracle_bin_dir() / "libllama.so"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """A fresh llama-server b11192 on loopback, stopped on exit. `post`/`get` return (status, headers, body)."""

    def __init__(self, model: str | os.PathLike, port: int | None = None, extra: list[str] | None = None,
                 base_args: list[str] | None = None, log: str | os.PathLike | None = None,
                 binary: str | os.PathLike | None = None):
        # binary: another server to start the same way (bankml-serve, for side-by-side measurements)
        self.model = str(model)
        self.port = port or free_port()
        self.args = [str(binary or oracle_bin()), "-m", self.model] + (BASE_ARGS if base_args is None else base_args) \
            + ["--host", "127.0.0.1", "--port", str(self.port)] + (extra or [])
        self.log = log
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "LlamaServer":
        logf = open(self.log, "w") if self.log else subprocess.DEVNULL
        self.proc = subprocess.Popen(self.args, stdout=logf, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{Path(self.args[0]).name} exited with {self.proc.returncode}: {' '.join(self.args)}")
            try:
                status, _, body = self.get("/health")
                if status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.__exit__()
        raise RuntimeError(f"{Path(self.args[0]).name} did not become healthy in 60 s")

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def request(self, method: str, path: str, body=None, headers: dict | None = None, raw: bytes | None = None,
                timeout: float = 600):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        h = {"Content-Type": "application/json"} if data is not None else {}
        h.update(headers or {})
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        payload = r.read()
        conn.close()
        return r.status, dict(r.getheaders()), payload

    def post(self, path: str, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def get(self, path: str, **kw):
        return self.request("GET", path, **kw)

    def post_json(self, path: str, body) -> tuple[int, object]:
        status, _, payload = self.post(path, body)
        return status, json.loads(payload) if payload else None
