"""Records what llama-server b11192 answers to the meaning of Ollama v0.13.3 requests
(tests/oracle/ollama/records.json). Developer tool: needs the oracle build and SmolLM2 Q4_1. It applies
Ollama's rule on its own, reading Ollama's source, and imports nothing of bankml (so the records can judge
bankml's reading of that rule, not repeat it).

    PYTHONPATH=. python testing/record_ollama.py [--only NAME ...] [--no-check]

The rule, per request (the Ollama request: testing/ollama_cases.py):
- options: Ollama's DefaultOptions (api/types.go:878-904), then the model's stored parameters (none: a registry
  model has no PARAMETER layer), then the request's `options`, key by key (api/types.go FromMap); each becomes
  llama-server's field of the same meaning, every field sent explicitly. num_predict becomes n_predict with
  llm/server.go:1512-1515 (v0.13.3): below 0 or above 10*num_ctx it is 10*num_ctx.
- format "json" -> response_format {"type": "json_object"}; a schema object -> {"type": "json_schema",
  "json_schema": {"schema": ...}} (llm/server.go:1477-1496 turns both into a grammar; llama-server's
  response_format is the same meaning).
- chat: chatPrompt's truncation (server/prompt.go:23-95): from the second-to-last message backwards, the
  system messages before i and msgs[i:] are rendered and counted (the runner's Tokenize: llm/server.go:1702-1711,
  no special tokens added, special tokens parsed), stop at the first that is longer than num_ctx; the last
  message always stays. Rendered by the oracle's /apply-template, counted by its /tokenize. The kept messages go
  to /v1/chat/completions.
- generate (server/routes.go:413-470): [system (req.system), user: prompt] through the same chatPrompt; with
  `context`, the prompt is the detokenized context (the runner's Detokenize: concatenated pieces, here
  /detokenize) followed by the rendered messages, sent as text to /completion; raw: the prompt verbatim to
  /completion. The answer's `context` (not for raw, server/routes.go:564-572) is the runner's Tokenize of the
  prompt text followed by the whole answer text.
- num_ctx below 4096: the session's server is started with `-c <num_ctx>` (Ollama loads the model with that
  context).
- shift (server/routes.go:520: on unless the request says false): the runner shifts the history when the
  context fills, keeping num_keep tokens (runner/llamarunner/runner.go:132-141, cache.go ShiftCacheSlot): the
  session's server runs with `--context-shift` and each request sends `n_keep` = num_keep (negative: -1, the
  whole prompt); a session's requests agree on shift.

What is recorded per request: the Ollama request (placeholders resolved), the llama-server generation request,
the truncation's steps, the answer text (a stream's chunks concatenated), done_reason, prompt_eval_count,
eval_count, and for generate the context. The counts' meaning: prompt_eval_count is the length of the whole
prompt the runner was given (runner/ollamarunner/runner.go:196 numPromptInputs = len(inputs), not the part
left after the cache is reused; server/routes.go:531 copies it), which is llama-server's prompt_n + cache_n
(timings: the evaluated part plus the part reused from the cache), equal to its usage.prompt_tokens /
tokens_evaluated; eval_count is the number of sampled tokens, the end-of-generation token included
(runner.go:712 counts each token before it is checked), llama-server's predicted_n. done_reason: "length" when
llama-server's finish_reason is "length" (stop_type "limit"), else "stop" (llm/server.go:1435-1444).

Each session is played twice on fresh servers; a session whose answers differ between the runs is left out.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from testing import ollama_cases  # noqa: E402
from testing.oracle import BASE_ARGS, LlamaServer, model_path  # noqa: E402

OUT = REPO / "tests" / "oracle" / "ollama"
SCRATCH = Path("/work/scratch/ollama-oracle")

# api/types.go:878-904 (v0.13.3): the values a request's options are laid over; MinP has no default there (the
# Go zero value); stop is nil. num_ctx: envconfig.ContextLength (envconfig/config.go:204, 4096).
DEFAULTS = {"num_predict": -1, "num_keep": 4, "temperature": 0.8, "top_k": 40, "top_p": 0.9, "min_p": 0.0,
            "typical_p": 1.0, "repeat_last_n": 64, "repeat_penalty": 1.1, "presence_penalty": 0.0,
            "frequency_penalty": 0.0, "seed": -1, "stop": None, "num_ctx": 4096}
# Ollama option -> llama-server field of the same meaning
FIELDS = {"temperature": "temperature", "top_k": "top_k", "top_p": "top_p", "min_p": "min_p",
          "typical_p": "typical_p", "repeat_last_n": "repeat_last_n", "repeat_penalty": "repeat_penalty",
          "presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty", "seed": "seed"}


def options_of(body: dict) -> dict:
    opts = dict(DEFAULTS)
    opts.update(body.get("options") or {})     # no stored parameters for a registry model
    return opts


def sampling_fields(opts: dict) -> dict:
    n = opts["num_predict"]
    if n < 0 or n > 10 * opts["num_ctx"]:      # llm/server.go:1512-1515
        n = 10 * opts["num_ctx"]
    out = {"n_predict": n}
    out.update({FIELDS[k]: opts[k] for k in FIELDS})
    out["stop"] = list(opts["stop"] or [])
    out["n_keep"] = max(opts["num_keep"], -1)
    return out


def session_shift(session: dict) -> bool:
    """Whether the session's requests shift the context (server/routes.go:520); they must agree."""
    shifts = {r["body"].get("shift") is None or bool(r["body"].get("shift")) for r in session["requests"]}
    if len(shifts) != 1:
        raise ValueError(f"session {session['name']}: requests with and without shift")
    return shifts.pop()


