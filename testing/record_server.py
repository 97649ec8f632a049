"""Records llama-server b11192's answers to whole sessions of requests (tests/oracle/server/sessions.json) and to
requests it refuses (tests/oracle/server/bad_requests.json). Developer tool: needs the oracle build.

    PYTHONPATH=. python testing/record_server.py [--only NAME ...] [--bad-only | --sessions-only]
        [--no-check] [--port-base 8171] [--legacy]

Each session (testing/server_sessions.py) runs on a fresh llama-server started with the session's flags (the
model, SmolLM2-135M-Instruct Q4_1, written `$MODEL`); its requests are sent in order, one connection each, and
every answer is kept: status, headers (Date left out), and the body as JSON, SSE events or text, with the model
path written `$MODEL`. Each session is then played a second time on another fresh server and the two runs are
compared after normalization (tests/server_replay.normalize): a session whose answers differ between two runs
of llama-server itself is reported and left out of the records, since no replay could match it.
Each group of bad requests runs on one fresh server, twice likewise. `--legacy` records the sessions of
server_sessions.legacy_sessions() (--no-jinja, --chat-template, verbose) into sessions_legacy.json instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing import server_sessions  # noqa: E402
from testing.oracle import LlamaServer, model_path  # noqa: E402
import server_replay as sr  # noqa: E402

OUT = REPO / "tests" / "oracle" / "server"


class Ports:
    def __init__(self, base: int, n: int = 9):
        self.base, self.n, self.i = base, n, 0

    def next(self) -> int:
        p = self.base + self.i % self.n
        self.i += 1
        return p


def start(flags: list[str], model: str, port: int, log: str) -> LlamaServer:
    assert flags[:2] == ["-m", "$MODEL"], flags
    return LlamaServer(model, port=port, base_args=sr.server_argv(flags, model)[2:], log=log)


def play(session: dict, model: str, port: int) -> list[dict]:
    steps = []
    answers = []
    log = f"/tmp/record_server_{session['name']}.log"
    with sr.Fixtures(session) as fx, start(session["flags"], model, port, log) as srv:
        for step in session["steps"]:
            req = step(answers) if callable(step) else step
            ans = sr.substitute_model(sr.exchange(srv.port, req, fx), model)
            answers.append(ans)
            steps.append({"request": req, "answer": ans})
    return steps


def unstable(a: list[dict], b: list[dict]) -> list[str]:
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if x["request"] != y["request"]:
            out.append(f"step {i}: the request differs (an earlier answer differed)")
            continue
        for d in sr.differences(sr.normalize(x["answer"], ""), sr.normalize(y["answer"], "")):
            out.append(f"step {i} {x['request']['path']}: {d}")
    return out


def record_sessions(only: set[str], check: bool, ports: Ports, model: str, legacy: bool = False) -> None:
    path = OUT / ("sessions_legacy.json" if legacy else "sessions.json")
    old = {s["name"]: s for s in json.loads(path.read_text())} if path.exists() else {}
    out = []
    for sess in (server_sessions.legacy_sessions() if legacy else server_sessions.sessions()):
        if only and sess["name"] not in only:
            if sess["name"] in old:
                out.append(old[sess["name"]])
            continue
        t = time.time()
        steps = play(sess, model, ports.next())
        rec = {"name": sess["name"], "flags": sess["flags"], "note": sess["note"], "steps": steps}
        rec.update({k: sess[k] for k in ("target", "files", "git", "blank") if k in sess})
        if check:
            problems = unstable(steps, play(sess, model, ports.next()))
            if problems:
                print(f"UNSTABLE {sess['name']}: left out\n  " + "\n  ".join(p[:300] for p in problems[:5]))
                continue
        statuses = [s["answer"]["status"] for s in steps]
        print(f"{sess['name']}: {len(steps)} requests, statuses {statuses}, {time.time() - t:.1f} s", flush=True)
        out.append(rec)
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")


def play_bad(group: dict, model: str, port: int) -> list[dict]:
    steps = []
    with start(group["flags"], model, port, f"/tmp/record_server_bad_{group['name']}.log") as srv:
        for req in group["requests"]:
            steps.append({"request": req, "answer": sr.substitute_model(sr.answer_record(*sr.send(srv.port, req)),
                                                                         model)})
    return steps


def record_bad(only: set[str], check: bool, ports: Ports, model: str) -> None:
    path = OUT / "bad_requests.json"
    old = {g["name"]: g for g in json.loads(path.read_text())} if path.exists() else {}
    out = []
    for group in server_sessions.bad_requests():
        if only and group["name"] not in only:
            if group["name"] in old:
                out.append(old[group["name"]])
            continue
        steps = play_bad(group, model, ports.next())
        if check:
            problems = unstable(steps, play_bad(group, model, ports.next()))
            if problems:
                print(f"UNSTABLE bad {group['name']}: left out\n  " + "\n  ".join(p[:300] for p in problems[:5]))
                continue
        print(f"bad {group['name']}: {len(steps)} requests, statuses {[s['answer']['status'] for s in steps]}")
        out.append({"name": group["name"], "flags": group["flags"], "steps": steps})
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")


def record_file(name: str, sessions: list[dict], doc: str, port_base: int, play_session=play) -> None:
    """The command line of a recorder of one file of sessions (testing/record_anthropic.py,
    testing/record_responses.py): [--no-check] [--port-base N]; each session played twice (unless --no-check)
    with `play_session(session, model, port)`, an unstable one left out, the rest written to OUT / name."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--port-base", type=int, default=port_base)
    args = ap.parse_args()
    write_sessions(name, sessions, args.port_base, not args.no_check, play_session)


