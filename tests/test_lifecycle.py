"""A model's life in a real bankml-serve (tests/server_replay.BankmlServe) over the real SmolLM2 files: what is in
the process's memory (its /proc/PID/maps and VmRSS) as models are loaded, swapped, put to sleep and woken, and
that every load runs the pin.

- router mode, --models-max 1, A (a hard link of the Q4_1 file) and B (a copy of the Q8_0 file) with their pins:
  A -> B -> A under load never has both files mapped, and greedy answers stay the same; a request for B waits
  for A's running generation, which ends whole; B's file changed while it is unloaded is refused on its next
  load while A keeps serving;
- single-model mode, --sleep-idle-seconds 1: asleep, the file is unmapped and the memory given back; woken, the
  same answer; a wake runs the pin too;
- a renamed copy of a pinned model is that model (its pin found by sha256); an unpinned file is refused at start;
- a file changed under a running generation: the new request is refused at once, the running one ends whole.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import server_replay as sr

pytestmark = pytest.mark.slow

A, B = "smollm2-135m-instruct-q4_1", "smollm2-135m-instruct-q8_0"
FLAGS = ["-c", "4096", "-np", "1", "-t", "2"]
QUESTION = "What is the capital of France?"
JOIN = 180.0


def chat(port: int, model: str | None = None, content: str = QUESTION, max_tokens: int = 8) -> dict:
    body = {"messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": max_tokens}
    if model is not None:
        body["model"] = model
    return sr.answer_record(*sr.send(port, {"method": "POST", "path": "/v1/chat/completions", "body": body}))


def content_of(answer: dict) -> str:
    assert answer["status"] == 200, answer
    return answer["json"]["choices"][0]["message"]["content"]


def get(port: int, path: str) -> dict:
    return sr.answer_record(*sr.send(port, {"method": "GET", "path": path}))


def model_status(port: int, model: str) -> dict:
    for m in get(port, "/models")["json"]["data"]:
        if m["id"] == model:
            return m["status"]
    raise AssertionError(f"{model} is not in /models")


def wait_until(pred, timeout: float = 30.0, what: str = "") -> None:
    deadline = time.time() + timeout
    while not pred():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def mapped_inodes(pid: int, inodes: set[int]) -> set[int]:
    """Which of these files (by inode) the process has mapped now (/proc/PID/maps' inode column)."""
    found = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 6 and int(fields[4]) in inodes:
                found.add(int(fields[4]))
    return found


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


def flip_byte(path: Path) -> None:
    """One byte in the middle of a file (its tensor data) inverted, in place; flipped again, the file is back."""
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))


def place(src: Path, dest: Path, link: bool) -> Path:
    """src and its pin in dest (a hard link, or a copy of its own), under src's name."""
    out = dest / src.name
    if link:
        try:
            os.link(src, out)
        except OSError:
            shutil.copyfile(src, out)
    else:
        shutil.copyfile(src, out)
    shutil.copyfile(str(src) + ".FORK.json", str(out) + ".FORK.json")
    return out


# ---------------------------------------------------------------- router mode, --models-max 1

@pytest.fixture(scope="module")
def router(tmp_path_factory, smollm2_path, smollm2_q8_0_path):
    """(server, path of A, path of B): A a hard link of the Q4_1 file, B a copy of the Q8_0 file (its own bytes:
    a test may change them)."""
    d = tmp_path_factory.mktemp("models")
    a = place(smollm2_path, d, link=True)
    b = place(smollm2_q8_0_path, d, link=False)
    with sr.BankmlServe(["--models-dir", str(d), "--models-max", "1"] + FLAGS) as srv:
        yield srv, a, b


