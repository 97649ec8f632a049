"""Sessions of llama-server b11192 in router mode (--models-dir) and with --sleep-idle-seconds
(tests/oracle/router/sessions.json, recorded by testing/record_router.py from testing/router_sessions.py), and
their replay against a fresh bankml-serve.

Built on tests/server_replay.py (send, answer_record, normalize, differences, BankmlServe); what is added here
is only what router sessions need:

- `models_dir(layout, source)`: a fresh models directory laid out as a session says ({relative path: model
  file name}, "->name" a symbolic link, None an empty file), hard links to the files of `source` (copies when
  linking fails).
- `step_answer(port, step)`: a request sent, or a wait ({"wait": {"model", "status"}} polls GET /models,
  {"wait": {"props", "value"}} polls GET /props) answered with the last answer polled; `run_steps(port,
  steps)` plays a whole session, with requests spawned on a thread of their own and joined later (a model
  kept busy) and pauses.
- `normalize_router(answer)`: server_replay.normalize, then in every /models entry's `status.args` the
  program (args[0], written `$BIN`) and a child's port (the value after --port, written `<port>` unless 0)
  blanked. Paths are written `$MODELS_DIR` and `$MODEL` before that (`substitute_paths`), by the recorder as by
  the replay. `created` (the /models entries' clock) is blanked by server_replay.normalize already.
- `replay_router(session, source)`: the session's steps sent in order to a fresh bankml-serve started with
  the session's flags; returns the differences.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import server_replay as sr

RECORDS = Path(__file__).parent / "oracle" / "router"
WAIT_TIMEOUT = 60.0
POLL = 0.05


def load() -> list[dict]:
    return json.loads((RECORDS / "sessions.json").read_text())


def models_dir(layout: dict, source: str | os.PathLike, into: str | os.PathLike | None = None) -> str:
    """A fresh directory (its real path) holding the session's layout, files taken from `source`."""
    d = os.path.realpath(into or tempfile.mkdtemp(prefix="bankml-models-"))
    for rel, src in layout.items():
        p = Path(d) / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if src is None:
            p.write_text("")
        elif src.startswith("->"):
            os.symlink(Path(source) / src[2:], p)
        else:
            try:
                os.link(Path(source) / src, p)
            except OSError:
                shutil.copyfile(Path(source) / src, p)
    return d


def argv(flags: list[str], mdir: str | None, model: str | None) -> list[str]:
    out = []
    for f in flags:
        if f == "$MODELS_DIR":
            f = mdir
        elif f == "$MODEL":
            f = model
        out.append(f)
    return out


def substitute_paths(answer: dict, mdir: str | None, model: str | None, program: str | None = None) -> dict:
    """The models directory written `$MODELS_DIR`, the model file `$MODEL`, the server program `$BIN`."""
    for real, ph in ((program, "$BIN"), (mdir, "$MODELS_DIR"), (model, "$MODEL")):
        if real:
            answer = sr._swap(answer, real, ph)
    return answer


def _blank_args(value):
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "status" and isinstance(v, dict) and isinstance(v.get("args"), list):
                args = list(v["args"])
                if args:
                    args[0] = "$BIN"
                for i in range(len(args) - 1):
                    if args[i] == "--port" and args[i + 1] != "0":
                        args[i + 1] = "<port>"
                v = {**v, "args": args}
            out[k] = _blank_args(v)
        return out
    if isinstance(value, list):
        return [_blank_args(v) for v in value]
    return value


def normalize_router(answer: dict) -> dict:
    a = sr.normalize(answer, "")
    if "json" in a:
        a["json"] = _blank_args(a["json"])
    return a


def _poll_ok(spec: dict, ans: dict) -> bool:
    body = ans.get("json")
    if ans["status"] != 200 or not isinstance(body, dict):
        return False
    if "model" in spec:
        for m in body.get("data") or []:
            if m.get("id") == spec["model"]:
                return (m.get("status") or {}).get("value") == spec["status"]
        return False
    return body.get(spec["props"]) == spec["value"]