def response_format(fmt):
    if fmt is None:
        return None
    if fmt == "json":
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"schema": fmt}}


class Oracle:
    def __init__(self, srv: LlamaServer):
        self.srv = srv

    def post(self, path: str, body: dict) -> dict:
        status, _, payload = self.srv.post(path, body)
        if status != 200:
            raise RuntimeError(f"{path} answered {status}: {payload[:300]!r}")
        return json.loads(payload)

    def stream(self, path: str, body: dict) -> list[dict]:
        status, _, payload = self.srv.post(path, body)
        if status != 200:
            raise RuntimeError(f"{path} answered {status}: {payload[:300]!r}")
        events = []
        for line in payload.decode().split("\n"):
            if line.startswith("data: ") and line[6:].strip() != "[DONE]":
                events.append(json.loads(line[6:]))
        return events

    def render(self, messages: list[dict]) -> str:
        return self.post("/apply-template", {"messages": messages})["prompt"]

    def tokenize(self, text: str) -> list[int]:
        # the runner's Tokenize: no BOS/EOS added, special tokens parsed (llm/server.go:1702-1711)
        return self.post("/tokenize", {"content": text, "add_special": False, "parse_special": True})["tokens"]

    def detokenize(self, ids: list[int]) -> str:
        return self.post("/detokenize", {"tokens": ids})["content"]


def chat_prompt(oracle: Oracle, msgs: list[dict], num_ctx: int, truncate: bool = True):
    """server/prompt.go:23-95: the messages kept, and the steps taken ([index, tokens] per rendering)."""
    steps = []
    n = len(msgs) - 1
    system: list[dict] = []
    for i in range(n - 1, -1, -1):             # i == n is skipped: the last message always stays (prompt.go:33)
        system = [m for m in msgs[:i] if m["role"] == "system"]           # prompt.go:38-43
        count = len(oracle.tokenize(oracle.render(system + msgs[i:])))
        steps.append([i, count])
        if truncate and count > num_ctx:       # prompt.go:63-66: the system list of the failing i is kept
            break
        n = i
    return system + msgs[n:], steps


def resolve(value, answers: list[dict]):
    if isinstance(value, dict):
        if set(value) == {"$answer"}:
            return answers[value["$answer"]]["text"]
        if set(value) == {"$context"}:
            return answers[value["$context"]]["context"]
        return {k: resolve(v, answers) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, answers) for v in value]
    return value


def generation(oracle: Oracle, path: str, body: dict, stream: bool):
    """(text, finish reason in Ollama's words, prompt tokens, predicted tokens, cached tokens)."""
    req = dict(body, stream=stream)
    if path == "/completion":
        if stream:
            events = oracle.stream(path, req)
            text = "".join(e.get("content", "") for e in events)
            last = events[-1]
        else:
            last = oracle.post(path, req)
            text = last["content"]
        reason = "length" if last["stop_type"] == "limit" else "stop"
        assert last["tokens_evaluated"] == last["timings"]["prompt_n"] + last["timings"]["cache_n"]
    else:
        if stream:
            events = oracle.stream(path, req)
            text = "".join((c.get("delta") or {}).get("content") or "" for e in events for c in e["choices"])
            finish = [c["finish_reason"] for e in events for c in e["choices"] if c.get("finish_reason")]
            last = events[-1]
            reason = "length" if finish[-1] == "length" else "stop"
        else:
            last = oracle.post(path, req)
            text = last["choices"][0]["message"]["content"]
            reason = "length" if last["choices"][0]["finish_reason"] == "length" else "stop"
            assert last["usage"]["prompt_tokens"] == last["timings"]["prompt_n"] + last["timings"]["cache_n"]
    t = last["timings"]
    return text, reason, t["prompt_n"] + t["cache_n"], t["predicted_n"], t["cache_n"]


