"""Records llama-server b11192's router mode (--models-dir, --models-max, --no-models-autoload, children
sleeping) and single-model --sleep-idle-seconds as whole sessions (tests/oracle/router/sessions.json).
Developer tool: needs the oracle build and the three SmolLM2 files (q4_1, and the derived q8_0 and f16).

    PYTHONPATH=. python testing/record_router.py [--only NAME ...] [--no-check] [--port-base 18400]

Each session (testing/router_sessions.py) runs on a fresh llama-server started with the session's flags in a
fresh models directory (tests/router_replay.models_dir: hard links to the model files, laid out as the session
says); its steps are sent in order, one connection each, waits polled (tests/router_replay.step_answer), and
every answer kept like testing/record_server.py keeps them, with the models directory written `$MODELS_DIR`,
the model file `$MODEL` and the server program `$BIN`. LLAMA_CACHE points at an empty directory, so no
Hugging Face cache model joins the list. Each session is played a second time on another fresh server and the
two runs compared after tests/router_replay.normalize_router; the values that differed are printed (and the
session kept only when nothing else differs).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing import router_sessions  # noqa: E402
from testing.oracle import LlamaServer, models_dir as source_dir, oracle_bin  # noqa: E402
import router_replay as rr  # noqa: E402

OUT = REPO / "tests" / "oracle" / "router"
SCRATCH = Path(os.environ.get("ROUTER_SCRATCH", "/work/scratch/router-oracle"))


class Server(LlamaServer):
    """LlamaServer with the session's own argv (router mode has no -m)."""

    def __init__(self, argv: list[str], port: int, log: str):
        super().__init__("", port=port, log=log)
        self.args = [str(oracle_bin())] + argv + ["--host", "127.0.0.1", "--port", str(port)]


def play(session: dict, port: int) -> list[dict]:
    src = source_dir()
    model = str(src / router_sessions.FILES[router_sessions.Q4])
    tmp = tempfile.mkdtemp(prefix="router-", dir=SCRATCH)
    program = str(oracle_bin())
    steps = []
    try:
        mdir = rr.models_dir(session["layout"], src, Path(tmp) / "models")
        os.environ["LLAMA_CACHE"] = str(Path(tmp) / "empty-cache")
        log = str(SCRATCH / f"{session['name']}-{port}.log")
        with Server(rr.argv(session["flags"], mdir, model), port, log) as srv:
            answers = rr.run_steps(srv.port, session["steps"])
        for step, (ans, seconds) in zip(session["steps"], answers):
            rec = dict(step) if any(k in step for k in ("wait", "spawn", "join", "pause")) else {"request": step}
            steps.append({**rec, "answer": rr.substitute_paths(ans, mdir, model, program), "seconds": seconds})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return steps


def unstable(a: list[dict], b: list[dict]) -> list[str]:
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        what = rr.describe(rr.step_of(x))
        for d in rr.compare(x["answer"], y["answer"]):
            out.append(f"step {i} {what}: {d}")
        if x["answer"].get("timed_out") or y["answer"].get("timed_out"):
            out.append(f"step {i} {what}: timed out")
    return out


def raw_differences(a: list[dict], b: list[dict]) -> list[str]:
    """The values two runs differ in before normalization (reported: what a replay must blank)."""
    out = set()

    def walk(x, y, path):
        if isinstance(x, dict) and isinstance(y, dict):
            for k in x.keys() & y.keys():
                walk(x[k], y[k], path + "." + k)
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for k, (u, v) in enumerate(zip(x, y)):
                walk(u, v, path + f"[{k}]")
        elif x != y:
            out.add(path)
    for x, y in zip(a, b):
        walk(x["answer"].get("json"), y["answer"].get("json"), "json")
        walk(x["answer"].get("sse"), y["answer"].get("sse"), "sse")
    import re
    return sorted({re.sub(r"\[\d+\]", "[]", p) for p in out})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=[], help="record only these sessions (keep the rest)")
    ap.add_argument("--no-check", action="store_true", help="do not play each session twice")
    ap.add_argument("--port-base", type=int, default=18400)
    args = ap.parse_args()
    SCRATCH.mkdir(parents=True, exist_ok=True)
    path = OUT / "sessions.json"
    old = {s["name"]: s for s in json.loads(path.read_text())} if path.exists() else {}
    out, port = [], args.port_base
    for sess in router_sessions.sessions():
        if args.only and sess["name"] not in args.only:
            if sess["name"] in old:
                out.append(old[sess["name"]])
            continue
        t = time.time()
        steps = play(sess, port)
        port += 1
        rec = {k: sess[k] for k in ("name", "flags", "note", "layout")}
        rec["steps"] = steps
        if not args.no_check:
            again = play(sess, port)
            port += 1
            print(f"{sess['name']}: raw values differing between two runs: {raw_differences(steps, again)}")
            problems = unstable(steps, again)
            if problems:
                print(f"UNSTABLE {sess['name']}: left out\n  " + "\n  ".join(p[:400] for p in problems[:8]))
                continue
        statuses = [s["answer"].get("status", "-") for s in steps]
        print(f"{sess['name']}: {len(steps)} steps, statuses {statuses}, {time.time() - t:.1f} s", flush=True)
        out.append(rec)
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
