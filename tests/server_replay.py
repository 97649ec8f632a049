"""Sessions of HTTP requests recorded from llama-server b11192 (tests/oracle/server/, recorded by
testing/record_server.py), and their replay against a fresh bankml-serve.

One module for both sides, so the recorder and the replay send the same bytes and read the answers the same
way:

- `send(port, request)` sends one recorded request over a new loopback connection and returns its answer
  (status, headers, body bytes); `answer_record(...)` turns that into the record's form: the body as JSON, as
  an SSE event list, or as text.
- `normalize(answer, model)` blanks the values that differ from run to run (created, id (the Responses API's
  resp_ / msg_ / rs_ ids and item_id too; a tool call's 32-character id, and the fc_ / call_ ids a Responses
  function_call item makes of it), created_at, system_fingerprint,
  the measured times of timings (kept: int or float, and zero or not), stream sessions' started_at /
  completed_at / total_bytes (zero or not), /props' media marker, /metrics' rates and times) and writes the model path as
  `$MODEL`, so that a record made on one machine compares with an answer given on another.
- `BankmlServe(argv)` starts `bankml-serve` as a subprocess on a free port (real HTTP: headers, streams).
- `replay(session, model)` sends a session's requests in order to a fresh server and returns the differences
  (`replay_responses`: also where the Responses API's random ids repeat).

Comparisons are exact: bodies are compared as JSON text in the order the keys were sent (nlohmann's ordered
objects), SSE streams event by event.
"""

from __future__ import annotations

import functools
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bankml.cxx import nljson

RECORDS = Path(__file__).parent / "oracle" / "server"

# answer headers compared in replays (lower case); the rest (Date, Content-Length, Keep-Alive, Connection,
# Transfer-Encoding) belong to the HTTP layer and are recorded for reference only
COMPARED_HEADERS = ("content-type", "server", "access-control-allow-origin", "access-control-allow-credentials",
                    "access-control-allow-methods", "access-control-allow-headers", "x-accel-buffering")
NOT_RECORDED_HEADERS = ("date",)
# in sessions with a target server behind /cors-proxy (tests/proxy_target.py) every header is compared but these
TARGET_SKIPPED_HEADERS = ("date", "keep-alive", "connection", "transfer-encoding")

# timings' keys whose values are measured, not counted
MEASURED = ("prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_ms", "predicted_per_token_ms",
            "predicted_per_second", "save_ms", "restore_ms", "time_ms")
# /v1/streams/lookup's clock readings, and its byte counts (a stream's timings are measured floats of any length)
TIMESTAMPS = ("started_at", "completed_at", "total_bytes")
# /metrics series whose values are measured times or rates
METRICS_MEASURED = ("prompt_seconds_total", "tokens_predicted_seconds_total", "prompt_tokens_seconds",
                    "predicted_tokens_seconds")


# ---------------------------------------------------------------- requests

def request_bytes(req: dict) -> bytes | None:
    """The body a recorded request sends: `body` (JSON, dumped compactly), `raw` (text sent as UTF-8),
    `raw_hex` (bytes), or `fill` ({prefix, byte, size, suffix}: a body of `size` bytes)."""
    if "body" in req:
        return json.dumps(req["body"], ensure_ascii=False, separators=(",", ":")).encode()
    if "raw" in req:
        return req["raw"].encode()
    if "raw_hex" in req:
        return bytes.fromhex(req["raw_hex"])
    if "fill" in req:
        f = req["fill"]
        pre, suf = f["prefix"].encode(), f["suffix"].encode()
        return pre + f["byte"].encode() * (f["size"] - len(pre) - len(suf)) + suf
    return None


def send(port: int, req: dict, timeout: float = 300) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request over a fresh connection (HTTP/1.1, Connection: close); the answer's status, headers and
    body with chunked transfer decoding undone. With `"disconnect": true` the connection is closed as soon as
    the answer's head has arrived (the body is then empty)."""
    body = request_bytes(req)
    headers = dict(req.get("headers", {}))
    if body is not None:
        headers.setdefault("Content-Type", "application/json")
        headers["Content-Length"] = str(len(body))
    head = f"{req['method']} {req['path']} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(head.encode() + (body or b""))
        except (BrokenPipeError, ConnectionResetError):
            pass   # the server answered (413) before reading the whole body
        data = bytearray()
        if req.get("disconnect"):
            # the client goes away once the answer's head has arrived (what it was sent after that is not kept)
            while b"\r\n\r\n" not in data:
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
            return parse_http(bytes(data).partition(b"\r\n\r\n")[0] + b"\r\n\r\n")
        while True:
            try:
                chunk = s.recv(1 << 16)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    return parse_http(bytes(data))