def step_answer(port: int, step: dict, timeout: float = WAIT_TIMEOUT) -> dict:
    """The answer to a request step, or to a wait: the last answer polled (with "timed_out": true when the
    wanted state never came)."""
    if "wait" not in step:
        return sr.answer_record(*sr.send(port, step))
    spec = step["wait"]
    req = {"method": "GET", "path": "/models" if "model" in spec else "/props"}
    deadline = time.time() + timeout
    while True:
        ans = sr.answer_record(*sr.send(port, req))
        if _poll_ok(spec, ans):
            return ans
        if time.time() > deadline:
            return {**ans, "timed_out": True}
        time.sleep(POLL)


def describe(step: dict) -> str:
    for kind in ("wait", "spawn", "join", "pause"):
        if kind in step:
            return f"{kind} " + json.dumps(step[kind])[:200]
    return f"{step['method']} {step['path']}"


def step_of(record: dict) -> dict:
    """The step a recorded step was played from (its record without the answer)."""
    return record["request"] if "request" in record else {k: v for k, v in record.items()
                                                          if k not in ("answer", "seconds")}


def run_steps(port: int, steps: list[dict]) -> list[tuple[dict, float]]:
    """Plays steps in order: (answer, seconds) for each. Besides requests and waits, {"spawn": request} sends
    the request on a thread of its own (the session goes on at once; the step's answer is the one that
    request gets), {"join": i} waits until the request spawned at step i has its answer (answered
    {"joined": i}), {"pause": s} sleeps s seconds (answered {"paused": s})."""
    import threading
    out: list = [None] * len(steps)
    threads = {}
    for i, step in enumerate(steps):
        t = time.time()
        if "spawn" in step:
            def bg(i=i, req=step["spawn"], t=t):
                out[i] = (sr.answer_record(*sr.send(port, req)), round(time.time() - t, 2))
            threads[i] = threading.Thread(target=bg, daemon=True)
            threads[i].start()
            continue
        if "join" in step:
            threads.pop(step["join"]).join(WAIT_TIMEOUT * 5)
            ans = {"joined": step["join"]}
        elif "pause" in step:
            time.sleep(step["pause"])
            ans = {"paused": step["pause"]}
        else:
            ans = step_answer(port, step)
        out[i] = (ans, round(time.time() - t, 2))
    for th in threads.values():
        th.join(WAIT_TIMEOUT * 5)
    return out


def compare(want: dict, got: dict) -> list[str]:
    """What differs between a recorded answer and another (both with paths substituted)."""
    if "status" not in want or "status" not in got:   # join / pause
        return [] if want == got else [f"{got!r} != {want!r}"]
    diffs = sr.differences(normalize_router(want), normalize_router(got))
    if want.get("timed_out") != got.get("timed_out"):
        diffs.append(f"timed out: {got.get('timed_out')} != {want.get('timed_out')}")
    return diffs


def replay_router(session: dict, source: str | os.PathLike, model: str | None = None) -> list[str]:
    """One line per differing answer of a session replayed on a fresh bankml-serve (empty: all identical).
    source: the directory holding the model files; model: the file of `$MODEL` (default: source's Q4_1)."""
    model = model or str(Path(source) / "smollm2-135m-instruct-q4_1.gguf")
    tmp = tempfile.mkdtemp(prefix="bankml-router-")
    problems = []
    try:
        mdir = models_dir(session.get("layout") or {}, source, Path(tmp) / "models")
        steps = [step_of(st) for st in session["steps"]]
        with sr.BankmlServe(argv(session["flags"], mdir, model)) as srv:
            answers = run_steps(srv.port, steps)
        for i, (st, (got, _)) in enumerate(zip(session["steps"], answers)):
            problems += [f"step {i} {describe(steps[i])}: {d}"
                         for d in compare(st["answer"], substitute_paths(got, mdir, model))]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return problems
