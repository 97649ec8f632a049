"""The Ollama equivalence records (tests/oracle/ollama/records.json, recorded by testing/record_ollama.py from
llama-server b11192 answering each Ollama request's meaning) and their replay against bankml-serve's Ollama
routes (/api/chat, /api/generate). Knows the records' form and Ollama's answer shapes (one JSON object, or an
NDJSON stream of them); knows nothing of how bankml computes an answer.

- `load()`: the record document; `sessions()`: its sessions.
- `ollama_answer(status, headers, body)`: {"text", "done_reason", "prompt_eval_count", "eval_count",
  "context"} from one answer (a stream's chunks concatenated, the counts from its final object).
- `replay_session(session, port, model_name)`: each request sent in order; one line per difference.
"""

from __future__ import annotations

import json
from pathlib import Path

import server_replay as sr

RECORDS = Path(__file__).parent / "oracle" / "ollama" / "records.json"
COMPARED = ("text", "done_reason", "prompt_eval_count", "eval_count", "context")
# the served model's Ollama name (bankml.server.ollama.catalog: the file's name, DisplayShortest)
MODEL_NAME = "smollm2-135m-instruct-q4_1"
SERVER_ARGS = ["-t", "2", "-c", "4096", "-np", "1", "--jinja", "--reasoning", "off", "--no-webui"]


def load() -> dict:
    return json.loads(RECORDS.read_text())


def sessions() -> list[dict]:
    return load()["sessions"]


def ollama_answer(status: int, headers, body: bytes) -> dict:
    if status != 200:
        return {"status": status, "body": body.decode(errors="replace")[:300]}
    objs = [json.loads(line) for line in body.decode().split("\n") if line.strip()]
    if any("error" in o for o in objs):
        return {"error": [o["error"] for o in objs if "error" in o]}
    text = "".join((o.get("message") or {}).get("content", "") if "message" in o else o.get("response", "")
                   for o in objs)
    last = objs[-1]
    out = {"text": text, "done_reason": last.get("done_reason"), "prompt_eval_count": last.get("prompt_eval_count"),
           "eval_count": last.get("eval_count")}
    if "context" in last:
        out["context"] = last["context"]
    return out


def with_model(value, name: str):
    if isinstance(value, dict):
        return {k: with_model(v, name) for k, v in value.items()}
    if isinstance(value, list):
        return [with_model(v, name) for v in value]
    return name if value == "$MODEL" else value


def replay_session(session: dict, port: int, model_name: str = MODEL_NAME) -> list[str]:
    problems = []
    for i, rec in enumerate(session["requests"]):
        req = {"method": "POST", "path": rec["path"], "body": with_model(rec["ollama"], model_name)}
        got = ollama_answer(*sr.send(port, req))
        for k in COMPARED:
            if rec.get(k) != got.get(k):
                problems.append(f"{session['name']} request {i} {rec['path']} {k}: got {got.get(k, got)!r:.300} "
                                f"want {rec.get(k)!r:.300}")
    return problems
