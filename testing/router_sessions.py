"""The sessions testing/record_router.py plays against llama-server b11192 in router mode (a models directory,
no -m) and in single-model mode with --sleep-idle-seconds; tests/test_router_replay.py replays them against
bankml-serve from the records (tests/oracle/router/sessions.json).

A session is a fresh server started with `flags` ("$MODELS_DIR": a fresh directory laid out as the session's
`layout` says, {relative path: model file} with "->" in front of the file for a symbolic link; "$MODEL": the
Q4_1 file) and a list of steps sent in order. A step is a request dict, as in testing/server_sessions.py, or a
wait: {"wait": {"model": NAME, "status": VALUE}} polls GET /models until the entry of NAME has that
status.value, {"wait": {"props": FIELD, "value": V}} polls GET /props until its FIELD is V (in single-model mode
GET /props bypasses sleep, so polling it does not keep the server awake). A wait is recorded with the last
answer it polled; a replay polls the same way and compares that answer. {"spawn": request} sends a request on
a thread of its own (to keep a model busy), {"join": i} waits for the one spawned at step i, {"pause": s}
sleeps (tests/router_replay.run_steps).

Everything is greedy (temperature 0) and at most 16 tokens.
"""

from __future__ import annotations

from testing.server_sessions import get, post, user

Q4, Q8, F16 = "smollm2-135m-instruct-q4_1", "smollm2-135m-instruct-q8_0", "smollm2-135m-instruct-f16"
FILES = {Q4: "smollm2-135m-instruct-q4_1.gguf", Q8: "smollm2-135m-instruct-q8_0.gguf",
         F16: "smollm2-135m-instruct-f16.gguf"}
# the models directory of most sessions: the three files side by side (hard links or copies)
LAYOUT = {f: f for f in FILES.values()}

BASE = ["-t", "2", "-c", "4096", "-np", "1", "--jinja", "--reasoning", "off", "--no-webui"]
WAIT_TIMEOUT = 60.0   # seconds a wait polls before it gives up (recorded as "timed_out")
POLL = 0.05           # seconds between two polls


def router(*extra: str) -> list[str]:
    return ["--models-dir", "$MODELS_DIR"] + BASE + list(extra)


def single(*extra: str) -> list[str]:
    return ["-m", "$MODEL"] + BASE + list(extra)


def wait_status(model: str, status: str) -> dict:
    return {"wait": {"model": model, "status": status}}


def wait_props(field: str, value) -> dict:
    return {"wait": {"props": field, "value": value}}


def chat(model: str | None, text: str = "What is the capital of France?", **kw) -> dict:
    body = {"messages": [user(text)], "temperature": 0, "max_tokens": 12}
    if model is not None:
        body = {"model": model, **body}
    body.update(kw)
    return post("/v1/chat/completions", body)


def completion(model: str | None, prompt: str = "The capital of France is", **kw) -> dict:
    body = {"prompt": prompt, "temperature": 0, "n_predict": 10}
    if model is not None:
        body = {"model": model, **body}
    body.update(kw)
    return post("/completion", body)


def load(model) -> dict:
    return post("/models/load", {"model": model} if model is not None else {})


def unload(model) -> dict:
    return post("/models/unload", {"model": model} if model is not None else {})


MODELS = get("/models")


