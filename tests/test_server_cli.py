"""bankml-serve as a process: it prints where it listens, answers, frees the slot when a stream's client goes
away, and stops cleanly on SIGTERM / SIGINT."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def serve(smollm2_path):
    procs = []

    def start(*flags):
        port = _free_port()
        p = subprocess.Popen([sys.executable, "-m", "bankml.server.cli", "-m", str(smollm2_path), "-c", "1024",
                              "-np", "1", "--port", str(port), *flags],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    return p, base
            except httpx.HTTPError:
                pass
            if p.poll() is not None:
                pytest.fail(p.stderr.read())
            time.sleep(0.1)
        pytest.fail("bankml-serve did not come up")
    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_listens_answers_and_stops_on_sigterm(serve):
    p, base = serve()
    r = httpx.post(base + "/completion", json={"prompt": "Hi", "n_predict": 2, "temperature": 0}, timeout=60)
    assert r.status_code == 200 and r.headers["server"] == "llama.cpp"
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 0
    err = p.stderr.read()
    assert f"listening on {base}" in err and "bankml-serve: stopped" in err
    assert "POST /completion 200" in err                       # one log line per request


def test_a_cut_stream_frees_the_slot(serve):
    p, base = serve()
    body = {"prompt": "Count to ten thousand:", "n_predict": 900, "ignore_eos": True, "temperature": 0,
            "stream": True}
    with httpx.Client(timeout=60) as c:
        with c.stream("POST", base + "/completion", json=body) as r:
            n = 0
            for line in r.iter_lines():
                if line.startswith("data: "):
                    n += 1
                    if n == 3:
                        break
    t0 = time.monotonic()
    r = httpx.post(base + "/completion", json={"prompt": "Hi", "n_predict": 1, "temperature": 0}, timeout=60)
    assert r.status_code == 200
    assert time.monotonic() - t0 < 20                          # not behind 900 tokens of the cut stream
    slots = httpx.get(base + "/slots", timeout=10).json()
    assert slots[0]["is_processing"] is False
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=30) == 0


def test_refused_command_lines_exit_2(smollm2_path):
    r = subprocess.run([sys.executable, "-m", "bankml.server.cli", "--mmproj", "x"], capture_output=True, text=True)
    assert r.returncode == 2 and "--mmproj: a llama-server flag bankml does not support" in r.stderr
    r = subprocess.run([sys.executable, "-m", "bankml.server.cli", "--nope"], capture_output=True, text=True)
    assert r.returncode == 2 and "invalid argument: --nope" in r.stderr


def test_several_addresses_and_a_unix_socket(smollm2_path, tmp_path):
    import os
    ipv6 = True
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        ipv6 = False
    port = _free_port()
    sock = tmp_path / "bankml.sock"
    hosts = ["127.0.0.1"] + (["::1"] if ipv6 else []) + [str(sock)]
    p = subprocess.Popen([sys.executable, "-m", "bankml.server.cli", "-m", str(smollm2_path), "-c", "1024", "-np",
                          "1", "--port", str(port), "--host", ",".join(hosts)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ, LLAMA_ARG_HOST="192.0.2.1"))
    try:
        _wait_for(p, f"http://127.0.0.1:{port}/health")
        if ipv6:
            assert httpx.get(f"http://[::1]:{port}/health", timeout=5).status_code == 200
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock))) as c:
            assert c.get("http://x/health", timeout=5).json() == {"status": "ok"}
            r = c.post("http://x/completion", json={"prompt": "Hi", "n_predict": 2, "temperature": 0}, timeout=60)
            assert r.status_code == 200 and r.json()["tokens_predicted"] == 2
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0
    err = p.stderr.read()
    assert "warn: LLAMA_ARG_HOST environment variable is set" in err
    for want in [f"listening on http://127.0.0.1:{port}"] + ([f"listening on http://[::1]:{port}"] if ipv6 else []) \
            + [f"listening on unix://{sock}"]:
        assert want in err


def test_port_0_and_unbindable_addresses(smollm2_path):
    base = [sys.executable, "-m", "bankml.server.cli", "-m", str(smollm2_path), "-c", "256", "-np", "1"]
    r = subprocess.run(base + ["--host", "127.0.0.1,::1", "--port", "0"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "--port 0 is not supported with multiple TCP addresses" in r.stderr
    r = subprocess.run(base + ["--host", "192.0.2.1", "--port", "9399"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "couldn't bind HTTP server socket, hostname: 192.0.2.1, port: 9399" in r.stderr


def _wait_for(p, url: str) -> None:
    """Until `url` answers 200 (the process must stay up meanwhile)."""
    for _ in range(300):
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert p.poll() is None, p.stderr.read()
        time.sleep(0.1)


def test_ollama_address(smollm2_path):
    # OLLAMA_HOST (envconfig.Host): bankml-serve also listens on Ollama's address, with Ollama's routes there
    import os
    from bankml.server.cli import ollama_address
    assert ollama_address({}) == ("127.0.0.1", 11434)
    assert ollama_address({"OLLAMA_HOST": "0.0.0.0"}) == ("0.0.0.0", 11434)
    assert ollama_address({"OLLAMA_HOST": "http://example.com"}) == ("example.com", 80)
    assert ollama_address({"OLLAMA_HOST": "'[::1]:5'"}) == ("::1", 5)
    assert ollama_address({"OLLAMA_HOST": "h:99999"}) == ("h", 11434)
    port, oport = _free_port(), _free_port()
    p = subprocess.Popen([sys.executable, "-m", "bankml.server.cli", "-m", str(smollm2_path), "-c", "1024", "-np",
                          "1", "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, OLLAMA_HOST=f"127.0.0.1:{oport}"))
    try:
        _wait_for(p, f"http://127.0.0.1:{oport}/")
        r = httpx.get(f"http://127.0.0.1:{oport}/", timeout=5)
        assert (r.status_code, r.text, r.headers["content-type"]) == (200, "Ollama is running",
                                                                      "text/plain; charset=utf-8")
        assert httpx.get(f"http://127.0.0.1:{oport}/api/version", timeout=5).json() == {"version": "0.13.3"}
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).json() == {"status": "ok"}
    finally:
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=30) == 0
    assert f"listening on http://127.0.0.1:{oport} (Ollama's address)" in p.stderr.read()
