"""llama.cpp b11192's own tests of the router and of sleep (tools/server/tests/unit/test_router.py and
test_sleep.py) run against bankml-serve, asserting what they assert.

What is swapped: the models (llama.cpp's test models come from a hub; here SmolLM2 files in a temp --models-dir,
hard links with their pins: tinygemma3 -> the Q4_1 file, stories260K -> the Q8_0 file, stories260K-infill -> the
F16 file; the router names them by file name), and the harness: `Server` below plays the part of llama.cpp's
ServerProcess / ServerPreset (same attributes, same flags passed, over tests/server_replay.BankmlServe) and
`make_request` / `make_stream_request` answer the same way (body parsed as JSON when it is JSON, a stream that
does not answer 200 raises ServerError).

The queue tests ("server_lru_sched") run with LLAMA_SERVER_DEBUG_FAKE_TIMING set, as llama.cpp's harness
sets it (its 2 s pauses in the router's loads and routed requests hold a model busy); the other tests without it
(it only slows them down). Tests that need what bankml does not have are kept, skipped with the missing feature
(MISSING): hub downloads, .ini presets, /models/sse.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time

import httpx
import pytest

import server_replay as sr
from conftest import models_dir

pytestmark = pytest.mark.slow

# llama.cpp's test models -> the SmolLM2 files standing in for them (their router ids: the file names)
TINYGEMMA3 = "smollm2-135m-instruct-q4_1"            # ggml-org/tinygemma3-GGUF:Q8_0
STORIES260K = "smollm2-135m-instruct-q8_0"           # ggml-org/test-model-stories260K:F32
STORIES260K_INFILL = "smollm2-135m-instruct-f16"     # ggml-org/test-model-stories260K-infill:F32
FILES = [f"{m}.gguf" for m in (TINYGEMMA3, STORIES260K, STORIES260K_INFILL)]

DEFAULT_REQUEST_TIMEOUT = 600
FAKE_TIMING = "LLAMA_SERVER_DEBUG_FAKE_TIMING"
# the tests llama.cpp's comment says rely on it ("server_lru_sched tests")
FAKE_TIMING_TESTS = {"test_router_queue_does_not_evict_busy_model", "test_router_queue_coalesces_requests_for_same_model",
                     "test_router_queue_client_disconnect_keeps_model", "test_router_queue_is_fifo",
                     "test_router_queue_two_waiters_share_one_eviction"}
TMP_DIR = None                                      # set by the models fixture (the presets' directory)

MISSING = {
    "hub": "bankml does not download models from a hub (-hf, POST /models, DELETE /models answer 501): models "
           "come from `bankml pull`, pinned, from package registries",
    "preset": "bankml does not read --models-preset .ini files (nor GET /models?reload=1 re-reading one)",
    "sse": "bankml does not stream /models/sse events (they report hub downloads, which bankml does not do)",
}


def missing(*features: str):
    """Skipped for these missing features (each one's reason)."""
    return pytest.mark.skip(reason="; ".join(MISSING[f] for f in features))


# ---------------------------------------------------------------- the harness

class ServerResponse:
    headers: dict
    status_code: int
    body: dict | str


class ServerError(Exception):
    def __init__(self, code, body):
        super().__init__(f"{code}: {body}")
        self.code = code
        self.body = body


def _body(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


class Server:
    """llama.cpp's ServerProcess over bankml-serve: set the attributes, start(), make requests; stop() at the
    end of the test (the fixture does)."""

    # llama.cpp's defaults (utils.py)
    temperature = 0.8
    seed = 42
    server_host = "127.0.0.1"

    def __init__(self):
        self.model_file: str | None = None
        self.model_alias: str | None = None
        self.models_dir: str | None = None
        self.models_max: int | None = None
        self.models_preset: str | None = None
        self.no_models_autoload: bool | None = None
        self.api_key: str | None = None
        self.n_ctx: int | None = None
        self.n_batch: int | None = None
        self.n_slots: int | None = None
        self.n_predict: int | None = None
        self.server_metrics = False
        self.sleep_idle_seconds: int | None = None
        self.model_hf_repo: str | None = None
        self.model_hf_file: str | None = None
        self.offline = True
        self.fake_timing = False
        self._srv: sr.BankmlServe | None = None

    def argv(self) -> list[str]:
        args = ["--temp", self.temperature, "--seed", self.seed]
        for flag, value in (("--model", self.model_file), ("--hf-repo", self.model_hf_repo),
                            ("--hf-file", self.model_hf_file), ("--models-dir", self.models_dir),
                            ("--models-max", self.models_max), ("--models-preset", self.models_preset),
                            ("--batch-size", self.n_batch), ("--alias", self.model_alias),
                            ("--ctx-size", self.n_ctx), ("--parallel", self.n_slots),
                            ("--n-predict", self.n_predict), ("--api-key", self.api_key),
                            ("--sleep-idle-seconds", self.sleep_idle_seconds)):
            if value is not None:
                args += [flag, value]
        args += ["--metrics"] if self.server_metrics else []
        args += ["--no-slots", "--no-jinja"]
        args += ["--no-models-autoload"] if self.no_models_autoload else []
        args += ["--offline"] if self.offline and (self.model_hf_repo or self.models_preset) else []
        return [str(a) for a in args]

    @property
    def server_port(self) -> int:
        return self._srv.port

    def start(self, timeout_seconds: int = 120) -> None:
        # LLAMA_SERVER_DEBUG_FAKE_TIMING: the router's 2 s pauses in every load and routed request, that the
        # queue tests hold a model busy with (llama.cpp's harness sets it for every server; here only for them)
        saved = os.environ.get(FAKE_TIMING)
        if self.fake_timing:
            os.environ[FAKE_TIMING] = "1"
        else:
            os.environ.pop(FAKE_TIMING, None)
        try:
            self._srv = sr.BankmlServe(self.argv(), start_timeout=timeout_seconds)
            self._srv.__enter__()
        finally:
            if saved is None:
                os.environ.pop(FAKE_TIMING, None)
            else:
                os.environ[FAKE_TIMING] = saved

    def stop(self) -> None:
        if self._srv is not None:
            self._srv.__exit__()
            self._srv = None

    def _url(self, path: str) -> str:
        return f"http://{self.server_host}:{self.server_port}{path}"

    @staticmethod
    def _headers(headers: dict | None) -> dict:
        return {k: v for k, v in (headers or {}).items() if v is not None}

    def make_request(self, method: str, path: str, data: dict | None = None, headers: dict | None = None,
                     timeout: float | None = DEFAULT_REQUEST_TIMEOUT) -> ServerResponse:
        r = httpx.request(method, self._url(path), json=data, headers=self._headers(headers), timeout=timeout)
        res = ServerResponse()
        res.headers, res.status_code, res.body = dict(r.headers), r.status_code, _body(r.text)
        return res

    def make_stream_request(self, method: str, path: str, data: dict | None = None, headers: dict | None = None):
        with httpx.stream(method, self._url(path), json=data, headers=self._headers(headers),
                          timeout=DEFAULT_REQUEST_TIMEOUT) as r:
            if r.status_code != 200:
                raise ServerError(r.status_code, _body(r.read().decode()))
            for line in r.iter_lines():
                if line.startswith("data: ") and line[6:] != "[DONE]":
                    yield json.loads(line[6:])


class ServerPreset:
    @staticmethod
    def router() -> Server:
        server = Server()
        server.models_dir = ROUTER_MODELS_DIR
        server.n_ctx = 1024
        server.n_batch = 16
        server.n_slots = 1
        server.n_predict = 16
        return server

    @staticmethod
    def tinyllama2() -> Server:
        server = Server()
        server.model_file = os.path.join(ROUTER_MODELS_DIR, f"{STORIES260K}.gguf")
        server.model_alias = "tinyllama-2"
        server.n_ctx = 512
        server.n_batch = 32
        server.n_slots = 2
        server.n_predict = 64
        return server


ROUTER_MODELS_DIR: str = ""
server: Server


@pytest.fixture(scope="module", autouse=True)
def models(tmp_path_factory, smollm2_path, smollm2_q8_0_path, smollm2_f16_path):
    """The temp --models-dir: hard links (copies where linking fails) of the three files and their pins (the
    derived two made first by conftest's fixtures, as `bankml pull` makes them)."""
    global ROUTER_MODELS_DIR, TMP_DIR
    src = models_dir()
    absent = [f for f in FILES if not (src / f).exists()]
    if absent:
        pytest.skip(f"model files missing from {src}: {', '.join(absent)} (`bankml pull` makes them)")
    d = tmp_path_factory.mktemp("router-models")
    for f in FILES:
        try:
            os.link(src / f, d / f)
        except OSError:
            shutil.copyfile(src / f, d / f)
        shutil.copyfile(src / f"{f}.FORK.json", d / f"{f}.FORK.json")
    ROUTER_MODELS_DIR = str(d)
    TMP_DIR = str(tmp_path_factory.mktemp("router-tmp"))
    yield


@pytest.fixture(autouse=True)
def create_server(request):
    global server
    server = ServerPreset.tinyllama2() if request.node.name.startswith("test_server_sleep") else ServerPreset.router()
    server.fake_timing = request.node.name in FAKE_TIMING_TESTS
    yield
    server.stop()


# ================================================================ test_router.py

def test_router_props():
    global server
    server.models_max = 2
    server.no_models_autoload = True
    server.start()
    res = server.make_request("GET", "/props")
    assert res.status_code == 200
    assert res.body["role"] == "router"
    assert res.body["max_instances"] == 2
    assert res.body["models_autoload"] is False
    assert res.body["build_info"].startswith("b")


@pytest.mark.parametrize(
    "model,success",
    [
        (TINYGEMMA3, True),
        ("non-existent/model", False),
    ]
)
def test_router_chat_completion_stream(model: str, success: bool):
    global server
    server.start()
    content = ""
    ex: ServerError | None = None
    try:
        res = server.make_stream_request("POST", "/chat/completions", data={
            "model": model,
            "max_tokens": 16,
            "messages": [
                {"role": "user", "content": "hello"},
            ],
            "stream": True,
        })
        for data in res:
            if data["choices"]:
                choice = data["choices"][0]
                if choice["finish_reason"] in ["stop", "length"]:
                    assert "content" not in choice["delta"]
                else:
                    assert choice["finish_reason"] is None
                    content += choice["delta"]["content"] or ''
    except ServerError as e:
        ex = e

    if success:
        assert ex is None
        assert len(content) > 0
    else:
        assert ex is not None
        assert content == ""


def _get_model_ids(is_reload: bool, headers: dict | None = None) -> set[str]:
    res = server.make_request(
        "GET", "/models" + ("?reload=1" if is_reload else ""), headers=headers
    )
    assert res.status_code == 200
    return {item["id"] for item in res.body.get("data", [])}


def _get_model_status(model_id: str, headers: dict | None = None) -> str:
    res = server.make_request("GET", "/models", headers=headers)
    assert res.status_code == 200
    for item in res.body.get("data", []):
        if item.get("id") == model_id or item.get("model") == model_id:
            return item["status"]["value"]
    raise AssertionError(f"Model {model_id} not found in /models response")


def _wait_for_model_status(model_id: str, desired: set[str], timeout: int = 60, headers: dict | None = None) -> str:
    deadline = time.time() + timeout
    last_status = None
    while time.time() < deadline:
        last_status = _get_model_status(model_id, headers=headers)
        if last_status in desired:
            return last_status
        time.sleep(0.01)
    raise AssertionError(
        f"Timed out waiting for {model_id} to reach {desired}, last status: {last_status}"
    )


def _load_model_and_wait(
    model_id: str, timeout: int = 60, headers: dict | None = None
) -> None:
    load_res = server.make_request(
        "POST", "/models/load", data={"model": model_id}, headers=headers
    )
    assert load_res.status_code == 200
    assert isinstance(load_res.body, dict)
    assert load_res.body.get("success") is True
    _wait_for_model_status(model_id, {"loaded"}, timeout=timeout, headers=headers)


def test_router_unload_model():
    global server
    server.start()
    model_id = TINYGEMMA3

    _load_model_and_wait(model_id)

    unload_res = server.make_request("POST", "/models/unload", data={"model": model_id})
    assert unload_res.status_code == 200
    assert unload_res.body.get("success") is True
    _wait_for_model_status(model_id, {"unloaded"})


def test_router_models_max_evicts_lru():
    global server
    server.models_max = 2
    server.start()

    candidate_models = [TINYGEMMA3, STORIES260K, STORIES260K_INFILL]

    # Load only the first 2 models to fill the cache
    first, second, third = candidate_models[:3]

    _load_model_and_wait(first, timeout=120)
    _load_model_and_wait(second, timeout=120)

    # Verify both models are loaded
    assert _get_model_status(first) == "loaded"
    assert _get_model_status(second) == "loaded"

    # Load the third model - this should trigger LRU eviction of the first model
    _load_model_and_wait(third, timeout=120)

    # Verify eviction: third is loaded, first was evicted
    assert _get_model_status(third) == "loaded"
    assert _get_model_status(first) == "unloaded"


# server_lru_sched tests (relying on LLAMA_SERVER_DEBUG_FAKE_TIMING)

MODEL_A = TINYGEMMA3
MODEL_B = STORIES260K
MODEL_C = STORIES260K_INFILL


def _tokenize(model_id: str, timeout: float | None = DEFAULT_REQUEST_TIMEOUT) -> ServerResponse:
    return server.make_request(
        "POST", "/tokenize", data={"model": model_id, "content": "hello world"}, timeout=timeout
    )


class _Bg:
    """one request on a thread of its own: its result, error and finish time"""

    def __init__(self, fn):
        self.result = None
        self.error: Exception | None = None
        self.done_at: float = 0.0
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)

    def _run(self, fn):
        try:
            self.result = fn()
        except Exception as e:        # noqa: BLE001 - asserted on by assert_ok
            self.error = e
        self.done_at = time.time()

    def start(self):
        self._thread.start()
        return self

    def join(self, timeout: int = 180):
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "background request did not finish in time"
        return self

    def assert_ok(self, what: str):
        assert self.error is None, f"{what} raised {self.error!r}"
        assert self.result is not None and self.result.status_code == 200, \
            f"{what} failed: {self.result.status_code if self.result else None} " \
            f"{self.result.body if self.result else None}"


def _start_with_busy_model(models_max: int, *preload: str) -> _Bg:
    """the server started with these models loaded, and a request against MODEL_A running"""
    global server
    server.models_max = models_max
    server.start()
    for model in preload:
        _load_model_and_wait(model, timeout=120)
    busy = _Bg(lambda: _tokenize(MODEL_A)).start()
    time.sleep(0.5)  # let the request reach the child and take the only slot
    return busy


def test_router_queue_does_not_evict_busy_model():
    """a request that finds no free slot waits, and the model serving a request survives it"""
    busy = _start_with_busy_model(1, MODEL_A)

    # no slot free and MODEL_A is busy, so this queues instead of evicting mid-request
    queued = _Bg(lambda: _tokenize(MODEL_B)).start()

    busy.join()
    queued.join()

    # had MODEL_A been evicted while serving, its own request would have died
    busy.assert_ok("request against the busy model")
    queued.assert_ok("queued request")

    _wait_for_model_status(MODEL_B, {"loaded"}, timeout=120)
    assert _get_model_status(MODEL_A) == "unloaded"


def test_router_queue_coalesces_requests_for_same_model():
    """many requests for one missing model share a slot, so only one model is given up"""
    # keep MODEL_A busy so MODEL_B is the only model that can be given up
    busy = _start_with_busy_model(2, MODEL_A, MODEL_B)

    waiters = [_Bg(lambda: _tokenize(MODEL_C)).start() for _ in range(3)]

    busy.join()
    for w in waiters:
        w.join()

    busy.assert_ok("request against the busy model")
    for i, w in enumerate(waiters):
        w.assert_ok(f"queued request {i}")

    _wait_for_model_status(MODEL_C, {"loaded"}, timeout=120)
    assert _get_model_status(MODEL_A) == "loaded"
    assert _get_model_status(MODEL_B) == "unloaded"


def test_router_queue_client_disconnect_keeps_model():
    """a client that leaves while queued must not cost a running model its slot"""
    busy = _start_with_busy_model(1, MODEL_A)

    # queues behind MODEL_A, then gives up long before MODEL_A goes idle
    with pytest.raises(httpx.HTTPError):
        _tokenize(MODEL_B, timeout=1)

    busy.join()
    busy.assert_ok("request against the busy model")

    # nobody is waiting anymore, so MODEL_A keeps its slot
    time.sleep(3)
    assert _get_model_status(MODEL_A) == "loaded"
    assert _get_model_status(MODEL_B) == "unloaded"


def test_router_queue_is_fifo():
    """the queue is served in arrival order"""
    busy = _start_with_busy_model(1, MODEL_A)

    first = _Bg(lambda: _tokenize(MODEL_B)).start()
    time.sleep(1)  # keep the arrival order unambiguous
    second = _Bg(lambda: _tokenize(MODEL_C)).start()

    busy.join()
    first.join()
    second.join()

    busy.assert_ok("request against the busy model")
    first.assert_ok("first queued request")
    second.assert_ok("second queued request")

    assert first.done_at < second.done_at, "queue was not served in arrival order"


def test_router_queue_two_waiters_share_one_eviction():
    """two requests that both find the same idle model must both be served in the end"""
    global server
    server.models_max = 1
    server.start()

    _load_model_and_wait(MODEL_A, timeout=120)

    # both arrive while MODEL_A is idle, so both want its slot; only one eviction can happen
    first = _Bg(lambda: _tokenize(MODEL_B)).start()
    second = _Bg(lambda: _tokenize(MODEL_C)).start()

    first.join(90)
    second.join(90)

    first.assert_ok("first queued request")
    second.assert_ok("second queued request")
    assert _get_model_status(MODEL_A) == "unloaded"


def _chat_hello(model_id: str, headers: dict | None = None) -> ServerResponse:
    return server.make_request(
        "POST",
        "/v1/chat/completions",
        headers=headers,
        data={
            "model": model_id,
            "messages": [{"role": "user", "content": "hello"}],
            "max_tokens": 4,
        },
    )


def test_router_no_models_autoload():
    global server
    server.no_models_autoload = True
    server.start()
    model_id = TINYGEMMA3

    res = _chat_hello(model_id)
    assert res.status_code == 400
    assert "error" in res.body

    _load_model_and_wait(model_id)

    success_res = _chat_hello(model_id)
    assert success_res.status_code == 200
    assert "error" not in success_res.body


def test_router_api_key_required():
    global server
    server.api_key = "sk-router-secret"
    server.start()

    model_id = TINYGEMMA3
    auth_headers = {"Authorization": f"Bearer {server.api_key}"}

    res = _chat_hello(model_id)
    assert res.status_code == 401
    assert res.body.get("error", {}).get("type") == "authentication_error"

    _load_model_and_wait(model_id, headers=auth_headers)

    authed = _chat_hello(model_id, headers=auth_headers)
    assert authed.status_code == 200
    assert "error" not in authed.body


@missing("preset")
def test_router_reload_models():
    """POST /models/reload re-reads the INI preset and updates the model list."""
    global server

    preset_path = os.path.join(TMP_DIR, "test_reload.ini")

    # Initial preset: two models
    with open(preset_path, "w") as f:
        f.write(
            "[model-reload-a]\n"
            "hf-repo = ggml-org/test-model-stories260K\n"
            "\n"
            "[model-reload-b]\n"
            "hf-repo = ggml-org/test-model-stories260K-infill\n"
        )

    server.models_preset = preset_path
    server.start()

    ids = _get_model_ids(is_reload=False)
    assert "model-reload-a" in ids
    assert "model-reload-b" in ids

    # Updated preset: remove a, keep b unchanged, add c
    with open(preset_path, "w") as f:
        f.write(
            "[model-reload-b]\n"
            "hf-repo = ggml-org/test-model-stories260K-infill\n"
            "\n"
            "[model-reload-c]\n"
            "hf-repo = ggml-org/test-model-stories260K\n"
        )

    try:
        ids = _get_model_ids(is_reload=True)
        assert "model-reload-a" not in ids, "removed model should no longer appear"
        assert "model-reload-b" in ids, "unchanged model should still appear"
        assert "model-reload-c" in ids, "newly added model should appear"
    finally:
        os.remove(preset_path)


@missing("preset")
def test_router_dedup_cache_models():
    """dedup-cache-models hides the cache entry backing a preset from GET /models"""
    global server

    preset_path = os.path.join(TMP_DIR, "test_dedup.ini")
    main_cache_id = STORIES260K
    draft_cache_id = STORIES260K_INFILL

    with open(preset_path, "w") as f:
        f.write(
            "[model-dedup]\n"
            "hf-repo = ggml-org/test-model-stories260K\n"
            "spec-draft-hf = ggml-org/test-model-stories260K-infill\n"
            "dedup-cache-models = 1\n"
        )

    server.models_preset = preset_path
    server.start()

    try:
        ids = _get_model_ids(is_reload=False)
        assert "model-dedup" in ids
        assert main_cache_id not in ids, "main cache model should be hidden by dedup"
        assert draft_cache_id not in ids, "draft cache model should be hidden by dedup"
        # other cache models are unaffected
        assert TINYGEMMA3 in ids

        # the hidden model is only hidden from the listing, it can still be used
        res = server.make_request("POST", "/tokenize", data={"model": main_cache_id, "content": "hello"})
        assert res.status_code == 200

        # disabling the flag brings the cache entry back on reload
        with open(preset_path, "w") as f:
            f.write(
                "[model-dedup]\n"
                "hf-repo = ggml-org/test-model-stories260K\n"
                "spec-draft-hf = ggml-org/test-model-stories260K-infill\n"
            )
        ids = _get_model_ids(is_reload=True)
        assert main_cache_id in ids
        assert draft_cache_id in ids

        # the flag also works from the global section
        with open(preset_path, "w") as f:
            f.write(
                "[*]\n"
                "dedup-cache-models = 1\n"
                "\n"
                "[model-dedup]\n"
                "hf-repo = ggml-org/test-model-stories260K\n"
                "spec-draft-hf = ggml-org/test-model-stories260K-infill\n"
            )
        ids = _get_model_ids(is_reload=True)
        assert "model-dedup" in ids
        assert main_cache_id not in ids, "main cache model should be hidden by global dedup"
        assert draft_cache_id not in ids, "draft cache model should be hidden by global dedup"
    finally:
        os.remove(preset_path)


@missing("hub")
def test_router_remote_preset():
    global server
    server.model_hf_repo = "ggml-org/test-preset-ci"
    server.model_hf_file = None
    server.offline = False
    server.start()

    # Should see preset models in GET /models
    res = server.make_request("GET", "/models")
    assert res.status_code == 200
    ids = {item["id"] for item in res.body.get("data", [])}
    assert "tinygemma3-preset" in ids
    assert "stories260K-test" in ids

    # Should be able to load a preset model
    model_id = "tinygemma3-preset"
    _load_model_and_wait(model_id)


MODEL_DOWNLOAD_ID = "ggml-org/test-model-router-download:F16"
MODEL_DOWNLOAD_TIMEOUT = 30


def _listen_sse(server: Server, collected: list, stop: threading.Event, ready: threading.Event | None = None):
    """/models/sse events into `collected` until `stop` is set; `ready` set once the stream is open"""
    url = f"http://{server.server_host}:{server.server_port}/models/sse"
    try:
        with httpx.stream("GET", url, timeout=MODEL_DOWNLOAD_TIMEOUT) as resp:
            if ready is not None:
                ready.set()
            for line in resp.iter_lines():
                if stop.is_set():
                    break
                if line.startswith("data: "):
                    collected.append(json.loads(line[6:]))
    except Exception:        # noqa: BLE001 - the listener ends with the stream
        pass


def _wait_for_sse_event(collected: list, event_type: str, model: str, timeout: int) -> bool:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(e.get("event") == event_type and e.get("model") == model for e in collected):
            return True
        time.sleep(0.01)
    return False


def _download_and_wait(server: Server, model: str) -> list:
    """POST /models (a download) with a /models/sse listener subscribed first; the events seen."""
    sse_events: list = []
    stop = threading.Event()
    sse_ready = threading.Event()
    threading.Thread(target=_listen_sse, args=(server, sse_events, stop, sse_ready), daemon=True).start()
    # subscribe before triggering the download: the one-shot download_finished event could be missed otherwise
    assert sse_ready.wait(10), "SSE client failed to connect"
    res = server.make_request("POST", "/models", data={"model": model})
    assert res.status_code == 200
    assert res.body.get("success") is True
    finished = _wait_for_sse_event(sse_events, "download_finished", model, MODEL_DOWNLOAD_TIMEOUT)
    stop.set()
    assert finished, "Never received download_finished SSE event"
    return sse_events


@missing("hub", "sse")
def test_router_download_model():
    """Case 1: download a model at the model limit, verify SSE events and GET /models."""
    global server
    server.models_max = 1
    server.start()

    # Ensure the model is not present before we start
    server.make_request("DELETE", f"/models?model={MODEL_DOWNLOAD_ID}")

    # A download worker must not consume or evict a model slot
    _load_model_and_wait(MODEL_B, timeout=120)

    sse_events = _download_and_wait(server, MODEL_DOWNLOAD_ID)
    assert any(
        e.get("event") == "download_progress" and e.get("model") == MODEL_DOWNLOAD_ID
        for e in sse_events
    ), "No download_progress events received"

    # Model should now appear in GET /models
    ids = _get_model_ids(is_reload=False)
    assert MODEL_DOWNLOAD_ID in ids, f"{MODEL_DOWNLOAD_ID} not found in /models after download"
    assert _get_model_status(MODEL_B) == "loaded"


@missing("hub", "sse")
def test_router_delete_model():
    """Case 2: delete the downloaded model, verify it disappears from GET /models."""
    global server
    server.start()

    # Ensure the model exists (download it if needed)
    if MODEL_DOWNLOAD_ID not in _get_model_ids(is_reload=False):
        _download_and_wait(server, MODEL_DOWNLOAD_ID)

    # Delete the model
    del_res = server.make_request("DELETE", f"/models?model={MODEL_DOWNLOAD_ID}")
    assert del_res.status_code == 200
    assert del_res.body.get("success") is True

    # Model should no longer appear in GET /models
    ids = _get_model_ids(is_reload=False)
    assert MODEL_DOWNLOAD_ID not in ids, f"{MODEL_DOWNLOAD_ID} still present after deletion"


# ================================================================ test_sleep.py

def is_sleeping(server: Server) -> bool:
    res = server.make_request("GET", "/props")
    assert res.status_code == 200
    return res.body["is_sleeping"]


def wait_for_sleep(server: Server, timeout: float = 10.0):
    start = time.time()
    while time.time() - start < timeout:
        if is_sleeping(server):
            return
        time.sleep(0.1)
    raise TimeoutError("server did not go to sleep")


def fetch_metrics(server: Server) -> str:
    res = server.make_request("GET", "/metrics")
    assert res.status_code == 200
    assert isinstance(res.body, str)
    return res.body


def get_metric(text: str, name: str) -> float:
    prefix = f"llamacpp:{name} "
    values = [ln for ln in text.splitlines() if ln.startswith(prefix)]
    assert len(values) == 1, f"{name} not found in metrics"
    return float(values[0][len(prefix):])


def test_server_sleep():
    global server
    server.sleep_idle_seconds = 1
    server.start()

    # wait a bit so that server can go to sleep
    time.sleep(2)

    # make sure these endpoints are still responsive after sleep
    res = server.make_request("GET", "/health")
    assert res.status_code == 200
    res = server.make_request("GET", "/props")
    assert res.status_code == 200
    assert res.body["is_sleeping"] is True
    res = server.make_request("GET", "/models")
    assert res.status_code == 200
    assert len(res.body["data"]) == 1
    assert res.body["data"][0]["id"] == server.model_alias

    # make a generation request to wake up the server
    res = server.make_request("POST", "/completion", data={
        "n_predict": 1,
        "prompt": "Hello",
    })
    assert res.status_code == 200

    # it should no longer be sleeping
    res = server.make_request("GET", "/props")
    assert res.status_code == 200
    assert res.body["is_sleeping"] is False


def _start_metrics_server_and_complete(n_predict: int):
    """the server started with sleep after 1 s and --metrics, and one completion answered"""
    global server
    server.sleep_idle_seconds = 1
    server.server_metrics = True
    server.start()

    res = server.make_request("POST", "/completion", data={
        "n_predict": n_predict,
        "prompt": "Hello",
    })
    assert res.status_code == 200


def test_server_sleep_read_only_endpoints():
    _start_metrics_server_and_complete(n_predict=4)

    # the first scrape resets the throughput buckets, so that the second one reports
    # the same zero rates as the snapshot taken on entering sleep
    fetch_metrics(server)
    metrics_awake = fetch_metrics(server)
    assert get_metric(metrics_awake, "tokens_predicted_total") > 0

    wait_for_sleep(server)

    # during sleep, metrics are served from the snapshot taken right before sleeping
    assert fetch_metrics(server) == metrics_awake

    # scraping /metrics must not wake the server up
    assert is_sleeping(server)


def test_server_sleep_metrics_buckets():
    _start_metrics_server_and_complete(n_predict=8)

    wait_for_sleep(server)

    # the first scrape reports the throughput of the last generation
    assert get_metric(fetch_metrics(server), "predicted_tokens_seconds") > 0

    # nothing runs while sleeping, so the next scrapes report an empty window
    assert get_metric(fetch_metrics(server), "predicted_tokens_seconds") == 0
    assert is_sleeping(server)

    # waking up must not report the buckets again
    res = server.make_request("POST", "/tokenize", data={"content": "Hello"})
    assert res.status_code == 200
    assert is_sleeping(server) is False
    assert get_metric(fetch_metrics(server), "predicted_tokens_seconds") == 0


# test_server_sleep_token_counting_wake, one test per token-counting endpoint

def _count_tokens_wakes(path: str, data: dict):
    global server
    server.sleep_idle_seconds = 1
    server.start()

    wait_for_sleep(server)
    assert is_sleeping(server)

    res = server.make_request("POST", path, data=data)
    assert res.status_code == 200
    assert res.body["input_tokens"] > 0
    assert is_sleeping(server) is False


def test_server_sleep_token_counting_wake():
    _count_tokens_wakes("/chat/completions/input_tokens", {
        "messages": [
            {"role": "user", "content": "Hello world"}
        ]
    })


def test_server_sleep_token_counting_wake_responses():
    _count_tokens_wakes("/v1/responses/input_tokens", {
        "input": "Hello world"
    })


def test_server_sleep_token_counting_wake_messages():
    _count_tokens_wakes("/v1/messages/count_tokens", {
        "messages": [
            {"role": "user", "content": "Hello world"}
        ]
    })
