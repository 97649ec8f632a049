"""Ollama v0.13.3's model management routes: GET|HEAD /api/tags, GET /api/ps, POST /api/show, POST /api/create,
POST /api/copy, DELETE /api/delete, POST /api/pull, HEAD|POST /api/blobs/:digest (server/routes.go,
server/create.go), over bankml.server.ollama.catalog (the models by Ollama's names), bankml.models.derived (the
manifests and blobs), bankml.models.registry (`bankml rm`'s rules) and bankml.models.pull (bankml's own pull:
never a hub). Bodies are Go's JSON (bankml.server.ollama.gojson); errors `{"error": ...}` with Ollama's statuses;
progress as NDJSON lines (stream absent: true) or the last object (stream: false).

Must not know the engine: the weights are the residency's (status, context size, keep-alive only).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import queue
import re
import threading
import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ...models import derived as store, modelfile as mf
from ..ollama import gojson, names
from ..ollama.catalog import Catalog, details, digest, header, size as model_size

JSON = "application/json; charset=utf-8"
NDJSON = "application/x-ndjson"
FOREVER_NS = (1 << 63) - 1          # api.Duration of a negative keep_alive: math.MaxInt64


def _json(obj, status: int = 200) -> Response:
    return Response(gojson.dumps(obj), status_code=status, media_type=JSON)


def _error(message: str, status: int) -> Response:
    return _json({"error": message}, status)


async def _bind(request: Request, struct: str) -> dict | Response:
    raw = await request.body()
    try:
        return gojson.bind(raw, struct)
    except gojson.BindError as e:
        # routes.go: errors.Is(err, io.EOF) -> "missing request body"; else err.Error(); both 400
        return _error("missing request body" if e.eof else e.message, 400)


def _catalog(request: Request) -> Catalog:
    return Catalog(request.app.state.residency)


# --- /api/tags -------------------------------------------------------------------------------------------------

def _mtime_ns(path: str) -> int:
    return os.stat(path).st_mtime_ns


def _manifest_time(m) -> int:
    if m.derived:
        found = store.find(m.name)
        if found is not None:
            return _mtime_ns(found[1])
    return _mtime_ns(m.path)


def _tags(cat: Catalog) -> dict:
    rows = []
    for m in cat.models():
        try:
            t = _manifest_time(m)
            row = {"name": m.name, "model": m.name, "modified_at": gojson.go_time(t, utc=False),
                   "size": model_size(m), "digest": digest(m), "details": dict(details(m.path), parent_model="")}
        except Exception:     # a file gone or unreadable is left out, as ListHandler skips a bad manifest
            continue
        rows.append((t // 10**9, row))
    # routes.go:1262: most recently modified first (seconds), stable
    rows.sort(key=lambda r: -r[0])
    return {"models": [r for _, r in rows]}


async def tags(request: Request) -> Response:
    return _json(await run_in_threadpool(_tags, _catalog(request)))


# --- /api/ps ---------------------------------------------------------------------------------------------------

def _kv_bytes(h, n_ctx: int) -> int:
    """The KV cache's bytes: K and V, F16, n_ctx cells of every layer's n_head_kv * head_dim."""
    arch = h.get("general.architecture")
    n_layer = int(h.get(f"{arch}.block_count", 0) or 0)
    n_embd = int(h.get(f"{arch}.embedding_length", 0) or 0)
    n_head = int(h.get(f"{arch}.attention.head_count", 1) or 1)
    n_head_kv = h.get(f"{arch}.attention.head_count_kv", n_head) or n_head
    if isinstance(n_head_kv, list):
        n_head_kv = max(n_head_kv)
    head_k = int(h.get(f"{arch}.attention.key_length", n_embd // n_head) or 0)
    head_v = int(h.get(f"{arch}.attention.value_length", n_embd // n_head) or 0)
    return n_ctx * n_layer * int(n_head_kv) * (head_k + head_v) * 2


def _served_ctx(res, r, h) -> tuple[int, int]:
    """(context per slot, slots) of a resident model: its context's, else as the config would make them."""
    if r.ctx is not None:
        return int(r.ctx.n_ctx_slot), int(r.ctx.n_slots)
    from ..context import slot_context
    cfg = res.cfg
    arch = h.get("general.architecture")
    n_train = int(h.get(f"{arch}.context_length", 0) or 0) or 1 << 30
    n_slots, n_ctx_slot, _ = slot_context(cfg.n_ctx, cfg.n_parallel, cfg.kv_unified, n_train)
    return n_ctx_slot, n_slots


