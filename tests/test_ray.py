"""bankml on Ray Serve (bankml.ray, docs/scale.md): two replicas on a local Ray cluster (ray.init(num_cpus=2), one
CPU and one compute thread a replica), llama-server b11192's recorded sessions (tests/oracle/server/) replayed
through Ray's HTTP proxy.

- Every session of the sample runs on a fresh application (as each was recorded on a fresh llama-server). A
  follow-up turn (a request whose prefix key, bankml.ray.affinity, shares its first block with an earlier request
  of the session) must be identical to the record, its cached tokens included: the router kept it where its
  prefix is. Any other request that reports the record's cache_n must be identical too (same cache, same
  batches). A new conversation that finds another cache on its replica than one server had (it reused only the
  template's default system prompt, or a few characters, which the key does not show) has the record's status
  and prompt tokens; its tokens may differ, as they would on a cold llama-server.
- Two single-conversation sessions replayed in lockstep on one application are each identical to their record,
  every field: each conversation kept a replica of its own.
- A replica killed between turns: the conversation goes on on the other one (its prefix recomputed: cache_n 0),
  answers identical to one bankml-serve's that gets the same turns on a cold cache, and the turn after is a
  follow-up again.
- A replica killed while it streams: the client gets llama-server's stream error event, not a bare 500.
- A client that leaves a stream: its replica's slot stops generating.

Ray's proxy (uvicorn) sends its own `server: uvicorn` and `x-request-id` headers besides bankml's; the compared
headers are bankml's (the last `server` header is bankml's `llama.cpp`).

Slow (each session starts an application: about 10 s under load); needs `pip install 'bankml[ray]'`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray Serve is not installed (pip install 'bankml[ray]')")
serve = pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'bankml[ray]')")

import server_replay as sr  # noqa: E402
from bankml.ray import affinity  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.oracle]

SESSIONS = {s["name"]: s for s in sr.load("sessions.json") + sr.load("sessions_legacy.json")}
COMMON = ["-m", "$MODEL", "-c", "4096", "-np", "1", "--jinja", "--reasoning", "off", "--no-webui"]
#: routes whose answers hold no state of the replica that answers them (/slots, /metrics, /v1/stream... do)
STATELESS = ("/completion", "/completions", "/v1/completions", "/v1/chat/completions", "/chat/completions",
             "/props", "/health", "/v1/models", "/models", "/apply-template", "/tokenize", "/detokenize")


def _sample() -> list[str]:
    """The sessions with llama-server's flags of the common set (any -t) on stateless routes only."""
    out = []
    for name, s in SESSIONS.items():
        flags = [f for i, f in enumerate(s["flags"]) if f != "-t" and (i == 0 or s["flags"][i - 1] != "-t")]
        if flags != COMMON or s.get("target") or "files" in s:
            continue
        if all(st["request"]["path"].split("?")[0] in STATELESS for st in s["steps"]):
            out.append(name)
    return out


SAMPLE = _sample()


@pytest.fixture(scope="module")
def cluster():
    tmp = tempfile.mkdtemp(prefix="bkray", dir="/tmp")      # short: Ray's socket paths must fit 107 bytes
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=tmp,
             object_store_memory=80 * 1024 * 1024)
    port = sr.free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    try:
        yield port, Path(tmp)
    finally:
        serve.shutdown()
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def _deploy(flags: list[str], model: str) -> None:
    from bankml.ray import serving
    serve.run(serving.application(sr.server_argv(flags, model), replicas=2, replica_cpus=1),
              name="bankml", route_prefix="/")


def _follow_ups(session: dict) -> list[bool]:
    seen, out = set(), []
    for st in session["steps"]:
        req = st["request"]
        key = affinity.of(req["method"], req["path"].split("?")[0], sr.request_bytes(req) or b"")
        out.append(bool(key and key.blocks and key.blocks[0] in seen))
        if key and key.blocks:
            seen.update(key.blocks)
    return out


def _cache_n(answer: dict):
    """The cached tokens an answer reports (timings.cache_n of its body or of its last event)."""
    bodies = [answer.get("json")] + [e.get("data") for e in answer.get("sse", [])]
    found = [b["timings"]["cache_n"] for b in bodies if isinstance(b, dict) and "cache_n" in b.get("timings", {})]
    return found[-1] if found else None


