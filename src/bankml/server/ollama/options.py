"""Ollama's request options (api/types.go at v0.13.3) and what they mean as llama-server b11192's sampling fields.

    opts = merged(model.parameters, body.get("options"))   # DefaultOptions, then the model's, then the request's
    fields = llama_fields(opts, n_ctx)                       # the /completion and /v1/chat/completions fields
    fmt = format_fields(body["format"], chat=True)           # `format` as a response_format / json_schema

Every value passes FromMap's type rules (api/types.go:784): an integer option takes any JSON number and truncates
it toward zero, a float option any number, `stop` a list of strings, `use_mmap` a boolean; null is skipped; an
unknown key is logged ("invalid option provided") and ignored; a type error is OptionError with Ollama's text
(the route answers it with status 500, server/routes.go:2355 handleScheduleError's default). Ollama walks a Go
map, so which of several bad options it names is not fixed; here it is the first in request order.

This module knows nothing of HTTP, the engine or the catalog: plain dicts in, plain dicts out.
"""

from __future__ import annotations

import json
import logging
import os

from . import gojson

log = logging.getLogger("bankml.server")

INT, FLOAT, STR, LIST, PBOOL = "int", "float", "str", "list", "pbool"

#: every key FromMap knows (api/types.go:433 Options and :453 Runner), with its Go kind
KINDS = {
    "num_ctx": INT, "num_batch": INT, "num_gpu": INT, "main_gpu": INT, "use_mmap": PBOOL, "num_thread": INT,
    "num_keep": INT, "seed": INT, "num_predict": INT, "top_k": INT, "top_p": FLOAT, "min_p": FLOAT,
    "typical_p": FLOAT, "repeat_last_n": INT, "temperature": FLOAT, "repeat_penalty": FLOAT,
    "presence_penalty": FLOAT, "frequency_penalty": FLOAT, "stop": LIST,
}


def context_length(environ=None) -> int:
    """envconfig.ContextLength: $OLLAMA_CONTEXT_LENGTH (an unsigned integer), else 4096 (envconfig/config.go:204)."""
    environ = os.environ if environ is None else environ
    s = environ.get("OLLAMA_CONTEXT_LENGTH", "").strip().strip("\"'")
    if s:
        try:
            n = int(s, 10)
            if n >= 0:
                return n
        except ValueError:
            pass
        log.warning('invalid environment variable, using default var=OLLAMA_CONTEXT_LENGTH value="%s" default=4096', s)
    return 4096


def defaults(environ=None) -> dict:
    """DefaultOptions (api/types.go:878): the keys it sets (min_p and the penalties' zero values included)."""
    return {
        "num_predict": -1, "num_keep": 4, "temperature": 0.8, "top_k": 40, "top_p": 0.9, "typical_p": 1.0,
        "repeat_last_n": 64, "repeat_penalty": 1.1, "presence_penalty": 0.0, "frequency_penalty": 0.0,
        "seed": -1, "min_p": 0.0, "stop": [],
        "num_ctx": context_length(environ), "num_batch": 512, "num_gpu": -1, "num_thread": 0, "use_mmap": None,
    }