def _ps(res, cat: Catalog) -> dict:
    from ..residency import LOADED, SLEEPING
    now_wall, now_mono = time.time_ns(), time.monotonic()
    by_resident = {}
    for m in cat.models():
        if not m.derived:
            by_resident.setdefault(m.resident, m)
    for m in cat.models():
        by_resident.setdefault(m.resident, m)
    rows = []
    for r in list(res.models.values()):
        if r.status not in (LOADED, SLEEPING):
            continue
        m = by_resident.get(r.name)
        if m is None:
            continue
        h = header(r.path)
        n_ctx, n_slots = _served_ctx(res, r, h)
        keep = FOREVER_NS if r.keep_alive is None else int(r.keep_alive * 10**9)
        if r.users > 0:
            base = now_wall                                  # in use: now + its duration (PsHandler's epoch case)
        else:
            base = now_wall - int((now_mono - r.idle_since) * 10**9)
        expires = base + keep
        rows.append((expires // 10**9, {
            "name": m.name, "model": m.name, "size": os.path.getsize(r.path) + _kv_bytes(h, n_ctx) * n_slots,
            "digest": digest(m), "details": dict(details(r.path), parent_model=""),
            "expires_at": gojson.go_time(expires, utc=False), "size_vram": 0, "context_length": n_ctx}))
    rows.sort(key=lambda x: -x[0])      # routes.go:1838: the longest remaining first
    return {"models": [x for _, x in rows]}


async def ps(request: Request) -> Response:
    res = request.app.state.residency
    return _json(await run_in_threadpool(_ps, res, _catalog(request)))


# --- /api/show -------------------------------------------------------------------------------------------------

def _go_v_float(x: float) -> str:
    """%v of a float64: strconv 'g' with the shortest digits, %e below 1e-4 and from 1e21 (eprec 21)."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "+Inf" if x > 0 else "-Inf"
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    r = repr(float(x))
    mant, _, exp = r.partition("e")
    neg = mant.startswith("-")
    mant = mant.lstrip("-")
    ip, _, fp = mant.partition(".")
    if fp == "0":
        fp = ""
    digits = (ip + fp).lstrip("0")
    lead = len(ip + fp) - len((ip + fp).lstrip("0"))
    dp = len(ip) - lead + (int(exp) if exp else 0)        # decimal point position relative to digits
    digits = digits.rstrip("0") or "0"
    e = dp - 1
    if e < -4 or e >= max(len(digits), 21):
        out = digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + "e" + ("-" if e < 0 else "+") + \
            "%02d" % abs(e)
    elif dp <= 0:
        out = "0." + "0" * (-dp) + digits
    elif dp >= len(digits):
        out = digits + "0" * (dp - len(digits))
    else:
        out = digits[:dp] + "." + digits[dp:]
    return ("-" if neg else "") + out


def _go_v(v, sharp: bool) -> str:
    """fmt's %v (sharp: %#v) of a value JSON decoded into `any`."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return _go_v_float(float(v))
    if isinstance(v, str):
        return gojson.go_quote(v) if sharp else v
    if v is None:
        return "<nil>" if not sharp else "interface {}(nil)"
    return str(v)


def _parameters_text(params: dict) -> str:
    # routes.go:1133: "%-*s %#v" with 30 columns, a list one line an element (Go's map order is random: sorted)
    lines = []
    for k in sorted(params):
        vals = params[k] if isinstance(params[k], list) else [params[k]]
        lines += [f"{k:<30} {_go_v(v, True)}" for v in vals]
    return "\n".join(lines)


