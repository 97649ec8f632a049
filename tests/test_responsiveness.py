"""One heavy request never freezes the other clients (issue 19, finding 7): bankml-serve keeps answering GET /health
while it parses a large chat prompt, compiles a large `anyOf` schema, serializes a large `n_probs` answer, or
refuses an oversized body (llama-server's HTTP threads keep /health answering through all of these).

Each case runs one heavy request on a real bankml-serve (a subprocess) while a poller asks for /health every 10 ms
over fresh connections, and asserts the median and the worst of those polls: the median within 50 ms, the worst
within WORST (0.5 s). The worst bound is generous because on a busy 2-core machine (the suite runs beside other
work) a thread may wait 100-250 ms for a core whatever the server does; it stays meaningful because each case is
sized so that, before the event loop stopped parsing and serializing (docs/server.md, "Responsiveness"), /health
stalled 1 s or more on a quiet machine (1.6 s, 1.0 s and 1.6 s for the first three; longer on a busy one).

The payload limit follows cpp-httplib's (vendor/cpp-httplib/httplib.cpp (b11192): CPPHTTPLIB_PAYLOAD_MAX_LENGTH,
read_content: 413 with no body, after the route matched); bankml refuses a declared length before reading the
body, and counts a chunked one as it streams (before, it read one whole, past the limit).
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

import server_replay as sr

PAYLOAD_MAX = 100 * 1024 * 1024
POLL_EVERY = 0.01
MEDIAN = 0.05           # the typical /health answer while the heavy request runs
WORST = 0.5             # the worst one (see the module doc)


def _health(port: int) -> float:
    t = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    assert data.startswith(b"HTTP/1.1 200 "), data[:200]
    return time.perf_counter() - t


class Poller:
    """GET /health every POLL_EVERY seconds on a thread; `latencies` of every answer."""

    def __init__(self, port: int):
        self.port = port
        self.latencies: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stop.is_set():
            self.latencies.append(_health(self.port))
            time.sleep(POLL_EVERY)

    def __enter__(self):
        self.thread.start()
        time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        time.sleep(0.05)
        self.stop.set()
        self.thread.join()


#: the oracle's flags (docs/oracles.md)
FLAGS = ["-m", "$MODEL", "-t", "2", "-c", "4096", "-np", "1", "--jinja", "--reasoning", "off", "--no-webui"]


@pytest.fixture(scope="module")
def server(smollm2_path):
    with sr.BankmlServe(sr.server_argv(FLAGS, str(smollm2_path))) as srv:
        yield srv


def _post(port: int, path: str, body: bytes, headers: dict | None = None) -> tuple[int, bytes]:
    status, _, data = sr.send(port, {"method": "POST", "path": path, "raw": body.decode(),
                                     "headers": dict({"Content-Type": "application/json"}, **(headers or {}))})
    return status, data


def _during(port: int, fn):
    """fn() while /health is polled: (fn's result, the worst latency, the polls' latencies)."""
    with Poller(port) as p:
        out = fn()
    lat = sorted(p.latencies)
    return out, lat[-1], lat


def _check(name: str, worst: float, lat: list) -> None:
    median = lat[len(lat) // 2]
    said = f"{name}: /health's worst {worst * 1000:.0f} ms, median {median * 1000:.1f} ms over {len(lat)} polls"
    assert len(lat) >= 5, said
    assert worst <= WORST, said
    assert median <= MEDIAN, said


def _words(n: int) -> str:
    w = "lorem ipsum dolor sit amet consectetur adipiscing elit "
    return (w * (n // len(w) + 1))[:n]


def test_health_answers_during_a_large_chat_prompt(server):
    # 16 MB of text: the body's parse, the template's render and ~6 million tokens, then the context check
    body = json.dumps({"messages": [{"role": "user", "content": _words(16 << 20)}], "n_predict": 1}).encode()
    (status, data), worst, lat = _during(server.port, lambda: _post(server.port, "/v1/chat/completions", body))
    assert status == 400, data[:300]
    err = json.loads(data)["error"]
    assert err["type"] == "exceed_context_size_error" and err["n_ctx"] == 4096 and err["n_prompt_tokens"] > 10 ** 6
    _check("chat prompt", worst, lat)


def test_health_answers_during_a_large_anyof_schema(server):
    # 8,000 object alternatives: the schema's grammar and its compilation
    alts = [{"type": "object", "properties": {f"k{i}": {"type": "string"}, "v": {"type": "integer"}},
             "required": [f"k{i}"]} for i in range(8000)]
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "n_predict": 1, "temperature": 0,
                       "response_format": {"type": "json_schema", "json_schema": {"schema": {"anyOf": alts}}}})
    (status, data), worst, lat = _during(server.port, lambda: _post(server.port, "/v1/chat/completions",
                                                                     body.encode()))
    assert status == 200, data[:300]
    assert json.loads(data)["choices"][0]["finish_reason"] == "length"
    _check("anyOf schema", worst, lat)


def test_health_answers_while_a_large_n_probs_answer_is_built(server, smollm2_path):
    # every token's probability over the whole vocabulary, two tokens: a ~9 MB answer
    from bankml.tokenizer import Tokenizer
    n_vocab = Tokenizer.from_file(smollm2_path).n_vocab
    body = json.dumps({"prompt": "Once upon a time", "n_predict": 2, "n_probs": n_vocab, "temperature": 0})
    (status, data), worst, lat = _during(server.port, lambda: _post(server.port, "/completion", body.encode()))
    assert status == 200, data[:300]
    probs = json.loads(data)["completion_probabilities"]
    assert len(probs) == 2 and all(len(p["top_logprobs"]) == n_vocab for p in probs)
    assert len(data) > 5 << 20
    _check("n_probs answer", worst, lat)


def _open(port: int, head: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(head.encode())
    return s


def _read_all(s: socket.socket) -> bytes:
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, socket.timeout):
            break
        if not chunk:
            break
        data += chunk
    return data


def test_oversized_body_refused_from_its_content_length(server):
    # the head alone: the 413 comes before a byte of the body is sent (cpp-httplib would read 100 MiB first)
    def refuse():
        with _open(server.port, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                f"Content-Type: application/json\r\nContent-Length: {PAYLOAD_MAX + 1}\r\n\r\n") as s:
            t = time.perf_counter()
            return _read_all(s), time.perf_counter() - t
    (data, dt), worst, lat = _during(server.port, refuse)
    head = data.partition(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 413 ") and b"content-length: 0" in head and b"connection: close" in head
    assert b"content-type" not in head and data.endswith(b"\r\n\r\n")
    assert dt < 5
    # an unknown path is not read at all: its 404, as cpp-httplib matches the route before it reads the body
    with _open(server.port, f"POST /no-such-route HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                            f"Content-Length: {PAYLOAD_MAX + 1}\r\n\r\n") as s:
        assert _read_all(s).startswith(b"HTTP/1.1 404 ")


def test_chunked_body_cut_at_the_limit(server):
    # no Content-Length: counted as it streams; the 413 comes once the limit is passed, not after the whole body
    piece = b"a" * (1 << 20)

    def send_chunked():
        s = _open(server.port, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                               "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        sent = 0
        try:
            start = b'{"messages":[{"role":"user","content":"'
            s.sendall(b"%x\r\n%s\r\n" % (len(start), start))
            sent += len(start)
            while sent <= PAYLOAD_MAX + (8 << 20):       # past the limit, never the last chunk
                s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass
        s.settimeout(20)
        data = _read_all(s)
        s.close()
        return data, sent
    (data, sent), worst, lat = _during(server.port, send_chunked)
    head = data.partition(b"\r\n\r\n")[0].lower()
    assert head.startswith(b"http/1.1 413 ") and b"content-length: 0" in head, data[:300]
    assert sent <= PAYLOAD_MAX + (8 << 20) + (2 << 20)
    _check("chunked body", worst, lat)


def test_the_limit_comes_after_the_api_key(smollm2_path):
    # llama-server's pre-routing handler (server-http.cpp: CORS, server state, API key) runs before cpp-httplib
    # reads the body: a wrong key is its 401 whatever the declared length; the right one meets the 413
    argv = sr.server_argv(FLAGS + ["--api-key", "k1"], str(smollm2_path))
    with sr.BankmlServe(argv) as srv:
        for key, status in (("nope", b"401"), ("k1", b"413")):
            with _open(srv.port, "POST /completion HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                 f"Authorization: Bearer {key}\r\nContent-Length: {PAYLOAD_MAX + 1}\r\n\r\n") as s:
                assert _read_all(s).startswith(b"HTTP/1.1 " + status + b" ")


def test_dumps_is_nljson_dump_in_pieces():
    # the answer's JSON built in pieces is nljson.dump's text, byte for byte (dump_safe included): seeded objects
    # with long strings (sliced), escapes, invalid UTF-8 kept as surrogates, floats, nesting
    import random

    from bankml.cxx import nljson
    from bankml.server import http

    rng = random.Random(19)
    leaves = [None, True, False, 0, -5, 1 << 63, 1.5, 1e300, 3.0, -0.0, "", 'a"\\\n\x01\x7f é😀', "\udcff x",
              "\ud800 lone"]

    def value(depth=0):
        r = rng.random()
        if depth > 3 or r < 0.35:
            return rng.choice(leaves)
        if r < 0.65:
            return [value(depth + 1) for _ in range(rng.randint(0, 6))]
        return {f"k{i}\"é": value(depth + 1) for i in range(rng.randint(0, 6))}

    def whole(obj) -> bytes:
        text = nljson.dump(obj)
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            return http.safe_text(text).encode("utf-8")

    for i in range(200):
        obj = value()
        if i % 10 == 0:      # a string past a piece: cut into slices
            obj = {"content": rng.choice(leaves[-3:]) * (http.PIECE // 4) + "x" * rng.randint(0, 99), "x": obj}
        assert http.dumps(obj) == whole(obj)


def test_collector_policy_is_restored():
    import gc

    from bankml.server.http import CollectorPolicy
    before = gc.get_threshold()
    a, b = CollectorPolicy(), CollectorPolicy()
    assert gc.get_threshold()[2] == CollectorPolicy.FROZEN_OLD
    a.begin()
    a.end()
    a.close()
    assert gc.get_threshold()[2] == CollectorPolicy.FROZEN_OLD       # b still serves
    b.close()
    b.close()
    assert gc.get_threshold() == before