def test_swaps_under_load_never_map_two_models(router):
    srv, a, b = router
    ino = {os.stat(a).st_ino: A, os.stat(b).st_ino: B}
    assert len(ino) == 2
    samples: list[set[int]] = []
    stop = threading.Event()

    def sample():
        while not stop.is_set() and len(samples) < 200_000:
            samples.append(mapped_inodes(srv.proc.pid, set(ino)))
            time.sleep(0.002)

    answers: list[tuple[str, dict]] = []

    def client(models):
        for m in models:
            answers.append((m, chat(srv.port, m)))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    clients = [threading.Thread(target=client, args=([A, B, A, B, A],), daemon=True),
               threading.Thread(target=client, args=([B, A, B, A],), daemon=True)]
    for t in clients:
        t.start()
    for t in clients:
        t.join(JOIN)
    stop.set()
    sampler.join(10)
    assert not any(t.is_alive() for t in clients), "the chat requests did not finish"
    assert len(answers) == 9
    for m, ans in answers:
        assert ans["status"] == 200, (m, ans)
        assert ans["json"]["model"] == m
    by_model = {m: {content_of(ans) for mm, ans in answers if mm == m} for m in (A, B)}
    assert all(len(v) == 1 for v in by_model.values()), f"greedy answers differ: {by_model}"
    assert len(samples) > 50
    both = [s for s in samples if len(s) > 1]
    assert not both, f"{len(both)} of {len(samples)} samples of /proc/PID/maps show both model files mapped"
    seen = set().union(*samples)
    assert seen == set(ino), f"the sampler saw only {[ino[i] for i in seen]} mapped"


def test_request_for_another_model_waits_for_a_running_generation(router):
    srv, a, b = router
    ino = {os.stat(a).st_ino, os.stat(b).st_ino}
    content_of(chat(srv.port, A))                  # A resident
    long_req = {"method": "POST", "path": "/v1/chat/completions",
                "body": {"model": A, "messages": [{"role": "user", "content": "Count from 1 to 1000."}],
                         "temperature": 0, "max_tokens": 150, "ignore_eos": True}}
    done = {}

    def generate():
        done["answer"] = sr.answer_record(*sr.send(srv.port, long_req, timeout=120))
        done["at"] = time.time()

    running = threading.Thread(target=generate, daemon=True)
    running.start()
    time.sleep(0.3)                                # A is generating: B must wait, A must not be dropped
    waited = chat(srv.port, B)
    b_at = time.time()
    running.join(120)
    assert not running.is_alive()
    long_answer = done["answer"]
    assert long_answer["status"] == 200, long_answer
    assert long_answer["json"]["choices"][0]["finish_reason"] == "length"
    assert long_answer["json"]["usage"]["completion_tokens"] == 150
    assert waited["status"] == 200 and waited["json"]["model"] == B
    assert done["at"] <= b_at, "B was answered before A's running generation ended"
    assert model_status(srv.port, A)["value"] == "unloaded"
    assert len(mapped_inodes(srv.proc.pid, ino)) == 1


def test_each_load_runs_the_pin(router):
    srv, a, b = router
    want_a = content_of(chat(srv.port, A))          # A loaded: B (if it was) unloaded to make room
    wait_until(lambda: model_status(srv.port, B)["value"] == "unloaded", what=f"{B} to be unloaded")
    assert os.stat(b).st_nlink == 1, "B must be a copy of its own"
    flip_byte(b)                                    # one byte of B's weights flipped
    refused = chat(srv.port, B)
    assert refused["status"] == 500, refused
    assert refused["json"]["error"]["message"] == f"model name={B} failed to load"
    status = model_status(srv.port, B)
    assert status["value"] == "unloaded" and status.get("failed") is True
    log = srv.read_log().decode(errors="replace")
    assert f"model {B} not loaded" in log and "sha256" in log and f"{B}.gguf.FORK.json" in log, log[-2000:]
    assert content_of(chat(srv.port, A)) == want_a  # A keeps serving
    assert chat(srv.port, B)["status"] == 500       # and B is verified again on every load


# ---------------------------------------------------------------- single-model mode, sleep

def test_sleep_unmaps_the_model_and_frees_memory(smollm2_path):
    ino = {os.stat(smollm2_path).st_ino}
    with sr.BankmlServe(["-m", str(smollm2_path), "--sleep-idle-seconds", "1"] + FLAGS) as srv:
        pid = srv.proc.pid
        before = content_of(chat(srv.port, max_tokens=16))
        rss_used = rss_kb(pid)
        assert mapped_inodes(pid, ino) == ino
        wait_until(lambda: get(srv.port, "/props")["json"]["is_sleeping"] is True, 15, "the model to sleep")
        # /props says is_sleeping once the context is taken off the model, a moment before it is closed
        wait_until(lambda: mapped_inodes(pid, ino) == set(), 5, "the model file to be unmapped")
        # the weights and the KV cache (-c 4096) go; what stays is the Python process and its caches
        wait_until(lambda: rss_kb(pid) < rss_used - 50 * 1024, 5,
                   f"VmRSS to fall 50 MB below {rss_used} kB (it is {rss_kb(pid)} kB)")
        assert get(srv.port, "/props")["json"]["is_sleeping"] is True    # /props does not wake it
        after = content_of(chat(srv.port, max_tokens=16))
        assert after == before
        assert get(srv.port, "/props")["json"]["is_sleeping"] is False
        assert mapped_inodes(pid, ino) == ino