def _modelfile_text(m, template: str | None) -> str:
    # routes.go:1155 and images.go: Model.String
    cmds = [mf.Command("model", m.path)]
    if template:
        cmds.append(mf.Command("template", template))
    if m.system:
        cmds.append(mf.Command("system", m.system))
    for k in sorted(m.parameters):
        vals = m.parameters[k] if isinstance(m.parameters[k], list) else [m.parameters[k]]
        cmds += [mf.Command(k, _go_v(v, False)) for v in vals]
    cmds += [mf.Command("license", lic) for lic in m.license]
    cmds += [mf.Command("message", f"{x.get('role', '')}: {x.get('content', '')}") for x in m.messages]
    head = ('# Modelfile generated by "ollama show"\n# To build a new Modelfile based on this, replace FROM with:\n'
            f"# FROM {m.name}\n\n")
    return head + str(mf.Modelfile(cmds))


_JINJA_BLOCK = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.S)


def _template_vars(t: str) -> set[str]:
    out = set()
    for b in _JINJA_BLOCK.findall(t):
        b = re.sub(r"'[^']*'|\"[^\"]*\"", "", b)
        out |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", b))
    return out


def capabilities(h, template: str | None) -> list[str]:
    """images.go: Model.Capabilities, as bankml can tell them: completion (no pooling_type), vision
    (vision.block_count), tools / insert when the chat template uses `tools` / `suffix`, thinking when it writes
    <think> and </think>."""
    arch = h.get("general.architecture")
    caps = ["embedding" if h.get(f"{arch}.pooling_type") is not None else "completion"]
    if h.get(f"{arch}.vision.block_count") is not None:
        caps.append("vision")
    if template:
        v = _template_vars(template)
        if "tools" in v:
            caps.append("tools")
        if "suffix" in v:
            caps.append("insert")
        if "<think>" in template and "</think>" in template:
            caps.append("thinking")
    return caps


def _model_info(h, verbose: bool) -> gojson.GoMap:
    """routes.go:1194 getModelData: the header's keys but general.name and tokenizer.chat_template, with
    general.parameter_count the tensors' elements (fs/ggml/gguf.go); without verbose an array is read with
    maxArraySize 0: a non-empty one marshals as null, an empty one as []."""
    from ...models.gguf import ValueType
    from ..ollama.catalog import parameter_count
    out = gojson.GoMap()
    for k, v in h.metadata.items():
        if k in ("general.name", "tokenizer.chat_template"):
            continue
        t = h.value_types.get(k)
        if t == ValueType.ARRAY:
            if not verbose and len(v) > 0:
                v = None
            else:
                et = h.array_types.get(k)
                v = v.tolist() if hasattr(v, "tolist") else list(v)
                v = [gojson.F32(x) for x in v] if et == ValueType.FLOAT32 else v
        elif t == ValueType.FLOAT32:
            v = gojson.F32(v)
        elif hasattr(v, "item"):
            v = v.item()
        out[k] = v
    out["general.parameter_count"] = parameter_count(h)
    return out


def _show(cat: Catalog, req: dict):
    from ...models.gguf import type_name
    name = req["model"]
    if not names.parse(name).valid:
        return _error("invalid model path", 500)           # GetModelInfo: ErrModelPathInvalid, ShowHandler's 500
    m = cat.find(name)
    if m is None:
        return _error(f"model '{name}' not found", 404)
    h = header(m.path)
    template = m.template or h.get("tokenizer.chat_template") or None
    system = req.get("system") or m.system
    # routes.go:1145: the request's options join the stored parameters after `parameters` is written, so they
    # show in the Modelfile only
    opts = req.get("options") or {}
    shown = type(m)(**dict(m.__dict__, system=system, parameters={**m.parameters, **opts}))
    resp = {}
    if m.license:
        resp["license"] = "\n".join(m.license)
    resp["modelfile"] = _modelfile_text(shown, template)
    params = _parameters_text(m.parameters)
    if params:
        resp["parameters"] = params
    if template:
        resp["template"] = template
    if system:
        resp["system"] = system
    resp["details"] = dict(details(m.path), parent_model=m.parent)
    if m.messages:
        resp["messages"] = [{"role": x.get("role", ""), "content": x.get("content", "")} for x in m.messages]
    resp["model_info"] = _model_info(h, bool(req.get("verbose")))
    resp["tensors"] = [{"name": t.name, "type": type_name(t.type), "shape": list(t.shape)}
                       for t in h.tensors.values()]
    resp["capabilities"] = capabilities(h, template)
    resp["modified_at"] = gojson.go_time(_manifest_time(m), utc=False)
    return _json(resp)