def answer(oracle: Oracle, path: str, body: dict) -> dict:
    opts = options_of(body)
    fields = sampling_fields(opts)
    stream = body.get("stream", True)          # stream absent means true (api/types.go: Stream *bool)
    truncate = body.get("truncate", True)
    rec: dict = {}
    if path == "/api/chat":
        msgs = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
        kept, steps = chat_prompt(oracle, msgs, opts["num_ctx"], truncate)
        req = {"messages": kept, **fields}
        if body.get("format") is not None:
            req["response_format"] = response_format(body["format"])
        target, prompt = "/v1/chat/completions", None
        rec["truncation"] = {"steps": steps, "kept": len(kept), "of": len(msgs)}
    elif body.get("raw"):
        target, prompt = "/completion", None
        req = {"prompt": body["prompt"], **fields}
    else:
        msgs = ([{"role": "system", "content": body["system"]}] if body.get("system") else []) \
            + [{"role": "user", "content": body["prompt"]}]
        kept, steps = chat_prompt(oracle, msgs, opts["num_ctx"], truncate)
        rec["truncation"] = {"steps": steps, "kept": len(kept), "of": len(msgs)}
        prompt = oracle.render(kept)
        if body.get("context") is not None:    # server/routes.go:446-470
            prompt = oracle.detokenize(body["context"]) + prompt
            target = "/completion"
            req = {"prompt": prompt, **fields}
            if body.get("format") is not None:
                raise ValueError("format with context: not expressed")
        else:
            target = "/v1/chat/completions"
            req = {"messages": kept, **fields}
            if body.get("format") is not None:
                req["response_format"] = response_format(body["format"])
    text, reason, n_prompt, n_eval, cached = generation(oracle, target, req, stream)
    rec.update({"oracle_request": {"path": target, "body": dict(req, stream=stream)}, "text": text,
                "done_reason": reason, "prompt_eval_count": n_prompt, "eval_count": n_eval,
                "cache_n": cached})
    if path == "/api/generate" and not body.get("raw"):
        rec["context"] = oracle.tokenize(prompt + text)    # server/routes.go:564-572
    return rec


def play(session: dict) -> list[dict]:
    base = list(BASE_ARGS)
    base[base.index("-c") + 1] = str(session["num_ctx"])
    if session_shift(session):
        base.append("--context-shift")
    out = []
    log = SCRATCH / f"{session['name']}.log"
    with LlamaServer(model_path("smollm2"), base_args=base, log=log) as srv:
        oracle = Oracle(srv)
        for r in session["requests"]:
            body = resolve(copy.deepcopy(r["body"]), out)
            out.append({"path": r["path"], "ollama": body, **answer(oracle, r["path"], body)})
    return out


COMPARED = ("text", "done_reason", "prompt_eval_count", "eval_count", "context")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=[])
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    SCRATCH.mkdir(parents=True, exist_ok=True)
    path = OUT / "records.json"
    old = {s["name"]: s for s in json.loads(path.read_text())["sessions"]} if path.exists() else {}
    sessions = []
    for sess in ollama_cases.sessions():
        if args.only and sess["name"] not in args.only:
            if sess["name"] in old:
                sessions.append(old[sess["name"]])
            continue
        t = time.time()
        reqs = play(sess)
        if not args.no_check:
            again = play(sess)
            diffs = [f"request {i} {k}" for i, (x, y) in enumerate(zip(reqs, again)) for k in COMPARED
                     if x.get(k) != y.get(k)]
            if diffs:
                print(f"UNSTABLE {sess['name']}: left out: {diffs}")
                continue
        print(f"{sess['name']}: {len(reqs)} requests, {time.time() - t:.1f} s; "
              f"done {[r['done_reason'] for r in reqs]}, kept {[r.get('truncation', {}).get('kept') for r in reqs]}",
              flush=True)
        sessions.append({"name": sess["name"], "num_ctx": sess["num_ctx"], "note": sess["note"],
                         "model": "smollm2-135m-instruct-q4_1.gguf", "requests": reqs})
    OUT.mkdir(parents=True, exist_ok=True)
    doc = {"oracle": "llama-server b11192", "ollama": "v0.13.3",
           "server": BASE_ARGS, "sessions": sessions}
    path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