class OptionError(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _go_int(v) -> int:
    # field.SetInt(int64(t)) of a float64: truncation toward zero
    return int(v)


def from_map(opts: dict, m) -> dict:
    """FromMap: the values of `m` (a decoded JSON object) over `opts`, in place; returns opts."""
    if not m:
        return opts
    for key, val in m.items():
        kind = KINDS.get(key)
        if kind is None:
            # api/types.go:800 slog.Warn("invalid option provided", "option", key)
            log.warning("invalid option provided option=%s", key)
            continue
        if val is None:
            continue
        if kind == INT:
            if not _is_number(val):
                raise OptionError(f'option "{key}" must be of type integer')
            opts[key] = _go_int(val)
        elif kind == FLOAT:
            if not _is_number(val):
                raise OptionError(f'option "{key}" must be of type float32')
            opts[key] = float(val)
        elif kind == PBOOL:
            if not isinstance(val, bool):
                raise OptionError(f'option "{key}" must be of type boolean')
            opts[key] = val
        elif kind == LIST:
            if not isinstance(val, list):
                raise OptionError(f'option "{key}" must be of type array')
            if not all(isinstance(s, str) for s in val):
                raise OptionError(f'option "{key}" must be of an array of strings')
            opts[key] = list(val)
    return opts


def merged(model_parameters: dict | None, request_options, environ=None) -> dict:
    """modelOptions (server/routes.go:107): DefaultOptions, then the model's stored parameters, then the
    request's options, key by key. Raises OptionError."""
    opts = defaults(environ)
    from_map(opts, model_parameters or {})
    from_map(opts, request_options or {})
    return opts


def effective_ctx(opts: dict, n_ctx_train: int, served: int) -> int:
    """The context a request runs in: num_ctx (at least 4, server/sched.go:85; at most the model's trained length,
    llm/server.go:166), and at most the slot's served context (bankml keeps the weights and the slot: a larger
    num_ctx is clamped, as Ollama clamps to the trained length)."""
    n = max(opts["num_ctx"], 4)
    if n_ctx_train > 0:
        n = min(n, n_ctx_train)
    return min(n, served)


def n_predict(opts: dict, num_ctx: int) -> int:
    """llm/server.go:1513: below zero or above 10 * num_ctx it is 10 * num_ctx. 0 is no limit in the runner
    (runner/ollamarunner/runner.go:518 checks `numPredict > 0`): without a context shift the context ends it,
    as 10 * num_ctx does, so 0 sends 10 * num_ctx too."""
    n = opts["num_predict"]
    if n <= 0 or n > 10 * num_ctx:
        return 10 * num_ctx
    return n


def context_shift(opts: dict, shift) -> tuple[bool, int]:
    """(shift, n_keep): the request's `shift` (server/routes.go:520: on unless it is false) as llama-server's
    --context-shift for this task, and num_keep as its n_keep (a negative num_keep keeps the whole prompt,
    runner/llamarunner/runner.go:132, llama-server's n_keep -1; both add the BOS)."""
    return shift is None or bool(shift), max(opts["num_keep"], -1)


def llama_fields(opts: dict, num_ctx: int) -> dict:
    """The llama-server sampling fields of the same meaning, every one sent (llama-server's own defaults differ:
    min_p 0.05, top_k 40, ...). seed -1 is llama-server's random default too."""
    seed = opts["seed"]
    return {
        "n_predict": n_predict(opts, num_ctx),
        "temperature": opts["temperature"],
        "top_k": opts["top_k"],
        "top_p": opts["top_p"],
        "min_p": opts["min_p"],
        "typical_p": opts["typical_p"],
        "repeat_last_n": opts["repeat_last_n"],
        "repeat_penalty": opts["repeat_penalty"],
        "presence_penalty": opts["presence_penalty"],
        "frequency_penalty": opts["frequency_penalty"],
        "seed": seed if seed >= 0 else -1,
        "stop": list(opts["stop"]),
    }


class FormatError(Exception):
    """llm/server.go:1485: an unusable `format` (the route answers 500)."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


def format_fields(raw: str | None, chat: bool) -> dict:
    """`format`, its raw JSON text (json.RawMessage; llm/server.go:1475): absent, `null` or `""` -> unset;
    `"json"` -> llama-server's response_format json_object (chat) / json_schema {"type": "object"} (what
    /completion reads for it); an object -> its JSON schema; anything else -> FormatError `invalid format: ...`
    (500)."""
    if raw is None or raw in ("", "null", '""'):
        return {}
    if raw == '"json"':
        if chat:
            return {"response_format": {"type": "json_object"}}
        return {"json_schema": {"type": "object"}}
    if raw[0] != "{":
        raise FormatError(f'invalid format: {gojson.go_quote(raw)}; expected "json" or a valid JSON Schema object')
    schema = json.loads(raw)
    if chat:
        return {"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
    return {"json_schema": schema if schema else {"type": "object"}}