async def show(request: Request) -> Response:
    req = await _bind(request, "ShowRequest")
    if isinstance(req, Response):
        return req
    model = req.get("model") or req.get("name") or ""
    if not model:
        return _error("model is required", 400)              # routes.go:1042
    req["model"] = model
    return await run_in_threadpool(_show, _catalog(request), req)


# --- progress streams ------------------------------------------------------------------------------------------

class _Fail(Exception):
    def __init__(self, message: str, status: int = 500):
        super().__init__(message)
        self.message, self.status = message, status


async def _progress(request: Request, work, stream: bool) -> Response:
    """Run work(emit) on a thread; its emitted objects are the progress; a _Fail is the error (streamResponse /
    waitForStream: before any output its status and a JSON body, after it one {"error"} line)."""
    q: queue.Queue = queue.Queue()
    done = object()

    def run():
        try:
            work(q.put)
        except _Fail as e:
            q.put(e)
        except Exception as e:        # an unexpected failure is the handler's 500
            q.put(_Fail(str(e) or type(e).__name__))
        q.put(done)

    threading.Thread(target=run, daemon=True).start()

    async def get():
        return await asyncio.get_running_loop().run_in_executor(None, q.get)

    # waitForStream and streamResponse set `application/json` before gin's c.JSON, which then adds no charset
    # (routes.go:1662, 1708)
    plain_json = "application/json"
    if not stream:
        latest = {"status": ""}
        while True:
            item = await get()
            if item is done:
                return Response(gojson.dumps(latest), media_type=plain_json)
            if isinstance(item, _Fail):
                return Response(gojson.dumps({"error": item.message}), status_code=item.status,
                                media_type=plain_json)
            latest = item
    first = await get()
    if isinstance(first, _Fail):
        return Response(gojson.dumps({"error": first.message}), status_code=first.status, media_type=plain_json)

    async def body():
        item = first
        while item is not done:
            if isinstance(item, _Fail):
                yield gojson.dumps({"error": item.message}) + b"\n"
                return
            yield gojson.dumps(item) + b"\n"
            item = await get()

    if first is done:
        return Response(b"", media_type=NDJSON)
    return StreamingResponse(body(), media_type=NDJSON)


def _stream_flag(req: dict) -> bool:
    return req.get("stream") is not False


# --- /api/create -----------------------------------------------------------------------------------------------

def _valid_fs_path(p: str) -> bool:
    """io/fs.ValidPath: unrooted, slash-separated, no empty, "." or ".." elements (but "." itself)."""
    if p == ".":
        return True
    return bool(p) and all(e not in ("", ".", "..") for e in p.split("/"))


def _layer_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _go_encode(obj) -> bytes:
    # json.NewEncoder(&b).Encode(v): Marshal plus a newline
    return gojson.dumps(obj) + b"\n"


def _known_layers() -> set[str]:
    out = set()
    for _, p in store.listing():
        try:
            out |= set(store.load(p).get("layers", []))
        except store.DerivedError:
            pass
    return out