def test_a_wake_runs_the_pin(tmp_path, smollm2_path):
    copy = place(smollm2_path, tmp_path, link=False)
    with sr.BankmlServe(["-m", str(copy), "--sleep-idle-seconds", "1"] + FLAGS) as srv:
        before = content_of(chat(srv.port))
        wait_until(lambda: get(srv.port, "/props")["json"]["is_sleeping"] is True, 15, "the model to sleep")
        flip_byte(copy)
        refused = chat(srv.port)
        assert refused["status"] == 500, refused
        message = refused["json"]["error"]["message"]
        assert "cannot be loaded" in message and "sha256" in message and copy.name in message, message
        flip_byte(copy)                             # the pinned bytes again: the next wake is verified and served
        assert content_of(chat(srv.port)) == before


# ---------------------------------------------------------------- pins at start-up

def bankml(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bankml", *args], capture_output=True, text=True, timeout=120)


def test_renamed_copy_is_served_as_its_pinned_model(tmp_path, smollm2_path):
    copy = tmp_path / "copy.gguf"
    shutil.copyfile(smollm2_path, copy)
    assert not (tmp_path / "copy.gguf.FORK.json").exists()
    v = bankml("verify", str(copy))
    assert v.returncode == 0, v.stdout + v.stderr
    assert f"matched by sha256: the pinned {smollm2_path.name}" in v.stdout
    report = json.loads(bankml("verify", "--json", str(copy)).stdout)
    assert (report["pin_match"], report["pinned_as"]) == ("sha256", smollm2_path.name)
    with sr.BankmlServe(["-m", str(copy)] + FLAGS) as srv:
        assert content_of(chat(srv.port))


def test_unpinned_file_is_refused_at_start(tmp_path, smollm2_path):
    data = bytearray(smollm2_path.read_bytes())
    i = data.index(b"general.name")
    j = data.index(b"Smollm2", i)             # a letter of the model's name: the header still parses
    data[j] = ord("T")
    bad = tmp_path / "unpinned.gguf"
    bad.write_bytes(bytes(data))
    assert bankml("guard", str(bad)).returncode == 0
    r = subprocess.run([sys.executable, "-m", "bankml.server.cli", "-m", str(bad), "--port", "0"] + FLAGS,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stderr
    assert f"bankml pin {bad}" in r.stderr, r.stderr


# ---------------------------------------------------------------- a file changed under a running request

def test_changed_file_does_not_cut_a_running_generation_short(tmp_path, smollm2_path):
    copy = tmp_path / "copy.gguf"                  # a copy of its own (its mtime is changed), pinned by content
    shutil.copyfile(smollm2_path, copy)
    long_req = {"method": "POST", "path": "/v1/chat/completions",
                "body": {"messages": [{"role": "user", "content": "Count from 1 to 1000."}], "temperature": 0,
                         "max_tokens": 1500, "ignore_eos": True}}
    result = {}

    def generate(port):
        try:
            result["long"] = sr.answer_record(*sr.send(port, long_req, timeout=90))
        except (OSError, ValueError, IndexError) as e:     # the connection closed with no answer
            result["error"] = e

    with sr.BankmlServe(["-m", str(copy)] + FLAGS) as srv:
        running = threading.Thread(target=generate, args=(srv.port,), daemon=True)
        running.start()
        try:
            time.sleep(1.0)                        # the long generation is under way
            st = os.stat(copy)
            os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
            t = time.time()
            refused = chat(srv.port)
            took = time.time() - t
            assert refused["status"] == 500
            assert "changed after it was verified" in refused["json"]["error"]["message"]
            assert took < 5, f"the refusal waited {took:.1f} s for the running generation"
            running.join(90)
            assert "long" in result, f"the running generation was never answered ({result.get('error')!r})"
            assert result["long"]["status"] == 200
            assert result["long"]["json"]["choices"][0]["finish_reason"] == "length"
            assert content_of(chat(srv.port))      # the next request loads the file again
        finally:
            if running.is_alive():
                srv.proc.kill()