def sessions() -> list[dict]:
    s = []

    def add(name, steps, f, note="", layout=None):
        s.append({"name": name, "flags": f, "note": note, "layout": layout or LAYOUT, "steps": steps})

    add("router_basics", [
        get("/health"), get("/props"), MODELS, get("/v1/models"),
        chat(None), completion(None), chat("no-such-model"), post("/tokenize", {"content": "hi"}),
        get("/slots"), get("/metrics"), get("/props?model=no-such-model"),
        load("no-such-model"), load(None), unload("no-such-model"), unload(Q4),
        load(Q4), MODELS, wait_status(Q4, "loaded"), MODELS, load(Q4),
        get("/props?model=" + Q4), chat(Q4), completion(Q4), chat(Q4, stream=True),
        post("/v1/completions", {"model": Q4, "prompt": "Hello", "temperature": 0, "max_tokens": 6}),
        post("/tokenize", {"model": Q4, "content": "hello world"}),
        get("/slots?model=" + Q4), get("/metrics?model=" + Q4), get("/v1/models"),
        post("/v1/chat/completions", {"model": Q4, "messages": "not a list"}),
        post("/v1/chat/completions", None, raw="not json"), post("/models/load", None, raw="not json"),
        unload(Q4), wait_status(Q4, "unloaded"), MODELS, unload(Q4),
        get("/props?model=" + Q8), wait_status(Q8, "loaded"), get("/v1/models"),
    ], router("--models-max", "2"),
        note="router /props, /models, the errors of a request naming no model or an unknown one, load / unload "
             "and their errors, requests routed to a loaded model, a child's own error passed through, bodies that are not "
             "JSON, GET /props?model= autoloading")

    add("router_each_model", [
        chat(Q4), completion(Q4), MODELS,
        chat(Q8), completion(Q8), MODELS,
        chat(F16), completion(F16), wait_status(Q4, "unloaded"), MODELS,
        chat(Q4, "Say hi."), wait_status(Q8, "unloaded"), MODELS,
    ], router("--models-max", "2"),
        note="a chat and a completion for each model in turn, autoloaded; with --models-max 2 the third evicts "
             "the least recently used (q4_1), the fourth q8_0")

    add("router_lru_max1", [
        MODELS, get("/props"), chat(Q4), MODELS,
        chat(Q8), MODELS, completion(Q8),
        load(F16), MODELS, wait_status(F16, "loaded"), MODELS,
        completion(Q4), MODELS, unload(Q4), wait_status(Q4, "unloaded"), MODELS,
    ], router("--models-max", "1"),
        note="--models-max 1: each request for another model unloads the running one first (a request waits for "
             "it); /models/load of another model does the same")

    add("router_no_autoload", [
        get("/props"), chat(Q4), completion(Q4), get("/props?model=" + Q4), MODELS,
        load(Q4), wait_status(Q4, "loaded"), chat(Q4), get("/props?model=" + Q4),
        chat(Q8), unload(Q4), wait_status(Q4, "unloaded"), chat(Q4),
        get("/props?model=" + Q8 + "&autoload=true"), wait_status(Q8, "loaded"), MODELS,
        {**chat(F16), "path": "/v1/chat/completions?autoload=1"}, MODELS,
    ], router("--models-max", "2", "--no-models-autoload"),
        note="--no-models-autoload: a request for a model not running is refused until /models/load; "
             "?autoload=true (or 1) in the query loads it anyway")

    add("router_sleep", [
        load(Q4), wait_status(Q4, "loaded"), MODELS, wait_status(Q4, "sleeping"), MODELS,
        get("/props?model=" + Q4), get("/slots?model=" + Q4), MODELS,
        chat(Q4), MODELS, wait_status(Q4, "sleeping"),
        completion(Q4), wait_status(Q4, "sleeping"),
        chat(Q8), wait_status(Q4, "unloaded"), MODELS,
        wait_status(Q8, "sleeping"), unload(Q8), wait_status(Q8, "unloaded"), MODELS,
    ], router("--models-max", "1", "--sleep-idle-seconds", "1"),
        note="children started with --sleep-idle-seconds 1: status sleeping in /models, what a request to a "
             "sleeping model does, a sleeping model evicted (LRU) and unloaded")

    add("router_names", [
        MODELS, load("sub"), wait_status("sub", "loaded"), chat("sub"), MODELS,
        chat("linked"), chat("x.gguf"),
    ], router("--models-max", "1"),
        layout={"sub/smollm2-135m-instruct-q4_1.gguf": FILES[Q4], "linked.gguf": "->" + FILES[Q8],
                "x.gguf.gguf": FILES[Q4], "notes.txt": None, "empty/readme.md": None},
        note="names: a file's name without .gguf (every occurrence), a sub-folder's name; a symbolic link")

    add("router_sleep_metrics", [
        load(Q4), wait_status(Q4, "loaded"), wait_status(Q4, "sleeping"), get("/metrics?model=" + Q4), MODELS,
        get("/props?model=" + Q4), get("/health"), MODELS, post("/tokenize", {"model": Q4, "content": "hi"}),
        MODELS, get("/metrics?model=" + Q4),
    ], router("--models-max", "2", "--sleep-idle-seconds", "1", "--metrics"),
        note="a sleeping child's /metrics and /props (proxied; they do not wake it), /tokenize wakes it")

    busy = chat(Q4, "Write a long story about a dragon.", max_tokens=160)
    add("router_busy", [
        load(Q4), wait_status(Q4, "loaded"), {"spawn": busy}, {"pause": 0.5},
        load(Q8), MODELS, chat(Q8), {"join": 2}, MODELS,
        load(F16), unload(F16), wait_status(F16, "unloaded"), MODELS,
    ], router("--models-max", "1"),
        note="--models-max 1 with the running model busy (a 160-token generation spawned): /models/load of "
             "another is refused, a request for another waits until the busy one ends, then evicts it; a "
             "model unloaded while still loading (killed: failed, exit_code)")

    add("router_failed_load", [
        chat("bad"), MODELS, load("bad"), wait_status("bad", "unloaded"), MODELS, unload("bad"),
        chat("good"), MODELS,
    ], router("--models-max", "2"), layout={"bad.gguf": None, "good.gguf": FILES[Q4]},
        note="a model whose child fails to load (an empty .gguf): the request's error, /models' failed and "
             "exit_code")

    add("sleep_single", [
        get("/props"), wait_props("is_sleeping", True), get("/health"), get("/models"), get("/v1/models"),
        get("/props"), get("/metrics"), get("/props"),
        completion(None), get("/props"), wait_props("is_sleeping", True),
        post("/tokenize", {"content": "hello world"}), get("/props"), wait_props("is_sleeping", True),
        chat(None), get("/metrics"), wait_props("is_sleeping", True), get("/metrics"), get("/props"),
    ], single("--sleep-idle-seconds", "1", "--metrics"),
        note="single model, --sleep-idle-seconds 1: /props is_sleeping, what answers while asleep, what wakes")

    add("sleep_single_slots", [
        wait_props("is_sleeping", True), get("/slots"), get("/props"), wait_props("is_sleeping", True),
        post("/detokenize", {"tokens": [504, 3575]}), get("/props"), wait_props("is_sleeping", True),
        post("/apply-template", {"messages": [user("hi")]}), get("/props"),
    ], single("--sleep-idle-seconds", "1"),
        note="single model asleep: /slots, /detokenize, /apply-template (each wakes it or not)")
    return s