def _create(cat: Catalog, req: dict, name: str, emit) -> None:
    files = req.get("files") or {}
    if req.get("template"):
        raise _Fail("bankml does not run Ollama's Go templates (text/template over .Messages, .Prompt, ...): the "
                    "prompt is always the GGUF's chat template as llama-server renders it; create the model "
                    "without TEMPLATE", 400)
    if req.get("quantize") or req.get("quantization"):
        raise _Fail("bankml does not quantize at create: `bankml quantize` converts a file, `bankml pin` pins "
                    "it, and FROM that file makes the model", 400)
    if req.get("adapters"):
        raise _Fail("bankml does not apply LoRA adapters (ADAPTER)", 400)
    if req.get("remote_host"):
        raise _Fail("bankml serves no remote models (remote_host)", 400)
    parent_params, parent_system, parent_messages, parent_license = {}, None, [], []
    layers = []            # (digest, status) in createModel's order
    if req.get("from"):
        src = req["from"]
        as_path = os.path.expanduser(src)
        if ("/" in src or src.endswith(".gguf")) and os.path.isfile(as_path):
            try:
                base = store.base_for_file(as_path, parent=os.path.abspath(as_path))
            except Exception as e:
                raise _Fail(str(e), 400) from None
        else:
            if not names.parse(src).valid:
                raise _Fail("invalid model name", 400)
            m = cat.find(src)
            if m is None:
                # parseFromModel pulls a model it does not have: bankml pulls from no hub
                emit({"status": "pulling manifest"})
                raise _Fail("pull model manifest: file does not exist")
            try:
                base = store.base_for_file(m.path, parent=m.name)
            except Exception as e:
                raise _Fail(str(e), 400) from None
            parent_params, parent_system = dict(m.parameters), m.system
            parent_messages, parent_license = list(m.messages), list(m.license)
    elif files:
        if any(k.endswith(".safetensors") for k in files):
            raise _Fail("bankml does not convert safetensors: convert the model to GGUF and pin it", 400)
        if len(files) != 1:
            raise _Fail("bankml layers a model on one GGUF file", 400)
        emit({"status": "parsing GGUF"})
        (fname, dig), = files.items()
        try:
            p = store.pinned_blob(dig)
        except ValueError as e:
            raise _Fail(str(e), 400) from None
        except store.DerivedError as e:
            raise _Fail(str(e), 400) from None
        with open(p, "rb") as f:
            if f.read(4) != b"GGUF":
                raise _Fail("supplied file was not in GGUF format", 400)
        try:
            base = store.base_for_file(p, parent=str(p))
        except Exception as e:
            raise _Fail(str(e), 400) from None
    else:
        raise _Fail("neither 'from' or 'files' was specified", 400)

    known = _known_layers()

    def layer(data: bytes):
        d = _layer_digest(data)
        layers.append((d, ("using existing layer " if d in known else "creating new layer ") + d))
        return d

    layers.append(("sha256:" + base["sha256"], "using existing layer sha256:" + base["sha256"]))
    system = req.get("system") or parent_system
    if parent_system:
        layers.append((_layer_digest(parent_system.encode()), "using existing layer "
                       + _layer_digest(parent_system.encode())))
    if parent_license:
        for lic in parent_license:
            layers.append((_layer_digest(lic.encode()), "using existing layer " + _layer_digest(lic.encode())))
    params = dict(parent_params)
    if parent_params:
        layers.append((_layer_digest(_go_encode(gojson.GoMap(parent_params))), "using existing layer "
                       + _layer_digest(_go_encode(gojson.GoMap(parent_params)))))
    messages = parent_messages
    if parent_messages:
        layers.append((_layer_digest(_go_encode(parent_messages)), "using existing layer "
                       + _layer_digest(_go_encode(parent_messages))))
    if req.get("system"):
        if parent_system:       # setSystem: the old system layer is removed
            layers[:] = [x for x in layers if x[0] != _layer_digest(parent_system.encode())]
        layer(req["system"].encode())
    lic = req.get("license")
    licenses = list(parent_license)
    if isinstance(lic, str):
        if lic:
            licenses.append(lic)
            layer(lic.encode())
    elif isinstance(lic, list):
        for x in lic:
            if not isinstance(x, str):
                raise _Fail("json: cannot unmarshal " + gojson._json_kind(x) + " into Go value of type string")
            licenses.append(x)
            layer(x.encode())
    elif lic is not None:
        raise _Fail("json: cannot unmarshal " + gojson._json_kind(lic) + " into Go value of type []string")
    if req.get("parameters"):
        merged = dict(params)
        merged.update(req["parameters"])         # setParameters: the request's keys win
        if parent_params:
            layers[:] = [x for x in layers if x[0] != _layer_digest(_go_encode(gojson.GoMap(parent_params)))]
        params = merged
        layer(_go_encode(gojson.GoMap(params)))
    if req.get("messages"):
        msgs = [{"role": x.get("role", ""), "content": x.get("content", "")} for x in req["messages"]]
        if parent_messages:
            layers[:] = [x for x in layers if x[0] != _layer_digest(_go_encode(parent_messages))]
        messages = msgs
        layer(_go_encode(msgs))
    for _, status in layers:
        emit({"status": status})
    emit({"status": "writing manifest"})
    store.write(name, {"base": base, "parameters": params, "system": system, "template": None,
                       "messages": messages, "license": licenses, "layers": [d for d, _ in layers]})
    emit({"status": "success"})