def write_sessions(name: str, sessions: list[dict], port_base: int, check: bool = True, play_session=play) -> None:
    """record_file's work without its command line (for a recorder with options of its own,
    testing/record_context_shift.py): each session played (twice when `check`) on ports from `port_base`."""
    model = str(model_path("smollm2"))
    ports = Ports(port_base)
    out = []
    for sess in sessions:
        steps = play_session(sess, model, ports.next())
        if check:
            problems = unstable(steps, play_session(sess, model, ports.next()))
            if problems:
                print(f"UNSTABLE {sess['name']}: left out\n  " + "\n  ".join(p[:300] for p in problems[:5]))
                continue
        print(f"{sess['name']}: {len(steps)} requests, statuses {[s['answer']['status'] for s in steps]}")
        out.append({"name": sess["name"], "flags": sess["flags"], "note": sess["note"], "steps": steps})
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / name).write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")


def record_some(out: Path, sessions: list[dict], doc: str, port_base: int, model_of, fields=lambda sess: {}) -> None:
    """The command line of a recorder whose sessions may be re-recorded one by one (testing/record_server_gemma3.py,
    testing/record_server_qwen3.py): [--no-check] [--port-base N] [--only NAME ...]. Each session played on
    `model_of(session)` (twice unless --no-check: an unstable one is left out); a session not in --only keeps
    its earlier record. The record: name, `fields(session)`, flags, note, steps; written after each session."""
    from testing.record_tool_calls import _stable_play
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--port-base", type=int, default=port_base)
    ap.add_argument("--only", nargs="*", default=[])
    args = ap.parse_args()
    ports = Ports(args.port_base)
    kept = {x["name"]: x for x in json.loads(out.read_text())} if out.exists() else {}
    # not asked for: the earlier record stays (all of them in place before the first write)
    records = {sess["name"]: kept.get(sess["name"]) if args.only else None for sess in sessions}
    for sess in sessions:
        if args.only and sess["name"] not in args.only:
            continue
        records[sess["name"]] = None
        t = time.time()
        steps = _stable_play(sess, str(model_of(sess)), ports, not args.no_check)
        if steps is None:
            continue
        print(f"{sess['name']}: {len(steps)} requests, statuses {[x['answer']['status'] for x in steps]}, "
              f"{time.time() - t:.1f} s", flush=True)
        records[sess["name"]] = {"name": sess["name"], **fields(sess), "flags": sess["flags"], "note": sess["note"],
                                 "steps": steps}
        out.parent.mkdir(parents=True, exist_ok=True)   # after each session: a long run can be stopped and kept
        out.write_text(json.dumps([r for r in records.values() if r], ensure_ascii=False, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=[], help="record only these sessions / groups (keep the rest)")
    ap.add_argument("--bad-only", action="store_true")
    ap.add_argument("--sessions-only", action="store_true")
    ap.add_argument("--no-check", action="store_true", help="do not play each session twice")
    ap.add_argument("--port-base", type=int, default=8171)
    ap.add_argument("--legacy", action="store_true",
                    help="the --no-jinja / --chat-template / verbose sessions (sessions_legacy.json) only")
    args = ap.parse_args()
    model = str(model_path("smollm2"))
    ports = Ports(args.port_base)
    only = set(args.only)
    if args.legacy:
        record_sessions(only, not args.no_check, ports, model, legacy=True)
        return
    if not args.bad_only:
        record_sessions(only, not args.no_check, ports, model)
    if not args.sessions_only:
        record_bad(only, not args.no_check, ports, model)


if __name__ == "__main__":
    main()