def parse_http(data: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = []
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers.append((k.strip(), v.strip()))
    if any(k.lower() == "transfer-encoding" and "chunked" in v.lower() for k, v in headers):
        out = bytearray()
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            n = int(size_line.split(b";")[0], 16)
            if n == 0:
                break
            out += rest[:n]
            rest = rest[n + 2:]
        rest = bytes(out)
    return status, headers, rest


def ordered_json(text: str | bytes):
    return json.loads(text)   # dicts keep the order the keys were sent in


def dumps(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def sse_events(body: bytes) -> list:
    """An SSE body as its events: each `data:` payload parsed as JSON when it is JSON (else kept as text),
    a comment as {"comment": text}, other fields as {field: value}."""
    events = []
    for block in body.decode("utf-8", "surrogateescape").split("\n\n"):
        if not block:
            continue
        for line in block.split("\n"):
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "":
                events.append({"comment": value})
            elif field == "data":
                try:
                    events.append({"data": ordered_json(value)})
                except ValueError:
                    events.append({"data": value})
            else:
                events.append({field: value})
    return events


def answer_record(status: int, headers: list[tuple[str, str]], body: bytes) -> dict:
    """The record of one answer: status, headers (lower-case names, Date left out), and the body as `json`,
    `sse` (event list), `text`, or `hex` when it is not UTF-8."""
    hdrs = {k.lower(): v for k, v in headers if k.lower() not in NOT_RECORDED_HEADERS}
    rec = {"status": status, "headers": hdrs}
    ctype = hdrs.get("content-type", "")
    if ctype.startswith("text/event-stream"):
        rec["sse"] = sse_events(body)
        return rec
    if ctype.startswith("application/json") and body:
        try:
            rec["json"] = ordered_json(body)
            # nlohmann's dump() is compact, raw UTF-8, its doubles in Grisu2's digits (not always Python's repr)
            rec["compact"] = nljson.dump(rec["json"]).encode() == body
            return rec
        except ValueError:
            pass
    try:
        rec["text"] = body.decode()
    except UnicodeDecodeError:
        rec["hex"] = body.hex()
    return rec


# ---------------------------------------------------------------- normalization

def _norm_value(key, value, model: str):
    if key == "created" and isinstance(value, int):
        return 0
    if key == "id" and isinstance(value, str) and re.fullmatch(r"(chatcmpl|cmpl)-[0-9A-Za-z]+", value):
        return value.split("-")[0] + "-<id>"
    if key in ("id", "item_id") and isinstance(value, str) and re.fullmatch(r"(resp|msg|rs)_[0-9A-Za-z]{32}", value):
        return value.split("_")[0] + "_<id>"     # the Responses API's random ids (task_result_state)
    if (key in ("id", "item_id", "call_id") and isinstance(value, str)
            and re.fullmatch(r"(fc|call)_[0-9A-Za-z]{32}", value)):
        return value.split("_")[0] + "_<tool-call-id>"   # a Responses function_call item's ids (a tool call id)
    if key == "id" and isinstance(value, str) and re.fullmatch(r"[0-9A-Za-z]{32}", value):
        return "<tool-call-id>"                   # a parsed tool call's id (gen_tool_call_id: random, unseeded)
    if key == "created_at" and isinstance(value, int) and not isinstance(value, bool):
        return int(value != 0)                    # the Responses API's unix seconds
    if key == "system_fingerprint" and isinstance(value, str):
        return "<fingerprint>"
    if key == "media_marker" and isinstance(value, str):
        return "<media>"
    if key in MEASURED and isinstance(value, (int, float)) and not isinstance(value, bool):
        # measured: int or float is compared, and for timings' own fields zero or not (a time never measured)
        return type(value)(value != 0 and key not in ("save_ms", "restore_ms", "time_ms"))
    if key in TIMESTAMPS and isinstance(value, int) and not isinstance(value, bool):
        return int(value != 0)             # unix seconds (0: not yet), bytes (0: none yet)
    return _norm(value, model)


def _norm(value, model: str):
    if isinstance(value, dict):
        return {k: _norm_value(k, v, model) for k, v in value.items()}
    if isinstance(value, list):
        return [_norm(v, model) for v in value]
    return _subst(value, model)


def _norm_metrics(text: str) -> str:
    out = []
    for line in text.split("\n"):
        name = line.split(" ")[0].split("{")[0].removeprefix("llamacpp:")
        if not line.startswith("#") and name in METRICS_MEASURED:
            line = line.split(" ")[0] + " <measured>"
        out.append(line)
    return "\n".join(out)


def _subst(value, model: str):
    if isinstance(value, dict):
        return {k: _subst(v, model) for k, v in value.items()}
    if isinstance(value, list):
        return [_subst(v, model) for v in value]
    if isinstance(value, str) and model and model in value:
        return value.replace(model, "$MODEL")
    return value


def substitute_model(answer: dict, model: str) -> dict:
    """An answer record with the model path written `$MODEL` (what the recorder keeps)."""
    return _subst(answer, model)


def normalize(answer: dict, model: str) -> dict:
    """A copy of an answer record with the run-dependent values blanked (see the module docstring)."""
    a = dict(answer)
    if "json" in a:
        a["json"] = _norm(a["json"], model)
    if "sse" in a:
        a["sse"] = _norm(a["sse"], model)
    if "text" in a:
        text = a["text"].replace(model, "$MODEL") if model else a["text"]
        a["text"] = _norm_metrics(text) if a.get("headers", {}).get("content-type", "").startswith(
            "text/plain; version=0.0.4") else text
    return a


def _around(got: str, want: str, width: int = 600) -> str:
    # both texts from a little before their first difference
    i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    lo = max(0, i - 150)
    cut = (lambda t: ("..." if lo else "") + t[lo:lo + width] + ("..." if len(t) > lo + width else ""))
    return f"\n  got  {cut(got)}\n  want {cut(want)}"


def differences(want: dict, got: dict) -> list[str]:
    """What differs between a normalized recorded answer and a normalized replayed one."""
    diffs = []
    if want["status"] != got["status"]:
        diffs.append(f"status {got['status']} != {want['status']}")
    compared = COMPARED_HEADERS
    if "target_saw" in want or "target_saw" in got:
        compared = sorted({h for h in list(want["headers"]) + list(got["headers"]) if h not in TARGET_SKIPPED_HEADERS})
        if want.get("target_saw") != got.get("target_saw"):
            diffs.append(f"the target saw {got.get('target_saw')!r} != {want.get('target_saw')!r}")
    # a body that holds the model's path ($MODEL once normalized) has a length that depends on where the models
    # directory is ($BANKML_MODELS): its Content-Length is not compared
    holds_path = any("$MODEL" in dumps(a.get(k)) for a in (want, got) for k in ("json", "text", "sse") if k in a)
    for h in compared:
        if h == "content-length" and holds_path:
            continue
        if want["headers"].get(h) != got["headers"].get(h):
            diffs.append(f"header {h}: {got['headers'].get(h)!r} != {want['headers'].get(h)!r}")
    for kind in ("json", "text", "hex"):
        if kind in want or kind in got:
            w, g = want.get(kind), got.get(kind)
            if dumps(w) != dumps(g):
                diffs.append(f"{kind} body:" + _around(dumps(g), dumps(w)))
    if "sse" in want or "sse" in got:
        w, g = want.get("sse") or [], got.get("sse") or []
        for i in range(max(len(w), len(g))):
            we = dumps(w[i]) if i < len(w) else "(none)"
            ge = dumps(g[i]) if i < len(g) else "(none)"
            if we != ge:
                diffs.append(f"sse event {i} of {len(w)} (got {len(g)}):" + _around(ge, we))
                break
    if "json" in want and want.get("compact") and got.get("compact") is False:
        diffs.append("body is not compact JSON with raw UTF-8 (nlohmann's dump)")
    return diffs


# ---------------------------------------------------------------- bankml-serve

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when the parent dies (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes
    import signal
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)


# The day llama-server's clock showed while a session was recorded, where an answer prints it (a template calling
# strftime_now, as llama 3.1's "Today Date: 02 Dec 2026"): the wall clock is an input of such a prompt, so the
# replay sets bankml-serve's template clock to that day (the time of day kept) and the answers stay comparable
# bit for bit, whatever day the replay runs on.
RECORDED_DAY = re.compile(r"Today Date: (\d{2} [A-Z][a-z]{2} \d{4})")

# bankml-serve with the chat templates' clock moved by whole days (argv[1]: the day, "%d %b %Y")
_SHIFTED_CLOCK = """import sys, time, types, datetime
import bankml.chat.template as t
day = datetime.datetime.strptime(sys.argv.pop(1), "%d %b %Y").date()
shift = (day - datetime.date.fromtimestamp(time.time())).days * 86400
t._time = types.SimpleNamespace(time=lambda: time.time() + shift, localtime=time.localtime)
from bankml.server.cli import main
sys.exit(main())
"""


def recorded_day(session: dict) -> str | None:
    """The day a session was recorded on: the one its answers print (RECORDED_DAY), else the local day of the
    first `created` stamp llama-server wrote (its clock when it answered; a template may print that day even where
    the answer does not, as firefunction v2's "Today is Dec 03"), else None."""
    answers = [st["answer"] for st in session["steps"]]
    m = RECORDED_DAY.search(json.dumps(answers))
    if m:
        return m.group(1)
    stamp = _first_created(answers)
    return None if stamp is None else time.strftime("%d %b %Y", time.localtime(stamp))


def _first_created(value) -> int | None:
    if isinstance(value, dict):
        created = value.get("created")
        if isinstance(created, int) and not isinstance(created, bool) and created > 0:
            return created
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found = _first_created(item)
            if found is not None:
                return found
    return None


class BankmlServe:
    """`bankml-serve` with llama-server flags on a free loopback port, stopped (SIGTERM) on exit. template_day:
    the day the chat templates' clock shows (RECORDED_DAY), None for today."""

    def __init__(self, argv: list[str], port: int | None = None, start_timeout: float = 120,
                 template_day: str | None = None):
        self.port = port or free_port()
        launch = ["-m", "bankml.server.cli"] if template_day is None else ["-c", _SHIFTED_CLOCK, template_day]
        self.argv = [sys.executable] + launch + argv + ["--host", "127.0.0.1", "--port", str(self.port)]
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.log = b""

    def __enter__(self) -> "BankmlServe":
        # the log goes to a file (a pipe nobody reads would block the server once full); the server dies with
        # the process that started it (PR_SET_PDEATHSIG), so a killed test run leaves no server behind
        self._logfile = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.argv, stdout=self._logfile, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"), preexec_fn=_die_with_parent)
        deadline = time.time() + self.start_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                self.log = self.read_log()
                raise RuntimeError(f"bankml-serve exited with {self.proc.returncode}: {' '.join(self.argv)}\n"
                                   + self.log.decode(errors="replace")[-3000:])
            try:
                status, _, _ = send(self.port, {"method": "GET", "path": "/health"}, timeout=5)
                if status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.__exit__()
        raise RuntimeError(f"bankml-serve did not answer /health in {self.start_timeout} s")

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log = self.read_log() if self.proc else b""

    def read_log(self) -> bytes:
        self._logfile.seek(0)
        return self._logfile.read()

    def answer(self, req: dict) -> dict:
        return answer_record(*send(self.port, req))


# ---------------------------------------------------------------- records and replay

def _swap(value, old: str, new: str):
    if isinstance(value, dict):
        return {_swap(k, old, new): _swap(v, old, new) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, old, new) for v in value]
    return value.replace(old, new) if isinstance(value, str) else value


class Fixtures:
    """What a session's steps run against besides the server: a target server behind /cors-proxy (`"target":
    true`, tests/proxy_target.Target, written `$TARGET` in requests and answers) and a fresh directory holding
    `"files"` ({relative path: text or {"hex": bytes}}, written `$TOOLS`; `"git": true` makes it a fresh git
    repository, untracked), for /tools."""

    def __init__(self, session: dict):
        self.session = session
        self.target = None
        self.swaps: list[tuple[str, str]] = []
        self._stack = None

    def __enter__(self) -> "Fixtures":
        import contextlib
        self._stack = contextlib.ExitStack()
        if self.session.get("target"):
            from proxy_target import Target
            self.target = self._stack.enter_context(Target())
            self.swaps += [("$TLSTARGET", self.target.tls_authority), ("$TARGET", self.target.authority)]
        if "files" in self.session:
            d = self._stack.enter_context(tempfile.TemporaryDirectory(prefix="bankml-tools-"))
            d = os.path.realpath(d)
            for rel, text in self.session["files"].items():
                p = Path(d) / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(bytes.fromhex(text["hex"]) if isinstance(text, dict) else text.encode())
            if self.session.get("git"):
                import shutil
                import unittest
                if shutil.which("git") is None:
                    raise unittest.SkipTest("the session needs git (its fixture directory is a repository)")
                subprocess.run(["git", "init", "-q", d], check=True)
            self.swaps.append(("$TOOLS", d))
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()


def exchange(port: int, req: dict, fx: Fixtures | None = None) -> dict:
    """send + answer_record, with the fixtures' placeholders put in the request and taken out of the answer; with
    a target the answer gets `target_saw`: the raw requests the target received meanwhile."""
    if fx is None or not fx.swaps:
        return answer_record(*send(port, req))
    for ph, real in fx.swaps:
        req = _swap(req, ph, real)
    ans = answer_record(*send(port, req))
    for ph, real in fx.swaps:
        ans = _swap(ans, real, ph)
    if fx.target is not None:
        ans["target_saw"] = fx.target.take()
    for key in fx.session.get("blank", ()):
        if isinstance(ans.get("json"), dict) and key in ans["json"]:
            ans["json"][key] = "<blank>"
    return ans


def load(name: str) -> list[dict]:
    return json.loads((RECORDS / name).read_text())


def server_argv(flags: list[str], model: str) -> list[str]:
    """The flags a session's server was started with, `$MODEL` replaced by the local model path, `$SLOTS`
    (--slot-save-path) by a fresh empty directory and `$TEMPLATE:NAME` (--chat-template-file) by a fresh copy of
    the reference sdist's models/templates/NAME (tests/_template_oracle.sdist_templates)."""
    out = []
    for f in flags:
        if f == "$SLOTS":
            f = tempfile.mkdtemp(prefix="bankml-slots-")
        elif f.startswith("$TEMPLATE:"):
            from _template_oracle import sdist_templates
            path = Path(tempfile.mkdtemp(prefix="bankml-template-")) / f[len("$TEMPLATE:"):]
            path.write_bytes(sdist_templates()[path.name])
            f = str(path)
        out.append(model if f == "$MODEL" else f)
    return out


def replay_answers(session: dict, model: str, argv_extra: list[str] | None = None) -> list[tuple[dict, dict]]:
    """Sends a session's requests in order to a fresh bankml-serve started with the session's flags; returns
    (recorded, replayed) answer pairs, both normalized."""
    out = []
    with Fixtures(session) as fx, BankmlServe(server_argv(session["flags"], model) + (argv_extra or []),
                                              template_day=recorded_day(session)) as srv:
        for step in session["steps"]:
            out.append((normalize(step["answer"], ""), normalize(exchange(srv.port, step["request"], fx), model)))
    return out


def responses_ids(answer: dict) -> list[str]:
    """The Responses API's random ids in an answer, in order: resp_, msg_, fc_ and call_ values of id, item_id and
    call_id."""
    out = []

    def walk(v, key=None):
        if isinstance(v, dict):
            for k, x in v.items():
                walk(x, k)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif key in ("id", "item_id", "call_id") and isinstance(v, str) and v.split("_")[0] in (
                "resp", "msg", "fc", "call"):
            out.append(v)
    walk(answer.get("json", answer.get("sse")))
    return out


def responses_id_shape(answer: dict) -> list:
    """Which of an answer's Responses ids repeat where (what normalize blanks): each id's kind and the index
    where its random part first appears (a call's fc_ item id and its call_ id share the tool call's id)."""
    ids = responses_ids(answer)
    rand = [i.split("_", 1)[1] for i in ids]
    return [(i.split("_")[0], rand.index(r)) for i, r in zip(ids, rand)]


def replay_responses(session: dict, model: str) -> tuple[list[str], list[dict]]:
    """A Responses session replayed in order on a fresh bankml-serve: the differences (the normalized answers',
    and the ids' shapes) and the raw replayed answers."""
    problems, raw = [], []
    with Fixtures(session) as fx, BankmlServe(server_argv(session["flags"], model)) as srv:
        for i, step in enumerate(session["steps"]):
            got = exchange(srv.port, step["request"], fx)
            raw.append(got)
            want = step["answer"]
            for d in differences(normalize(want, ""), normalize(got, model)):
                problems.append(f"step {i} {step['request']['path']}: {d}")
            if responses_id_shape(got) != responses_id_shape(want):
                problems.append(f"step {i}: ids repeat as {responses_id_shape(got)} != "
                                f"{responses_id_shape(want)}")
    return problems, raw


def replay(session: dict, model: str, argv_extra: list[str] | None = None) -> list[str]:
    """One line per differing answer of a session replayed on a fresh bankml-serve (empty: all identical)."""
    problems = []
    for i, (want, got) in enumerate(replay_answers(session, model, argv_extra)):
        req = session["steps"][i]["request"]
        problems += [f"step {i} {req['method']} {req['path']}: {d}" for d in differences(want, got)]
    return problems


@functools.lru_cache(maxsize=None)
def _file_sha256(path: str) -> str:
    from bankml.models.verify import sha256_file
    return sha256_file(path)


def assert_replays_on_pinned(session: dict, path) -> None:
    """A session whose record pins its model file's sha256 ("sha256"): the file checked (once per path), then the
    session replayed on a fresh bankml-serve, every answer identical."""
    assert _file_sha256(str(path)) == session["sha256"], f"{path} is not the file the session was recorded on"
    problems = replay(session, str(path))
    assert not problems, f"{session['name']} ({len(problems)} differences):\n" + "\n".join(problems[:8])
