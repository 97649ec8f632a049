"""Ollama's lifecycle on bankml-serve's residency (server/sched.go at v0.13.3): a request's keep_alive, the
unload once it expires (and at once for 0), /api/ps's expiry, a switch to another registry model by name, and
OLLAMA_MAX_QUEUE's 503 (sched.go:64, routes.go:2361)."""

import time

import pytest
from starlette.testclient import TestClient

from bankml.server.app import build_app

pytestmark = pytest.mark.slow

NAME = "smollm2-135m-instruct-q4_1"


@pytest.fixture
def app(smollm2_path, tmp_path, monkeypatch):
    # a models directory of our own: the startup model and a second one (a hard link of the same file: two names,
    # two residency entries, so a request for the other is a model switch)
    (tmp_path / f"{NAME}.gguf").hardlink_to(smollm2_path)
    (tmp_path / "other.gguf").hardlink_to(smollm2_path)
    for pin in smollm2_path.parent.glob(f"{NAME}.gguf.*.json"):
        (tmp_path / pin.name).write_bytes(pin.read_bytes())
    monkeypatch.setenv("BANKML_MODELS", str(tmp_path))
    return build_app(["-m", str(tmp_path / f"{NAME}.gguf"), "-c", "4096", "-np", "1", "-t", "2", "--jinja",
                      "--reasoning", "off"])


def _status(app, name):
    r = app.state.residency.resolve(name)
    return r.status if r is not None else None


def _wait_status(app, name, want, timeout=10.0):
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        if _status(app, name) == want:
            return True
        time.sleep(0.05)
    return False


def test_keep_alive_expires_and_zero_unloads(app):
    with TestClient(app) as c:
        q = {"model": NAME, "prompt": "Hi", "stream": False, "options": {"seed": 1, "num_predict": 2}}
        assert c.post("/api/generate", json=dict(q, keep_alive="1s")).status_code == 200
        ps = c.get("/api/ps").json()["models"]
        assert [m["name"] for m in ps] == [f"{NAME}:latest"] and ps[0]["expires_at"].endswith("Z")
        r = app.state.residency.resolve(NAME)
        assert r.keep_alive == 1.0
        # sched.go: the timer starts when the request is done; its model is unloaded when it fires
        assert _wait_status(app, NAME, "unloaded")
        assert c.get("/api/ps").json() == {"models": []}
        # the next request loads it again; keep_alive 0 unloads it as soon as the request ends
        a = c.post("/api/generate", json=dict(q, keep_alive=0)).json()
        assert a["done"] is True and a["load_duration"] > 0
        assert _wait_status(app, NAME, "unloaded")


def test_a_request_switches_models_by_name(app):
    with TestClient(app) as c:
        q = {"prompt": "Hi", "stream": False, "options": {"seed": 1, "num_predict": 3}}
        a = c.post("/api/generate", json=dict(q, model=NAME)).json()
        b = c.post("/api/generate", json=dict(q, model="other")).json()
        # one resident model (--models-max 1): the other one was dropped for it; the same file answers the same
        assert _status(app, "other") == "loaded" and _status(app, NAME) == "unloaded"
        assert b["response"] == a["response"] and b["model"] == "other"
        # a model loaded by an Ollama request without keep_alive gets OLLAMA_KEEP_ALIVE's default (5m)
        assert app.state.residency.resolve("other").keep_alive == 300.0


def test_max_queue(app, monkeypatch):
    with TestClient(app) as c:
        monkeypatch.setenv("OLLAMA_MAX_QUEUE", "0")
        # a loaded model takes no place in the queue
        assert c.post("/api/generate", json={"model": NAME, "prompt": ""}).status_code == 200
        # one that must be loaded waits in it: none may
        r = c.post("/api/generate", json={"model": "other", "prompt": "Hi"})
        assert (r.status_code, r.text) == (503, '{"error":"server busy, please try again.  maximum pending '
                                                'requests exceeded"}')
