"""GET /slots, POST /slots/{id_slot}?action=save|restore|erase, GET /metrics (server-context.cpp get_slots,
post_slots, get_metrics; server-task.cpp to_metrics).

Slot actions run on the worker thread after the tasks before them (llama-server posts them as tasks). A save file
is llama-server b11192's own (llama_state_seq_save_file's layout, bankml.server.slotfile) with bankml's sha256
trailer after it: llama-server restores bankml's files and bankml restores llama-server's; `n_written` / `n_read`
are llama-server's numbers (the bytes before the trailer). A restore checks the whole file before it touches the
slot, and a refusal leaves the slot empty.
"""

from __future__ import annotations

import logging
import os
import time

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...cxx import nljson
from ...engine.model import UnifiedSeq
from ...errors import ContextFull
from .. import slotfile
from ..http import Refusal, error_response, json_response
from ..routing import context_of, resident_of

log = logging.getLogger("bankml.server")


def slot_json(ctx, slot) -> dict:
    """server_slot::to_json(only_metrics = true)."""
    body = {"id": slot.id, "n_ctx": slot.n_ctx, "speculative": False, "is_processing": slot.processing}
    if slot.last is not None or slot.processing:
        last = slot.last or {}
        run = last.get("run")
        st = run.stats if (slot.processing and run is not None) else None
        body["id_task"] = slot.id_task
        body["n_prompt_tokens"] = len(slot.tokens)
        body["n_prompt_tokens_processed"] = st.n_prompt_processed if st else 0
        body["n_prompt_tokens_cache"] = st.n_prompt_cached if st else 0
        params = last.get("params")
        body["params"] = params.to_json(True) if params is not None else {}
        if slot.processing and run is not None:
            nt = {"has_next_token": run.has_next, "has_new_line": run.has_new_line,
                  "n_remain": -1 if run.n_predict_max == -1 else run.n_predict_max - st.n_gen,
                  "n_decoded": st.n_gen}
        else:
            nt = {"has_next_token": False, "has_new_line": False, "n_remain": -1, "n_decoded": 0}
        body["next_token"] = [nt]
    return body


async def get_slots(request: Request) -> Response:
    ctx = context_of(request)
    if not ctx.cfg.endpoint_slots:
        return error_response("This server does not support slots endpoint. Start it with `--slots`", 501)
    ctx.worker.new_id()                 # SERVER_TASK_TYPE_SLOT_GET
    slots = ctx.slots.slots
    data = [slot_json(ctx, s) for s in slots]
    if request.query_params.get("fail_on_no_slot"):
        if all(s.processing for s in slots):
            return error_response("no slot available", 503)
    return json_response(data)


# --- slot actions ---------------------------------------------------------------------------------------------

def validate_filename(name: str) -> bool:
    """fs_validate_filename (common.cpp)."""
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    if not name or len(raw) > 255:
        return False
    for ch in name:
        c = ord(ch)
        if c <= 0x1F or c == 0x7F or 0x80 <= c <= 0x9F:
            return False
        if c in (0xFF0E, 0x2215, 0x2216, 0xFFFD, 0xFEFF) or 0xD800 <= c <= 0xDFFF:
            return False
        if ch in '/\\:*?"<>|':
            return False
    if name[0] == " " or name[-1] == " " or name[-1] == ".":
        return False
    if ".." in name or name == ".":
        return False
    return True


def write_atomically(path: str, data: bytes) -> None:
    """A slot file, whole or not at all (bankml.files.write_atomically; its temporary: `.slot-*.tmp`)."""
    from ...files import write_atomically as write
    write(path, data, prefix=".slot-")


def _geometry(ctx, slot) -> slotfile.Geometry:
    """The slot's cache as llama-server's state file describes it: one stream per slot unless the pool is unified
    (llama_kv_cache's n_stream), the cells' seq_id the slot's id."""
    unified = ctx.kv_unified or len(ctx.slots.slots) == 1
    return slotfile.Geometry.of(slot.cache, n_stream=1 if unified else len(ctx.slots.slots),
                                stream=0 if unified else slot.id, seq_id=slot.id)


def _refuse_swa(slot) -> None:
    """Slot files of a cache with sliding-window layers (llama_kv_cache_iswa: two caches in one file), or of a
    slot sharing a unified KV cache (its cells in cell order, restored through find_slot among the other slots'
    cells), are not written or read by bankml yet."""
    if isinstance(slot.cache, UnifiedSeq):
        raise Refusal(501, "slot save / restore with a unified KV cache (-kvu, -np auto) is not reproduced by "
                           "bankml yet", "not_supported_error")
    if slot.cache.has_swa:
        raise Refusal(501, "slot save / restore of a model with sliding-window layers is not reproduced by bankml "
                           "yet", "not_supported_error")


