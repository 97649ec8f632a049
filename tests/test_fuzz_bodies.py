"""2,000 seeded random request bodies against a real bankml-serve (issue 19, "Done": fuzzing), with /health polled
throughout by a thread of its own.

Each body goes to one of llama-server's JSON routes. It is one of: bytes that are not JSON (cut, doubled,
NaN, a lone surrogate escape, nothing), a JSON value that is not an object, or an object whose keys are drawn from
the fields those routes read, with values of every JSON type (wrong types, huge and negative numbers, deep
and wide nesting, odd strings). Lengths are kept short: `n_predict` / `max_tokens` are small whenever they are
numbers (and set when absent), so the run stays well under a minute of generation.

What must hold for every body:
- an answer, never a closed connection. A 5xx only where bankml gives llama-server's own 500 on purpose
  (llama-server b11192 answers many bad bodies with 500: nlohmann's exceptions, "Failed to parse tools: ...",
  "Unknown reasoning format: ..." from its ex_wrapper) or names what it does not reproduce (501): an exception
  that reached one of bankml-serve's catch-all handlers (they log a traceback) fails the test;
- the process alive;
- /health answered all along, none of its polls slower than HEALTH_MAX_S (a busy 2-core machine: generous, but a
  stalled event loop is seconds).
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time

import pytest

import server_replay as sr

pytestmark = pytest.mark.slow

N_BODIES = 2000
SEED = 19
HEALTH_MAX_S = 2.0
FLAGS = ["-c", "4096", "-np", "1", "-t", "2"]

ROUTES = ["/completion", "/completions", "/v1/completions", "/v1/chat/completions", "/chat/completions",
          "/tokenize", "/detokenize", "/apply-template", "/infill", "/api/chat", "/api/generate"]

FIELDS = ["prompt", "messages", "n_predict", "max_tokens", "max_completion_tokens", "temperature", "top_k", "top_p",
          "min_p", "typical_p", "stream", "stop", "seed", "grammar", "json_schema", "response_format", "logit_bias",
          "n_probs", "logprobs", "top_logprobs", "samplers", "id_slot", "cache_prompt", "tokens", "content",
          "add_special", "parse_special", "with_pieces", "n", "tools", "tool_choice", "penalty_last_n",
          "repeat_penalty", "presence_penalty", "frequency_penalty", "dry_multiplier", "dry_base",
          "dry_allowed_length", "dry_sequence_breakers", "mirostat", "mirostat_tau", "mirostat_eta",
          "xtc_probability", "xtc_threshold", "ignore_eos", "n_keep", "n_indent", "t_max_predict_ms",
          "return_tokens", "post_sampling_probs", "chat_template_kwargs", "reasoning_format", "parse_tool_calls",
          "lora", "input_prefix", "input_suffix", "input_extra", "model", "stream_options", "n_cmpl",
          "timings_per_token", "return_progress", "dynatemp_range", "dynatemp_exponent", "top_n_sigma",
          "backend_sampling", "options", "format", "raw", "system", "template", "context", "keep_alive", "think",
          "images", "suffix", "truncate", "shift", "role"]

#: fields whose numbers set how long an answer runs: kept small when they are numbers
LENGTHS = {"n_predict": 4, "max_tokens": 4, "max_completion_tokens": 4, "n_probs": 20, "top_logprobs": 20,
           "t_max_predict_ms": 2000, "n_indent": 8, "n_cmpl": 2, "n": 2}

STRINGS = ["", "a", "Hello", "\u0000", "\ud83d\ude00", "<|im_start|>", "root ::= \"a\"", "root ::= [a-z]+",
           "{\"type\": \"object\"}", "json_object", "json_schema", "text", "user", "assistant", "system", "tool",
           "x" * 3000, "../../etc/passwd", "%s%n", "\\u0041", "null", "-1", "1e309", "🙂" * 50, "\n\n\n",
           "temperature", "top_k", "dry", "none", "deepseek", "auto"]


def value(rng: random.Random, depth: int = 0):
    kind = rng.randrange(12 if depth < 4 else 7)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, 1, -1, 2, 7, 100, -100, 2**31 - 1, 2**31, -2**31 - 1, 2**53, 2**63, 2**64, -2**64,
                           10**30, 49151, 49152])
    if kind == 3:
        return rng.choice([0.0, -0.0, 0.5, 1.0, -1.5, 1e-30, 1e30, 1.7e308, -1.7e308, 2.5, 100.25])
    if kind in (4, 5, 6):
        return rng.choice(STRINGS)
    if kind in (7, 8):
        return [value(rng, depth + 1) for _ in range(rng.randrange(5))]
    if kind == 9:
        return {rng.choice(FIELDS + STRINGS[:8]): value(rng, depth + 1) for _ in range(rng.randrange(4))}
    if kind == 10:                                   # a message list with random parts
        return [{"role": rng.choice(["user", "assistant", "system", "tool", "x", 3]),
                 "content": value(rng, depth + 2)} for _ in range(rng.randrange(1, 4))]
    return rng.choice([[[[[[]]]]], {"a": {"b": {"c": {}}}}, list(range(300)), {"type": "object",
                       "properties": {"a": {"type": "string"}}}, {"type": "json_schema", "json_schema":
                       {"schema": {"type": "integer"}}}])


def body(rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.08:
        return rng.choice([b"", b"{", b"}", b"{\"a\":", b"[1,2", b"NaN", b"{\"prompt\": NaN}", b"\xff\xfe",
                           b"{\"prompt\": \"\\ud800\"}", b"{\"prompt\": \"a\"}{\"b\": 1}", b"{\"prompt\" 1}",
                           b"nul", b"\"str\"", b"{\"a\":1,}", b"   "])
    if r < 0.15:
        return json.dumps(value(rng)).encode()
    obj = {}
    for _ in range(rng.randrange(1, 7)):
        obj[rng.choice(FIELDS)] = value(rng)
    if rng.random() < 0.6:                            # a usable core more often than not
        obj.setdefault("messages", [{"role": "user", "content": rng.choice(STRINGS[:6])}])
        obj.setdefault("prompt", rng.choice(STRINGS[:6]))
    for k, cap in LENGTHS.items():
        v = obj.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            obj[k] = rng.randrange(cap + 1) if rng.random() < 0.9 else -1 if k in ("n_predict", "max_tokens") \
                else rng.randrange(cap + 1)
    for k in ("n_predict", "max_tokens"):             # an answer runs a few tokens at most
        obj.setdefault(k, rng.randrange(LENGTHS[k] + 1))
    obj.setdefault("options", {"num_predict": rng.randrange(4)})
    if obj.get("n_predict", 0) == -1 or obj.get("max_tokens", 0) == -1:
        obj["ignore_eos"] = False
        obj["t_max_predict_ms"] = 500               # an unbounded answer stops at half a second
    if isinstance(obj.get("options"), dict):
        obj["options"]["num_predict"] = rng.randrange(4)
    return json.dumps(obj).encode()


#: what bankml-serve logs when an exception reached one of its catch-all handlers (app.py's 500, the worker's)
BUG_LINES = (b"Traceback", b"unhandled error on", b"generation failed", b"worker task failed")


class Health(threading.Thread):
    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port, self.stop, self.worst, self.failures, self.polls = port, threading.Event(), 0.0, [], 0

    def run(self):
        while not self.stop.is_set():
            t = time.monotonic()
            try:
                status = sr.send(self.port, {"method": "GET", "path": "/health"}, timeout=30)[0]
                if status != 200:
                    self.failures.append(status)
            except OSError as e:
                self.failures.append(repr(e))
            self.worst = max(self.worst, time.monotonic() - t)
            self.polls += 1
            time.sleep(0.02)


def test_random_bodies(tmp_path, smollm2_path):
    rng = random.Random(SEED)
    bodies = [(rng.choice(ROUTES), body(rng)) for _ in range(N_BODIES)]
    bad, fives = [], []
    with sr.BankmlServe(["-m", str(smollm2_path)] + FLAGS) as srv:
        health = Health(srv.port)
        health.start()
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        try:
            for i, (path, raw) in enumerate(bodies):
                try:
                    conn.request("POST", path, body=raw, headers={"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    text = resp.read().decode("utf-8", "replace")
                    status = resp.status
                except (OSError, http.client.HTTPException) as e:
                    bad.append((i, path, raw[:300], "no answer", repr(e)))
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
                    if srv.proc.poll() is not None:
                        break
                    continue
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
                if status >= 500:
                    fives.append((i, path, raw[:300], status, text[:300]))
        finally:
            conn.close()
            health.stop.set()
            health.join(30)
        alive = srv.proc.poll() is None
    assert alive, "bankml-serve died: " + srv.log.decode(errors="replace")[-2000:]
    assert not bad, f"{len(bad)} bodies got no answer, the first: " + "\n".join(map(repr, bad[:10]))
    bugs = [line for line in srv.log.splitlines() if any(b in line for b in BUG_LINES)]
    assert not bugs, (f"{len(bugs)} exceptions reached a catch-all handler: {bugs[:5]}; the 5xx answers: "
                      + "\n".join(map(repr, fives[:20])))
    assert not health.failures, health.failures[:5]
    assert health.polls > 50
    assert health.worst < HEALTH_MAX_S, f"/health took {health.worst:.2f} s once"