async def create(request: Request) -> Response:
    req = await _bind(request, "CreateRequest")
    if isinstance(req, Response):
        return req
    for k in req.get("files") or {}:
        if not _valid_fs_path(k):
            return _error("file path must be relative", 400)        # create.go:66
    name = req.get("model") or req.get("name") or ""
    if not names.parse(name).valid:
        return _error("invalid model name", 400)                    # create.go:72
    cat = _catalog(request)
    return await _progress(request, lambda emit: _create(cat, req, name, emit), _stream_flag(req))


# --- /api/copy, /api/delete ------------------------------------------------------------------------------------

def _copy(cat: Catalog, src: str, dst: str):
    m = cat.find(src)
    if m is None:
        return _error(f"model {gojson.go_quote(src)} not found", 404)     # routes.go:1301
    if m.derived:
        store.copy(src, dst)
    else:
        try:
            base = store.base_for_file(m.path, parent="")
        except Exception as e:
            return _error(str(e), 500)
        store.write(dst, {"base": base, "parameters": {}, "system": None, "template": None, "messages": [],
                          "license": [], "layers": ["sha256:" + base["sha256"]]})
    return Response(b"", status_code=200)


async def copy(request: Request) -> Response:
    req = await _bind(request, "CopyRequest")
    if isinstance(req, Response):
        return req
    src, dst = req.get("source", ""), req.get("destination", "")
    if not names.parse(src).valid:
        return _error(f"source {gojson.go_quote(src)} is invalid", 400)
    if not names.parse(dst).valid:
        return _error(f"destination {gojson.go_quote(dst)} is invalid", 400)
    return await run_in_threadpool(_copy, _catalog(request), src, dst)


def delete_model(cat: Catalog, name: str) -> str | None:
    """Delete a model by its Ollama name: a derived model's manifest (never its file), or a registry model's
    file by `bankml rm`'s rules (models directory files only; not while a derived model is layered on it).
    Returns None when done, else the reason (raises LookupError when there is no such model)."""
    from ...models import registry
    m = cat.find(name)
    if m is None:
        raise LookupError(name)
    if m.derived:
        store.remove(m.name)
        return None
    real = os.path.realpath(m.path)
    users = [d.name for d in cat.models() if d.derived and os.path.realpath(d.path) == real]
    if users:
        return f"{m.name} is the file under {', '.join(users)}: delete those first"
    reg = registry.Registry()
    entry = next((e for e in reg.entries() if os.path.realpath(e.path) == real), None)
    if entry is None:
        return f"{m.path} is not in a models directory; not removing it"
    try:
        registry.removable(reg, entry.name)
        registry.remove(entry)
    except registry.RegistryError as e:
        return str(e)
    return None