def test_sample_is_large_enough():
    assert len(SAMPLE) >= 20, SAMPLE


@pytest.mark.parametrize("name", SAMPLE)
def test_session_through_ray(cluster, name, smollm2_path):
    port, _ = cluster
    session = SESSIONS[name]
    _deploy(session["flags"], str(smollm2_path))
    problems = []
    for i, (step, follow_up) in enumerate(zip(session["steps"], _follow_ups(session))):
        want = sr.normalize(step["answer"], "")
        got = sr.normalize(sr.answer_record(*sr.send(port, step["request"])), str(smollm2_path))
        if follow_up or _cache_n(got) == _cache_n(want):
            # a follow-up must find its prefix where it goes; any request that found as much cache as on one
            # server computed the same batches: identical, every field
            problems += [f"step {i}{' (follow-up)' if follow_up else ''}: {d}" for d in sr.differences(want, got)]
        else:
            # a new conversation that one server started on a prefix the key does not show (the template's
            # default system prompt, a few shared characters), placed where its replica had another cache: other
            # prompt batches may give other floats; the request itself is the same (status, prompt tokens)
            _note(name, i)
            assert got["status"] == want["status"], f"{name} step {i}"
            assert _prompt_tokens(got) == _prompt_tokens(want), f"{name} step {i}"
    assert not problems, f"{name}:\n" + "\n".join(problems[:8])


