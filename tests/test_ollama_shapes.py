"""The success bodies of Ollama's API on bankml-serve, as Ollama v0.13.3's Go structs declare them (api/types.go;
`routes.go` is server/routes.go): key order (struct field order; `omitempty` fields absent when zero, the others
always present), value types, `created_at` as Go's RFC 3339 with nanoseconds in UTC (time.Time's MarshalJSON:
RFC3339Nano, trailing zeros of the fraction dropped, `Z`), durations as integer nanoseconds, NDJSON streams
(one object a line, `application/x-ndjson`, `stream` absent means true), done_reason, /api/tags, /api/ps,
/api/show, / and /api/version (HEAD too), and the empty 200 bodies of copy and delete.

Every answer here is computed by the server: nothing but a shape or a relation between two of its answers is
asserted (a stream's pieces join to the non-stream text; generate's rendered prompt is llama-server's
/apply-template of the same messages).

Knows bankml only through HTTP (tests/ollama_serve.py).
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from ollama_serve import MODEL, call, go_json, model_file, serve

pytestmark = pytest.mark.slow

J = "application/json; charset=utf-8"
NDJSON = "application/x-ndjson"
TAG = f"{MODEL}:latest"
# time.Time MarshalJSON (RFC3339Nano): the fraction is absent when zero and never ends in 0; UTC prints Z
CREATED_AT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,8}[1-9])?Z$")
# modified_at / expires_at carry the server's local offset (Z when it is UTC)
LOCAL_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,8}[1-9])?(Z|[+-]\d\d:\d\d)$")

# struct field order (api/types.go); the names after "|" are omitempty
METRICS = ["total_duration", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count",
           "eval_duration"]
CHAT_RESPONSE = (["model", "created_at", "message", "done"],                      # types.go:385
                 ["model", "remote_model", "remote_host", "created_at", "message", "done", "done_reason",
                  "_debug_info", "logprobs", *METRICS])
MESSAGE = (["role", "content"],                                                   # types.go:195
           ["role", "content", "thinking", "images", "tool_calls", "tool_name", "tool_call_id"])
GENERATE_RESPONSE = (["model", "created_at", "response", "done"],                 # types.go:686
                     ["model", "remote_model", "remote_host", "created_at", "response", "thinking", "done",
                      "done_reason", "context", *METRICS, "tool_calls", "_debug_info", "logprobs"])
DETAILS = ["parent_model", "format", "family", "families", "parameter_size", "quantization_level"]  # types.go:728
LIST_MODEL = (["name", "model", "modified_at", "size", "digest", "details"],      # types.go:658
              ["name", "model", "remote_model", "remote_host", "modified_at", "size", "digest", "details"])
PROCESS_MODEL = ["name", "model", "size", "digest", "details", "expires_at", "size_vram", "context_length"]
SHOW_RESPONSE = (["details", "modified_at"],                                      # types.go:589
                 ["license", "modelfile", "parameters", "template", "system", "renderer", "parser", "details",
                  "messages", "remote_model", "remote_host", "model_info", "projector_info", "tensors",
                  "capabilities", "modified_at"])

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "options": {"temperature": 0, "seed": 42, "num_predict": 6}}
GENERATE = {"model": MODEL, "prompt": "Name a color.", "options": {"temperature": 0, "seed": 7, "num_predict": 5}}


def keys_in_go_order(obj: dict, struct: tuple[list, list]):
    required, order = struct
    keys = list(obj)
    assert set(required) <= set(keys), (required, keys)
    assert keys == [k for k in order if k in obj], (keys, order)


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_metrics(obj: dict, all_present: bool = False):
    for k in METRICS:
        if all_present:
            assert k in obj, (k, obj)
        if k in obj:                        # omitempty: a zero metric is absent, never 0
            assert is_int(obj[k]) and obj[k] > 0, (k, obj[k])


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    with serve(tmp_path_factory.mktemp("ollama-shapes-models")) as s:
        yield s


@pytest.fixture(scope="module")
def port(srv):
    return srv.port


# ---------------------------------------------------------------- / and /api/version

def test_root(port):
    # routes.go:1497-1498: c.String(200, "Ollama is running"); HEAD sends the head only
    get, head = call(port, "GET", "/"), call(port, "HEAD", "/")
    assert (get.status, get.content_type, get.body) == (200, "text/plain; charset=utf-8", b"Ollama is running")
    assert (head.status, head.content_type, head.body) == (200, "text/plain; charset=utf-8", b"")


def test_version(port):
    # routes.go:1499-1500: gin.H{"version": version.Version}
    get, head = call(port, "GET", "/api/version"), call(port, "HEAD", "/api/version")
    assert (get.status, get.content_type, get.body) == (200, J, b'{"version":"0.13.3"}')
    assert (head.status, head.content_type, head.body) == (200, J, b"")


# ---------------------------------------------------------------- /api/chat

def test_chat_nostream(port):
    a = call(port, "POST", "/api/chat", body={**CHAT, "stream": False})
    assert (a.status, a.content_type) == (200, J)
    r = a.json()
    keys_in_go_order(r, CHAT_RESPONSE)
    keys_in_go_order(r["message"], MESSAGE)
    assert r["model"] == MODEL and r["message"]["role"] == "assistant" and r["done"] is True
    assert CREATED_AT.match(r["created_at"]), r["created_at"]
    assert r["done_reason"] == "length" and r["eval_count"] == 6          # num_predict reached
    assert isinstance(r["message"]["content"], str) and r["message"]["content"]
    check_metrics(r, all_present=True)
    assert a.body == go_json(r)                                           # compact, Go's escaping


def test_chat_stream_absent_means_true(port):
    whole = call(port, "POST", "/api/chat", body={**CHAT, "stream": False}).json()
    a = call(port, "POST", "/api/chat", body=CHAT)                         # stream absent: true (types.go:139)
    assert (a.status, a.content_type) == (200, NDJSON)
    lines = a.lines()
    for line in a.body.decode().split("\n")[:-1]:
        assert line.encode() == go_json(json.loads(line))       # one compact object a line
    *chunks, final = lines
    assert chunks and all(c["done"] is False for c in chunks)
    for c in chunks:
        assert list(c) == ["model", "created_at", "message", "done"], c  # no metrics before the end
        assert list(c["message"]) == ["role", "content"] and c["message"]["role"] == "assistant"
        assert CREATED_AT.match(c["created_at"])
    keys_in_go_order(final, CHAT_RESPONSE)
    assert final["done"] is True and final["done_reason"] == "length" and final["message"] == {
        "role": "assistant", "content": ""}
    check_metrics(final, all_present=True)
    assert "".join(c["message"]["content"] for c in chunks) == whole["message"]["content"]
    assert final["eval_count"] == whole["eval_count"] and final["prompt_eval_count"] == whole["prompt_eval_count"]


def test_chat_stop_done_reason(port):
    # a stop string ends the answer with done_reason "stop" and is not part of the text
    base = call(port, "POST", "/api/chat", body={**CHAT, "stream": False,
                                                 "options": {**CHAT["options"], "num_predict": 12}}).json()
    text = base["message"]["content"]
    word = text.split()[1] if len(text.split()) > 1 else text[-1]
    r = call(port, "POST", "/api/chat", body={**CHAT, "stream": False,
                                              "options": {**CHAT["options"], "num_predict": 12,
                                                          "stop": [word]}}).json()
    assert r["done_reason"] == "stop"
    assert r["message"]["content"] == text[:text.index(word)]


def test_chat_load_and_unload(port):
    # routes.go:1903-1911: empty messages with keep_alive 0 unload; routes.go:2031-2038: otherwise they load
    unload = call(port, "POST", "/api/chat", body={"model": MODEL, "messages": [], "keep_alive": 0})
    assert (unload.status, unload.content_type) == (200, J)
    u = unload.json()
    assert list(u) == ["model", "created_at", "message", "done", "done_reason"]
    assert (u["model"], u["message"], u["done"], u["done_reason"]) == (MODEL, {"role": "assistant", "content": ""},
                                                                         True, "unload")
    assert CREATED_AT.match(u["created_at"])
    # expireRunner (server/sched.go) lets the scheduler unload it: /api/ps empties, at once or soon after
    deadline = time.time() + 10
    while call(port, "GET", "/api/ps").json() != {"models": []} and time.time() < deadline:
        time.sleep(0.05)
    assert call(port, "GET", "/api/ps").json() == {"models": []}
    load = call(port, "POST", "/api/chat", body={"model": MODEL, "messages": []}).json()
    assert list(load) == ["model", "created_at", "message", "done", "done_reason"]
    assert (load["message"], load["done"], load["done_reason"]) == ({"role": "assistant", "content": ""}, True, "load")
    assert [m["name"] for m in call(port, "GET", "/api/ps").json()["models"]] == [TAG]


def test_chat_debug_render_only(port):
    # routes.go:2076-2085: a ChatResponse with only model, created_at and _debug_info set: the zero message
    # (role and content are not omitempty) and done false are still written
    msgs = CHAT["messages"]
    a = call(port, "POST", "/api/chat", body={"model": MODEL, "messages": msgs, "_debug_render_only": True,
                                              "stream": False})
    r = a.json()
    assert list(r) == ["model", "created_at", "message", "done", "_debug_info"]
    assert (r["message"], r["done"]) == ({"role": "", "content": ""}, False)
    assert list(r["_debug_info"]) == ["rendered_template"]              # image_count 0: omitempty
    want = call(port, "POST", "/apply-template", body={"messages": msgs}).json()["prompt"]
    assert r["_debug_info"]["rendered_template"] == want


# ---------------------------------------------------------------- /api/generate

def test_generate_nostream(port):
    a = call(port, "POST", "/api/generate", body={**GENERATE, "stream": False})
    assert (a.status, a.content_type) == (200, J)
    r = a.json()
    keys_in_go_order(r, GENERATE_RESPONSE)
    assert r["model"] == MODEL and r["done"] is True and r["done_reason"] == "length" and r["eval_count"] == 5
    assert CREATED_AT.match(r["created_at"])
    assert isinstance(r["context"], list) and r["context"] and all(is_int(t) for t in r["context"])
    check_metrics(r, all_present=True)
    assert a.body == go_json(r)


def test_generate_stream(port):
    whole = call(port, "POST", "/api/generate", body={**GENERATE, "stream": False}).json()
    a = call(port, "POST", "/api/generate", body={**GENERATE, "stream": True})
    assert (a.status, a.content_type) == (200, NDJSON)
    *chunks, final = a.lines()
    for c in chunks:
        assert list(c) == ["model", "created_at", "response", "done"] and c["done"] is False
    keys_in_go_order(final, GENERATE_RESPONSE)
    assert final["response"] == "" and final["done_reason"] == "length" and final["context"] == whole["context"]
    assert "".join(c["response"] for c in chunks) == whole["response"]


def test_generate_raw_has_no_context(port):
    # routes.go:565: the context is only returned without raw
    r = call(port, "POST", "/api/generate", body={**GENERATE, "raw": True, "stream": False}).json()
    keys_in_go_order(r, GENERATE_RESPONSE)
    assert "context" not in r and r["done"] is True


def test_generate_load_and_debug(port):
    # routes.go:384-391: an empty prompt loads and answers done_reason "load" (response "" is not omitempty)
    r = call(port, "POST", "/api/generate", body={"model": MODEL}).json()
    assert list(r) == ["model", "created_at", "response", "done", "done_reason"]
    assert (r["response"], r["done"], r["done_reason"]) == ("", True, "load")
    # routes.go:484-494: _debug_render_only renders the prompt (chatPrompt of [user: prompt]) without running
    d = call(port, "POST", "/api/generate", body={**GENERATE, "_debug_render_only": True}).json()
    assert list(d) == ["model", "created_at", "response", "done", "_debug_info"] and d["done"] is False
    want = call(port, "POST", "/apply-template",
                body={"messages": [{"role": "user", "content": GENERATE["prompt"]}]}).json()["prompt"]
    assert d["_debug_info"] == {"rendered_template": want}


# ---------------------------------------------------------------- /api/tags, /api/ps, /api/show

def check_details(d: dict, parent: str = ""):
    # the GGUF's architecture, format.HumanNumber(general.parameter_count: the sum of the tensors' elements,
    # fs/ggml/gguf.go:236) and its file type's name (fs/ggml/type.go:98)
    assert list(d) == DETAILS
    assert d == {"parent_model": parent, "format": "gguf", "family": "llama", "families": ["llama"],
                 "parameter_size": "134.52M", "quantization_level": "Q4_1"}


def test_tags(port):
    a = call(port, "GET", "/api/tags")
    assert (a.status, a.content_type) == (200, J)
    body = a.json()
    assert list(body) == ["models"]
    base = [m for m in body["models"] if m["name"] == TAG]
    assert len(base) == 1, body
    m = base[0]
    keys_in_go_order(m, LIST_MODEL)
    assert m["model"] == TAG                                           # name = model = DisplayShortest
    assert LOCAL_TIME.match(m["modified_at"]), m["modified_at"]
    assert is_int(m["size"]) and m["size"] >= os.path.getsize(model_file())   # its layers (the GGUF at least)
    assert re.fullmatch(r"[0-9a-f]{64}", m["digest"])                  # sha256 hex, no prefix
    check_details(m["details"])
    stamps = [m["modified_at"] for m in body["models"]]                # newest first (routes.go:1260)
    head = call(port, "HEAD", "/api/tags")
    assert (head.status, head.body) == (200, b"")
    assert stamps == sorted(stamps, reverse=True) or len(stamps) == 1


def test_ps(port):
    call(port, "POST", "/api/chat", body={"model": MODEL, "messages": []})   # loaded
    a = call(port, "GET", "/api/ps")
    assert (a.status, a.content_type) == (200, J)
    models = a.json()["models"]
    assert [m["name"] for m in models] == [TAG]
    m = models[0]
    assert list(m) == PROCESS_MODEL                                    # details keeps parent_model: not omitempty
    assert m["model"] == TAG and re.fullmatch(r"[0-9a-f]{64}", m["digest"])
    check_details(m["details"])
    assert LOCAL_TIME.match(m["expires_at"]), m["expires_at"]
    assert is_int(m["size"]) and m["size"] > 0 and m["size_vram"] == 0  # CPU only: nothing in VRAM
    assert m["context_length"] == 4096
    tags = {t["name"]: t["digest"] for t in call(port, "GET", "/api/tags").json()["models"]}
    assert tags[TAG] == m["digest"]


def test_show(port):
    a = call(port, "POST", "/api/show", body={"model": MODEL})
    assert (a.status, a.content_type) == (200, J)
    r = a.json()
    keys_in_go_order(r, SHOW_RESPONSE)
    check_details(r["details"])
    assert LOCAL_TIME.match(r["modified_at"])
    assert r["capabilities"] == ["completion"]                         # no tools, insert, thinking in its template
    # routes.go:1144-1148: three comment lines, then the Modelfile (FROM first)
    assert r["modelfile"].startswith('# Modelfile generated by "ollama show"\n# To build a new Modelfile based on '
                                     f'this, replace FROM with:\n# FROM {TAG}\n\nFROM ')
    info = r["model_info"]
    assert list(info) == sorted(info)                                  # a Go map: keys sorted
    assert "general.name" not in info and "tokenizer.chat_template" not in info   # routes.go:1167-1168
    assert info["general.architecture"] == "llama" and info["general.parameter_count"] == 134515008
    # without verbose getModelData reads arrays with maxArraySize 0 (routes.go:1195): fs/ggml/gguf.go:401-406
    # keeps no values, and the array marshals its nil slice as null (gguf.go:397; docs/api.md:1493 says [])
    assert info["tokenizer.ggml.tokens"] is None
    assert r["tensors"] and list(r["tensors"][0]) == ["name", "type", "shape"]
    verbose = call(port, "POST", "/api/show", body={"model": MODEL, "verbose": True}).json()
    assert len(verbose["model_info"]["tokenizer.ggml.tokens"]) == 49152


# ---------------------------------------------------------------- copy, delete, create, pull

def test_copy_delete_empty_bodies(port):
    # routes.go:1269-1305 and 981-1023: success writes no body (status 200)
    a = call(port, "POST", "/api/copy", body={"source": MODEL, "destination": "h4-shapes-copy"})
    assert (a.status, a.body) == (200, b"")
    names = [m["name"] for m in call(port, "GET", "/api/tags").json()["models"]]
    assert "h4-shapes-copy:latest" in names
    d = call(port, "DELETE", "/api/delete", body={"model": "h4-shapes-copy"})
    assert (d.status, d.body) == (200, b"")
    assert "h4-shapes-copy:latest" not in [m["name"] for m in call(port, "GET", "/api/tags").json()["models"]]
    assert call(port, "POST", "/api/show", body={"model": MODEL}).status == 200   # the base stays


def test_create_progress(port):
    # create.go: status objects (api.ProgressResponse {status, digest?, total?, completed?}), "success" last;
    # stream false: only the last one (waitForStream, routes.go:1661)
    body = {"model": "h4-shapes-derived", "from": MODEL, "system": "Answer briefly.",
            "parameters": {"temperature": 0.5}}
    a = call(port, "POST", "/api/create", body=body)
    assert (a.status, a.content_type) == (200, NDJSON)
    lines = a.lines()
    for line in lines:
        assert list(line)[0] == "status" and set(line) <= {"status", "digest", "total", "completed"}
    assert lines[-1] == {"status": "success"}
    one = call(port, "POST", "/api/create", body={**body, "stream": False})
    assert (one.status, one.body) == (200, b'{"status":"success"}')
    show = call(port, "POST", "/api/show", body={"model": "h4-shapes-derived"}).json()
    assert show["system"] == "Answer briefly."
    check_details(show["details"], parent=TAG)
    assert show["parameters"] == f"{'temperature':<30} 0.5"            # routes.go:1132-1141: %-30s %#v
    assert call(port, "DELETE", "/api/delete", body={"model": "h4-shapes-derived"}).status == 200


def test_pull_present(port):
    a = call(port, "POST", "/api/pull", body={"model": MODEL, "stream": False})
    assert (a.status, a.body) == (200, b'{"status":"success"}')
    s = call(port, "POST", "/api/pull", body={"model": MODEL})
    assert (s.status, s.content_type) == (200, NDJSON)
    lines = s.lines()
    assert lines[0] == {"status": "pulling manifest"} and lines[-1] == {"status": "success"}


def test_wait_for_stream_content_type(port):
    # stream false on create and pull: waitForStream's c.Header("Content-Type", "application/json"), which
    # c.JSON keeps (gin writes its own only when none is set)
    pull = call(port, "POST", "/api/pull", body={"model": MODEL, "stream": False})
    create = call(port, "POST", "/api/create", body={"model": "h4-shapes-ct", "from": MODEL, "stream": False})
    call(port, "DELETE", "/api/delete", body={"model": "h4-shapes-ct"})
    assert (pull.content_type, create.content_type) == ("application/json", "application/json")