def _delete(cat: Catalog, name: str, shown: str):
    try:
        why = delete_model(cat, name)
    except LookupError:
        return _error(f"model '{shown}' not found", 404)           # routes.go:1001
    if why is not None:
        return _error(why, 500)
    return Response(b"", status_code=200)


async def delete(request: Request) -> Response:
    req = await _bind(request, "DeleteRequest")
    if isinstance(req, Response):
        return req
    name = req.get("model") or req.get("name") or ""
    if not names.parse(name).valid:
        return _error(f"name {gojson.go_quote(name)} is invalid", 400)   # routes.go:994
    return await run_in_threadpool(_delete, _catalog(request), name, name)


# --- /api/pull -------------------------------------------------------------------------------------------------

def _pull(name: names.Name, emit) -> None:
    from ...models import pull as pull_mod
    emit({"status": "pulling manifest"})
    known = pull_mod.known_models()
    model = next((k for k in known if k.lower() == name.model.lower()), None)
    if (model is None or name.tag.lower() != names.DEFAULT_TAG or name.host.lower() != names.DEFAULT_HOST
            or name.namespace.lower() != names.DEFAULT_NAMESPACE):
        raise _Fail("pull model manifest: file does not exist")   # images.go:643, the registry's 404
    entry = known[model]["files"][0]
    dig = "sha256:" + entry["sha256"]
    total = entry["bytes"]

    def progress(done, tot=None):
        emit({"status": f"pulling {dig[7:19]}", "digest": dig, "total": total, "completed": min(done, total)})

    try:
        pull_mod.pull(model, progress=lambda done, tot: None)
    except Exception as e:
        raise _Fail(str(e)) from None
    progress(total)
    emit({"status": "verifying sha256 digest"})
    emit({"status": "writing manifest"})
    emit({"status": "success"})


async def pull(request: Request) -> Response:
    req = await _bind(request, "PullRequest")
    if isinstance(req, Response):
        return req
    n = names.parse(req.get("model") or req.get("name") or "")
    if not n.valid:
        return _error("invalid model name", 400)                     # routes.go:862
    return await _progress(request, lambda emit: _pull(n, emit), _stream_flag(req))


# --- /api/blobs/:digest ----------------------------------------------------------------------------------------

async def head_blob(request: Request) -> Response:
    d = request.path_params["digest"]
    try:
        p = store.blob_path(d)
    except ValueError as e:
        return _error(str(e), 400)
    if not p.exists():
        return _error(f"blob {gojson.go_quote(d)} not found", 404)   # routes.go:1316
    return Response(b"", status_code=200)


async def post_blob(request: Request) -> Response:
    d = request.path_params["digest"]
    try:
        p = store.blob_path(d)
    except ValueError as e:
        return _error(str(e), 400)
    if p.exists():
        return Response(b"", status_code=200)
    f, tmp = store.blob_temp()
    h = hashlib.sha256()
    try:
        with f:
            async for chunk in request.stream():
                h.update(chunk)
                f.write(chunk)
        got = "sha256:" + h.hexdigest()
        store.finish_blob(tmp, h.hexdigest())     # NewLayer keeps the blob under its own digest
    finally:
        if tmp.exists():
            tmp.unlink()
    if got != d:
        return _error(f"digest mismatch, expected {gojson.go_quote(d)}, got {gojson.go_quote(got)}", 400)
    return Response(b"", status_code=201)


routes = [
    Route("/api/tags", tags, methods=["GET", "HEAD"]),
    Route("/api/ps", ps, methods=["GET"]),
    Route("/api/show", show, methods=["POST"]),
    Route("/api/create", create, methods=["POST"]),
    Route("/api/copy", copy, methods=["POST"]),
    Route("/api/delete", delete, methods=["DELETE"]),
    Route("/api/pull", pull, methods=["POST"]),
    Route("/api/blobs/{digest}", head_blob, methods=["HEAD"]),
    Route("/api/blobs/{digest}", post_blob, methods=["POST"]),
]