def _save(ctx, slot_id_raw: int, filename: str, path: str) -> dict:
    """SERVER_TASK_TYPE_SLOT_SAVE (server-context.cpp:2545): llama_state_seq_save_file's bytes, then bankml's
    checksum trailer, written in one atomic write (the trailer can never belong to another save's data)."""
    slot = ctx.slots.by_id(slot_id_raw)
    _refuse_swa(slot)
    t0 = time.perf_counter()
    data, n_written = slotfile.encode(slot.tokens, slot.cache.save(), _geometry(ctx, slot))
    try:
        write_atomically(path, data)
    except OSError as e:                 # llama_state_seq_save_file wrote nothing: llama-server's 500
        log.warning("slot save to %s failed: %s", path, e)
        raise Refusal(500, "Unable to save slot", "server_error") from None
    return {"id_slot": slot_id_raw, "filename": filename, "n_saved": len(slot.tokens), "n_written": n_written,
            "timings": {"save_ms": (time.perf_counter() - t0) * 1000}}


class _RestoreError(Exception):
    pass


# llama_state_seq_load_file's 0, as the server words it (server-context.cpp:2625)
_NOT_LOADED = "No available space in KV cache or invalid slot save file"


def _restore(ctx, slot_id_raw: int, filename: str, path: str) -> dict:
    """SERVER_TASK_TYPE_SLOT_RESTORE (server-context.cpp:2595). The whole file is read and checked (bankml's
    checksum when it has one, llama-server's structure always) before the slot is touched; any refusal leaves the
    slot empty, as llama-server's prompt_clear does (server-context.cpp:2642)."""
    slot = ctx.slots.by_id(slot_id_raw)
    _refuse_swa(slot)
    t0 = time.perf_counter()
    try:
        geom = _geometry(ctx, slot)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size > slotfile.max_size(geom):
                    raise _RestoreError(f"invalid slot save file: {size} bytes, more than a slot of this server "
                                        f"holds ({slotfile.max_size(geom)})")
                data = f.read()
        except OSError:
            raise _RestoreError(_NOT_LOADED) from None
        try:
            got = slotfile.parse(data, geom)
        except slotfile.SlotFileError as e:
            raise _RestoreError(str(e)) from None
        tokens = got.tokens
        if len(tokens) > slot.n_ctx:
            raise _RestoreError("Restored prompt does not fit in the slot context")
        if any(not 0 <= t < ctx.tokenizer.n_vocab for t in tokens):
            raise _RestoreError("Invalid tokens in slot save file")
        try:
            slot.cache.restore(got.state)
        except (ValueError, ContextFull):
            raise _RestoreError(_NOT_LOADED) from None
        slot.tokens = tokens
    except _RestoreError:
        slot.clear()
        raise
    return {"id_slot": slot_id_raw, "filename": filename, "n_restored": len(tokens), "n_read": got.n_read,
            "timings": {"restore_ms": (time.perf_counter() - t0) * 1000}}


def _erase(ctx, slot_id_raw: int) -> dict:
    slot = ctx.slots.by_id(slot_id_raw)
    n = len(slot.tokens)
    slot.clear()
    return {"id_slot": slot_id_raw, "n_erased": n}


def _stoi(s: str) -> int:
    """std::stoi: leading whitespace, sign, digits; anything after them ignored."""
    t = s.lstrip(" \t\n\r\f\v")
    i = 0
    if i < len(t) and t[i] in "+-":
        i += 1
    j = i
    while j < len(t) and t[j].isdigit() and t[j].isascii():
        j += 1
    if j == i:
        raise ValueError(s)
    v = int(t[:j])
    if not -(1 << 31) <= v < (1 << 31):
        raise ValueError(s)
    return v


async def post_slot(request: Request) -> Response:
    ctx = context_of(request)
    if not ctx.cfg.slot_save_path:
        return error_response("This server does not support slots action. Start it with `--slot-save-path`", 501)
    try:
        id_slot = _stoi(request.path_params["id_slot"])
    except ValueError:
        return error_response("Invalid slot ID", 400)
    action = request.query_params.get("action", "")
    worker = ctx.worker
    if action in ("save", "restore"):
        raw = await request.body()
        try:
            body = nljson.loads(raw)
            filename = nljson.get_str(nljson.at(body, "filename"))
        except nljson.NLError as e:
            return error_response(str(e), 500)
        if not validate_filename(filename):
            return error_response("Invalid filename", 400)
        path = ctx.cfg.slot_save_path + filename
        worker.new_id()
        if action == "save":
            return json_response(await _on_worker(worker, _save, ctx, id_slot, filename, path))
        try:
            return json_response(await _on_worker(worker, _restore, ctx, id_slot, filename, path))
        except _RestoreError as e:
            return error_response("Unable to restore slot: " + str(e), 400)
    if action == "erase":
        worker.new_id()
        return json_response(await _on_worker(worker, _erase, ctx, id_slot))
    return error_response("Invalid action", 400)