def _note(name: str, i: int) -> None:
    """$BANKML_RAY_REPORT: a file that lists these steps, one a line (for docs/scale.md's counts)."""
    path = os.environ.get("BANKML_RAY_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(f"{name} {i}\n")


def _prompt_tokens(answer: dict):
    bodies = [answer.get("json")] + [e.get("data") for e in answer.get("sse", [])]
    for b in reversed(bodies):
        if isinstance(b, dict):
            if isinstance(b.get("usage"), dict) and "prompt_tokens" in b["usage"]:
                return b["usage"]["prompt_tokens"]
            if "tokens_evaluated" in b:
                return b["tokens_evaluated"]
    return None


def _lockstep(port, model, sessions):
    problems = []
    for i in range(max(len(s["steps"]) for s in sessions)):
        for s in sessions:
            if i < len(s["steps"]):
                step = s["steps"][i]
                got = sr.normalize(sr.answer_record(*sr.send(port, step["request"])), model)
                problems += [f"{s['name']} step {i}: {d}" for d in sr.differences(sr.normalize(step["answer"], ""),
                                                                                   got)]
    return problems


def test_two_conversations_keep_their_replicas(cluster, smollm2_path):
    """Two conversations interleaved turn by turn: each identical to its record (cached tokens included), as
    if each had a server of its own, which it had. SmolLM2's template gives both the same system prefix, so
    on one replica of one slot the second conversation's first turn would reuse it (cache_n above 0)."""
    port, _ = cluster
    a, b = SESSIONS["multi_turn_plain"], SESSIONS["multi_turn_system"]
    assert a["flags"] == b["flags"]
    _deploy(a["flags"], str(smollm2_path))
    problems = _lockstep(port, str(smollm2_path), [a, b])
    assert not problems, "\n".join(problems[:8])
    assert sum(bool(_cache_n(st["answer"])) for s in (a, b) for st in s["steps"]) >= 4


def _replica_of(logs: Path, request_id: str) -> str:
    """The replica (its Serve id) whose log names the request."""
    for _ in range(50):
        for f in (logs / "session_latest" / "logs" / "serve").glob("replica_bankml_BankmlReplica_*.log"):
            if request_id in f.read_text(errors="replace"):
                return re.match(r"replica_bankml_BankmlReplica_([a-z0-9]+)", f.name).group(1)
        time.sleep(0.1)
    raise AssertionError(f"no replica log names request {request_id}")


def _kill(replica: str) -> None:
    actor = ray.get_actor(f"SERVE_REPLICA::bankml#BankmlReplica#{replica}", namespace="serve")
    ray.kill(actor, no_restart=True)


def test_replica_killed_between_turns(cluster, smollm2_path):
    """Turn 1 on a replica, which is then killed; turns 2 and 3 go to the other one, whose cache never saw turn
    1: they are what one bankml-serve answers that gets turns 2 and 3 alone (a prompt computed from scratch
    may take other tokens than the record's turn 2, whose prefix was cached: batch shapes change the floats, in
    llama-server too)."""
    port, tmp = cluster
    model = str(smollm2_path)
    session = SESSIONS["multi_turn_plain"]
    steps = session["steps"]
    with sr.BankmlServe(sr.server_argv(session["flags"], model)) as one:
        reference = [sr.normalize(one.answer(st["request"]), model) for st in steps[1:]]
    _deploy(session["flags"], model)
    status, headers, body = sr.send(port, steps[0]["request"])
    first = sr.normalize(sr.answer_record(status, headers, body), model)
    assert not sr.differences(sr.normalize(steps[0]["answer"], ""), first)
    _kill(_replica_of(tmp, dict((k.lower(), v) for k, v in headers)["x-request-id"]))
    got = [sr.normalize(sr.answer_record(*sr.send(port, st["request"])), model) for st in steps[1:]]
    for want, answer in zip(reference, got):
        assert answer["status"] == 200
        assert not sr.differences(want, answer)
    assert _cache_n(got[0]) == 0 and _cache_n(got[1]) > 0     # turn 2 recomputed, turn 3 a follow-up again
    assert _cache_n(steps[1]["answer"]) > 0


def test_replica_killed_while_streaming(cluster, smollm2_path):
    port, tmp = cluster
    _deploy(COMMON[:1] + ["$MODEL"] + ["-t", "2"] + COMMON[2:], str(smollm2_path))
    messages = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]
    first = {"method": "POST", "path": "/v1/chat/completions",
             "body": {"messages": messages, "max_tokens": 8, "temperature": 0}}
    status, headers, body = sr.send(port, first)
    assert status == 200
    replica = _replica_of(tmp, dict((k.lower(), v) for k, v in headers)["x-request-id"])
    answer = json.loads(body)["choices"][0]["message"]
    follow = {"method": "POST", "path": "/v1/chat/completions",
              "body": {"messages": messages + [answer, {"role": "user", "content": "Go on, at length."}],
                       "max_tokens": 400, "temperature": 0, "stream": True}}
    box = {}

    def client():
        box["answer"] = sr.send(port, follow, timeout=120)
    t = threading.Thread(target=client)
    t.start()
    time.sleep(2.0)           # the follow-up is on its conversation's replica, streaming
    _kill(replica)
    t.join(120)
    status, headers, body = box["answer"]
    events = sr.sse_events(body)
    assert status == 200
    last = events[-1]["data"]
    assert last["error"]["code"] == 503 and last["error"]["type"] == "unavailable_error"
    assert "replica" in last["error"]["message"]
    # the next request goes to the replica left
    status, _, body = sr.send(port, {**follow, "body": {**follow["body"], "stream": False, "max_tokens": 4}})
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"]


def test_a_client_that_leaves_frees_its_slot(cluster, smollm2_path):
    """The client closes its connection in a long stream: Ray's proxy cancels the ingress, which cancels the
    replica's call, whose app sees the disconnect and stops the generation (one replica here, so that /slots is
    the one that streamed)."""
    import socket
    from bankml.ray import serving
    port, _ = cluster
    serve.run(serving.application(sr.server_argv(["-m", "$MODEL", "-t", "2"] + COMMON[2:], str(smollm2_path)),
                                  replicas=1), name="bankml", route_prefix="/")
    body = json.dumps({"messages": [{"role": "user", "content": "Write a very long story."}], "max_tokens": 4000,
                       "temperature": 0, "stream": True, "ignore_eos": True}).encode()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert s.recv(64).startswith(b"HTTP/1.1 200")
        time.sleep(1)
    for _ in range(100):
        status, _, raw = sr.send(port, {"method": "GET", "path": "/slots"})
        if status == 200 and not json.loads(raw)[0]["is_processing"]:
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the slot still generates for a client that left")
    assert json.loads(raw)[0]["next_token"][0]["n_decoded"] < 4000