async def _on_worker(worker, fn, ctx, id_slot, *args):
    """A slot action on the worker; while that slot is generating (continuous batching), it waits until the slot
    is released, as llama-server defers it ("requested slot is unavailable")."""
    from starlette.concurrency import run_in_threadpool
    slot = ctx.slots.by_id(id_slot)
    return await run_in_threadpool(worker.call, fn, ctx, id_slot, *args, wait_for=slot)


# --- /metrics -------------------------------------------------------------------------------------------------

def _num(v: float) -> str:
    """A double as a C++ ostream prints it by default (%g with 6 significant digits)."""
    return "%g" % v


def metrics_text(m, n_processing: int = 0) -> str:
    """/metrics' text of a Metrics object (bankml.server.slots), with `n_processing` requests running."""
    counters = [
        ("prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", m.prompt.count),
        ("prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", m.n_prompt_cached),
        ("prompt_seconds_total", "Total time spent processing prompts", m.prompt.time / 1e6),
        ("tokens_predicted_total", "Number of generation tokens processed", m.predict.count),
        ("tokens_predicted_seconds_total", "Total time spent generating tokens", m.predict.time / 1e6),
        ("n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal "
                           "decoding", m.n_decode),
        ("n_tokens_max", "Largest observed sequence length (prompt + generation)", m.n_tokens_max),
        ("spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", 0),
        ("spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", 0),
        ("spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", 0),
    ]
    gauges = [
        ("prompt_tokens_seconds", "Average prompt throughput in tokens/s", m.prompt_bucket.per_second()),
        ("predicted_tokens_seconds", "Average generation throughput in tokens/s", m.predict_bucket.per_second()),
        ("requests_processing", "Number of requests processing", n_processing),
        ("requests_deferred", "Number of requests deferred", 0),
        ("n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call",
         m.n_busy_slots / max(float(m.n_decode), 1.0)),
    ]
    out = []
    for kind, items in (("counter", counters), ("gauge", gauges)):
        for name, desc, v in items:
            out.append(f"# HELP llamacpp:{name} {desc}\n# TYPE llamacpp:{name} {kind}\nllamacpp:{name} {_num(v)}\n")
    if m.energy_predicted_uj is not None:       # bankml's own, after llama-server's, with a readable counter only
        per_token = m.energy_predicted_uj / 1e6 / m.predict.steps if m.predict.steps else 0.0
        for name, kind, desc, v in (
                ("prompt_energy_joules_total", "counter", "CPU package energy while prompts were processed",
                 m.energy_prompt_uj / 1e6),
                ("predicted_energy_joules_total", "counter", "CPU package energy while tokens were generated",
                 m.energy_predicted_uj / 1e6),
                ("predicted_energy_per_token_joules", "gauge", "CPU package energy per generated token",
                 per_token)):
            out.append(f"# HELP bankml:{name} {desc}\n# TYPE bankml:{name} {kind}\nbankml:{name} {_num(v)}\n")
    return "".join(out)


async def get_metrics(request: Request) -> Response:
    if not request.app.state.cfg.endpoint_metrics:
        return error_response("This server does not support metrics endpoint. Start it with `--metrics`", 501)
    ctx = context_of(request)
    if ctx is None:                     # asleep: the counters as they were when it fell asleep
        r = resident_of(request)
        m = r.metrics if r is not None else None
        if m is None:
            return error_response("the model is not loaded", 503)
        text = metrics_text(m, 0)
    else:
        ctx.worker.new_id()             # SERVER_TASK_TYPE_METRICS
        m = ctx.slots.metrics
        text = metrics_text(m, ctx.slots.n_processing)
    m.reset_bucket()
    return Response(text.encode(), headers={"Content-Type": "text/plain; version=0.0.4",
                                            "Process-Start-Time-Unix": str(m.t_start)})


routes = [
    Route("/slots", get_slots, methods=["GET"]),
    Route("/slots/{id_slot}", post_slot, methods=["POST"]),
    Route("/metrics", get_metrics, methods=["GET"]),
]
