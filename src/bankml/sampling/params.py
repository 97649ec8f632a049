"""A completion request's parameters, resolved as llama-server b11192 resolves them.

tools/server/server-schema.cpp (`make_llama_cmpl_schema` / `eval_llama_cmpl_schema`) walks a fixed list of
fields in a fixed order; each field takes its first present, non-null name (aliases), converts the JSON value
as nlohmann::json's `get<T>` does, clamps it (soft limits) or refuses it (hard limits), and the first refusal
wins. A refusal is std::invalid_argument "Field 'NAME': WHAT", which the HTTP layer answers with 400.
`Defaults` is the server's side (common_params_sampling and the server flags, with the GGUF's
`general.sampling.*` keys over them); `from_request` is the whole walk; `Params.to_json` is task_params::to_json
(the `generation_settings` of /completion, /props' `default_generation_settings`).
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass, field, fields, replace

from bankml.cxx.cfloat import f32
from bankml.chat.errors import ChatRequestError
from bankml.chat.messages import CONTINUE_NONE
from bankml.chat.request import parse_continuation
from bankml.cxx.nljson import iterate as _iterate

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
FLT_MAX = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
DEFAULT_SEED = 0xFFFFFFFF

# common_sampler_type, by canonical name (common_sampler_type_to_str) and char
SAMPLER_NAMES = ("dry", "top_k", "typ_p", "top_p", "top_n_sigma", "min_p", "temperature", "xtc", "infill",
                 "penalties", "adaptive_p")
SAMPLER_CHARS = {"d": "dry", "k": "top_k", "y": "typ_p", "p": "top_p", "s": "top_n_sigma", "m": "min_p",
                 "t": "temperature", "x": "xtc", "i": "infill", "e": "penalties", "a": "adaptive_p"}
DEFAULT_SAMPLERS = ("penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature")


def _sampler_aliases() -> dict[str, str]:
    out = {}
    for name in SAMPLER_NAMES:
        out[name] = name
        if "_" in name:
            out[name.replace("_", "-")] = name
            out[name.replace("_", "")] = name
    out.update(nucleus="top_p", temp="temperature", typ="typ_p")
    return out


SAMPLER_ALIASES = _sampler_aliases()
_CHAT_FORMATS = ("Content-only", "peg-simple", "peg-native", "peg-gemma4", "peg-minimax-m3")
_REASONING_FORMATS = ("none", "auto", "deepseek", "deepseek-legacy")


class RequestError(ChatRequestError):
    """A request llama-server refuses while resolving its parameters: `status` (400 unless said otherwise) and
    `message`, llama-server's error text; `body()` is its error JSON (format_error_response)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message, status)

    def body(self) -> dict:
        return {"error": {"code": self.status, "message": self.message, "type": self.error_type}}


# ---------------------------------------------------------------------------------------------------------------
# nlohmann::json's get<T> (the value types of Python's json: None, bool, int, float, str, list, dict)

def _type_name(v) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


class _TypeError(Exception):
    def __init__(self, want: str, v):
        super().__init__(f"[json.exception.type_error.302] type must be {want}, but is {_type_name(v)}")


def _json_number(v):
    """an integer outside int64/uint64 is a double in nlohmann's parser"""
    if isinstance(v, int) and not isinstance(v, bool) and not (-2**63 <= v < 2**64):
        return float(v)
    return v


def _wrap(n: int, bits: int, signed: bool) -> int:
    n &= (1 << bits) - 1
    if signed and n >= 1 << (bits - 1):
        n -= 1 << bits
    return n


def _double_to_int(x: float, bits: int, signed: bool) -> int:
    """static_cast of a double as GCC compiles it on x86-64: int32 via cvttsd2si (out of range: INT32_MIN),
    uint32 via the 64-bit cvttsd2si and its low half, int64 via cvttsd2si (out of range: INT64_MIN)"""
    if bits == 32 and signed:
        if math.isfinite(x) and -2**31 - 1 < x < 2**31:
            return int(x)
        return -2**31
    if math.isfinite(x) and -2**63 - 1 < x < 2**63:
        t = int(x)
    else:
        t = -2**63
    return _wrap(t, bits, signed)


def get_num(v, kind: str):
    """get<T>() for T = int32 ("i32"), uint32 ("u32"), int64 ("i64"), float ("f32")"""
    v = _json_number(v)
    if isinstance(v, bool):
        if kind == "i64":   # int64_t is nlohmann's number_integer_t: get_arithmetic_value has no boolean case
            raise _TypeError("number", v)
        return float(v) if kind == "f32" else int(v)
    if not isinstance(v, (int, float)):
        raise _TypeError("number", v)
    if kind == "f32":
        return f32(float(v))
    bits, signed = {"i32": (32, True), "u32": (32, False), "i64": (64, True)}[kind]
    if isinstance(v, float):
        return _double_to_int(v, bits, signed)
    return _wrap(v, bits, signed)


def get_bool(v) -> bool:
    if not isinstance(v, bool):
        raise _TypeError("boolean", v)
    return v


def get_str(v) -> str:
    if not isinstance(v, str):
        raise _TypeError("string", v)
    return v


def get_str_list(v) -> list[str]:
    if not isinstance(v, list):
        raise _TypeError("array", v)
    return [get_str(x) for x in v]


def _json_value_str_list(d: dict, key: str) -> list[str]:
    """json_value(d, key, std::vector<std::string>()): a type error gives the default"""
    try:
        return get_str_list(d[key]) if d.get(key) is not None else []
    except _TypeError:
        return []


def to_string_num(x, kind: str) -> str:
    """std::to_string"""
    return f"{x:f}" if kind == "f32" else str(int(x))


def _has(d: dict, n: str) -> bool:
    return n in d and d[n] is not None


# ---------------------------------------------------------------------------------------------------------------
# the server's defaults

@dataclass
class Defaults:
    """common_params' sampling and task defaults as llama-server runs them (`-n`, `--temp`, ... on its command
    line; the GGUF's general.sampling.* keys over common_params_sampling's defaults)."""
    n_vocab: int = 0
    eog_ids: tuple = ()
    seed: int = DEFAULT_SEED
    n_probs: int = 0
    min_keep: int = 0
    top_k: int = 40
    top_p: float = f32(0.95)
    min_p: float = f32(0.05)
    xtc_probability: float = 0.0
    xtc_threshold: float = f32(0.10)
    typ_p: float = 1.0
    temp: float = f32(0.80)
    dynatemp_range: float = 0.0
    dynatemp_exponent: float = 1.0
    penalty_last_n: int = 64
    penalty_repeat: float = 1.0
    penalty_freq: float = 0.0
    penalty_present: float = 0.0
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = 64
    adaptive_target: float = -1.0
    adaptive_decay: float = f32(0.90)
    mirostat: int = 0
    top_n_sigma: float = -1.0
    mirostat_tau: float = 5.0
    mirostat_eta: float = f32(0.10)
    dry_sequence_breakers: tuple = ("\n", ":", "\"", "*")
    samplers: tuple = DEFAULT_SAMPLERS
    backend_sampling: bool = False          # --backend-sampling
    # server flags
    n_predict: int = -1
    n_keep: int = 0
    n_cache_reuse: int = 0
    cache_prompt: bool = True
    antiprompt: tuple = ()
    sse_ping_interval: int = 30
    n_parallel: int = 1
    verbosity: int = 3
    reasoning_format: str = "deepseek"
    special: bool = False

    @classmethod
    def from_gguf(cls, header, n_vocab: int, eog_ids, **overrides) -> "Defaults":
        """common_init_sampler_from_model: each general.sampling.* key present in the GGUF replaces the default
        (the value goes through its text form and strtol/strtof, as llama_model_meta_val_str gives it);
        `overrides` are the server's command-line values, which win over the file."""
        d = cls(n_vocab=n_vocab, eog_ids=tuple(sorted(eog_ids)))
        ints = {"top_k": "top_k", "penalty_last_n": "penalty_last_n", "mirostat": "mirostat"}
        floats = {"top_p": "top_p", "min_p": "min_p", "xtc_probability": "xtc_probability",
                  "xtc_threshold": "xtc_threshold", "temp": "temp", "penalty_repeat": "penalty_repeat",
                  "mirostat_tau": "mirostat_tau", "mirostat_eta": "mirostat_eta"}
        seq = header.get("general.sampling.sequence") if header is not None else None
        if isinstance(seq, str) and "samplers" not in overrides:
            names = [SAMPLER_ALIASES[s.lower()] for s in seq.split(";") if s.lower() in SAMPLER_ALIASES]
            if seq.split(";"):
                d.samplers = tuple(names)
        for key, attr in list(ints.items()) + list(floats.items()):
            v = header.get("general.sampling." + key) if header is not None else None
            if attr in overrides or v is None or isinstance(v, (str, list, dict)):
                continue
            if attr in ints:
                d = replace(d, **{attr: _wrap(int(v), 32, True)})
            else:
                d = replace(d, **{attr: f32(float(f"{float(v):f}"))})
        return replace(d, **overrides)

    @property
    def logit_bias_eog(self) -> list[tuple[int, float]]:
        return [(t, -math.inf) for t in self.eog_ids]


# ---------------------------------------------------------------------------------------------------------------
# the request's parameters

@dataclass
class Params:
    """task_params: every field llama-server's completion schema reads (names as in llama.cpp's structs)."""
    # task
    verbose: bool = False
    timings_per_token: bool = False
    stream: bool = False
    include_usage: bool = False
    cache_prompt: bool = True
    return_tokens: bool = False
    return_progress: bool = False
    sse_ping_interval: int = 30
    n_predict: int = -1
    n_indent: int = 0
    n_keep: int = 0
    n_discard: int = 0
    n_cmpl: int = 1
    n_cache_reuse: int = 0
    t_max_predict_ms: int = -1
    response_fields: list = field(default_factory=list)
    # sampling
    seed: int = DEFAULT_SEED
    n_probs: int = 0
    min_keep: int = 0
    top_k: int = 40
    top_p: float = 0.0
    min_p: float = 0.0
    top_n_sigma: float = -1.0
    xtc_probability: float = 0.0
    xtc_threshold: float = 0.0
    typ_p: float = 1.0
    temp: float = 0.0
    dynatemp_range: float = 0.0
    dynatemp_exponent: float = 1.0
    penalty_last_n: int = 64
    penalty_repeat: float = 1.0
    penalty_freq: float = 0.0
    penalty_present: float = 0.0
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = 64
    mirostat: int = 0
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    adaptive_target: float = -1.0
    adaptive_decay: float = 0.9
    backend_sampling: bool = False
    post_sampling_probs: bool = False
    lora: dict = field(default_factory=dict)
    dry_sequence_breakers: list = field(default_factory=list)
    grammar: object = None            # bankml.grammar.request.GrammarSpec or None
    grammar_lazy: bool = False
    grammar_triggers: list = field(default_factory=list)
    preserved_tokens: set = field(default_factory=set)
    chat_format: int = 0
    reasoning_format: str = "deepseek"
    reasoning_in_content: bool = False
    generation_prompt: str = ""
    parse_tool_calls: bool = False
    chat_parser: str = ""
    is_continuation: bool = False
    echo: bool = False
    reasoning_control: bool = False
    reasoning_budget_tokens: int = -1
    reasoning_budget_start: list = field(default_factory=list)
    reasoning_budget_end: list = field(default_factory=list)
    reasoning_budget_forced: list = field(default_factory=list)
    logit_bias: list = field(default_factory=list)      # [(token, bias)] in request order
    ignore_eos: bool = False
    stop: list = field(default_factory=list)             # antiprompt
    samplers: list = field(default_factory=list)
    # request fields outside the schema that the server reads
    id_slot: int = -1
    n_vocab: int = 0

    @property
    def stream_include_usage(self) -> bool:
        return self.include_usage

    def to_json(self, only_metrics: bool = False) -> dict:
        """task_params::to_json (ordered as llama-server emits it; floats are float32 values)"""
        lora = [{"id": k, "scale": v} for k, v in sorted(self.lora.items())]
        head = {
            "seed": self.seed, "temperature": self.temp, "dynatemp_range": self.dynatemp_range,
            "dynatemp_exponent": self.dynatemp_exponent, "top_k": self.top_k, "top_p": self.top_p,
            "min_p": self.min_p, "top_n_sigma": self.top_n_sigma, "xtc_probability": self.xtc_probability,
            "xtc_threshold": self.xtc_threshold, "typical_p": self.typ_p, "repeat_last_n": self.penalty_last_n,
            "repeat_penalty": self.penalty_repeat, "presence_penalty": self.penalty_present,
            "frequency_penalty": self.penalty_freq, "dry_multiplier": self.dry_multiplier,
            "dry_base": self.dry_base, "dry_allowed_length": self.dry_allowed_length,
            "dry_penalty_last_n": self.dry_penalty_last_n,
        }
        if not only_metrics:
            head["dry_sequence_breakers"] = list(self.dry_sequence_breakers)
        head.update({"mirostat": self.mirostat, "mirostat_tau": self.mirostat_tau,
                     "mirostat_eta": self.mirostat_eta, "adaptive_target": self.adaptive_target,
                     "adaptive_decay": self.adaptive_decay})
        if not only_metrics:
            head["stop"] = list(self.stop)
        head.update({"max_tokens": self.n_predict, "n_predict": self.n_predict, "n_keep": self.n_keep,
                     "n_discard": self.n_discard, "ignore_eos": self.ignore_eos, "stream": self.stream})
        if not only_metrics:
            head["logit_bias"] = [{"bias": None if not math.isfinite(b) else b, "token": t}
                                  for t, b in self.logit_bias]
        head.update({"n_probs": self.n_probs, "min_keep": self.min_keep})
        if not only_metrics:
            head.update({
                "grammar": self.grammar.text if self.grammar is not None else "",
                "grammar_lazy": self.grammar_lazy,
                "grammar_triggers": [_trigger_json(t) for t in self.grammar_triggers],
                "preserved_tokens": sorted(self.preserved_tokens)})
        head.update({
            "chat_format": _CHAT_FORMATS[self.chat_format] if 0 <= self.chat_format < len(_CHAT_FORMATS) else "",
            "reasoning_format": self.reasoning_format, "reasoning_in_content": self.reasoning_in_content,
            "generation_prompt": self.generation_prompt, "samplers": list(self.samplers),
            "speculative.types": "none", "timings_per_token": self.timings_per_token,
            "post_sampling_probs": self.post_sampling_probs, "backend_sampling": self.backend_sampling,
            "lora": lora})
        # nlohmann::json writes a non-finite number as null
        return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in head.items()}


def _trigger_json(t) -> dict:
    """server_grammar_trigger::to_json"""
    out = {"type": t.type, "value": t.value}
    if t.type == 0:   # COMMON_GRAMMAR_TRIGGER_TYPE_TOKEN
        out["token"] = t.token
    return out


def fresh(defaults: Defaults) -> Params:
    """the params a request starts from (eval_llama_cmpl_schema's first lines)"""
    d = defaults
    return Params(
        cache_prompt=d.cache_prompt, sse_ping_interval=d.sse_ping_interval, n_predict=d.n_predict,
        n_keep=d.n_keep, n_cache_reuse=d.n_cache_reuse, verbose=d.verbosity > 9,
        seed=d.seed, n_probs=d.n_probs, min_keep=d.min_keep, top_k=d.top_k, top_p=d.top_p, min_p=d.min_p,
        top_n_sigma=d.top_n_sigma, xtc_probability=d.xtc_probability, xtc_threshold=d.xtc_threshold,
        typ_p=d.typ_p, temp=d.temp, dynatemp_range=d.dynatemp_range, dynatemp_exponent=d.dynatemp_exponent,
        penalty_last_n=d.penalty_last_n, penalty_repeat=d.penalty_repeat, penalty_freq=d.penalty_freq,
        penalty_present=d.penalty_present, dry_multiplier=d.dry_multiplier, dry_base=d.dry_base,
        dry_allowed_length=d.dry_allowed_length, dry_penalty_last_n=d.dry_penalty_last_n,
        mirostat=d.mirostat, mirostat_tau=d.mirostat_tau, mirostat_eta=d.mirostat_eta,
        adaptive_target=d.adaptive_target, adaptive_decay=d.adaptive_decay,
        dry_sequence_breakers=list(d.dry_sequence_breakers), samplers=list(d.samplers),
        stop=list(d.antiprompt), reasoning_format=d.reasoning_format, n_vocab=d.n_vocab,
        backend_sampling=d.backend_sampling)


def props_params(defaults: Defaults) -> Params:
    """/props' task_params: a default task_params with the server's sampling (so n_predict -1, reasoning "none",
    whatever -n says)"""
    p = fresh(Defaults())
    d = fresh(defaults)
    for name in ("seed", "n_probs", "min_keep", "top_k", "top_p", "min_p", "top_n_sigma", "xtc_probability",
                 "xtc_threshold", "typ_p", "temp", "dynatemp_range", "dynatemp_exponent", "penalty_last_n",
                 "penalty_repeat", "penalty_freq", "penalty_present", "dry_multiplier", "dry_base",
                 "dry_allowed_length", "dry_penalty_last_n", "mirostat", "mirostat_tau", "mirostat_eta",
                 "adaptive_target", "adaptive_decay", "dry_sequence_breakers", "samplers", "backend_sampling"):
        setattr(p, name, getattr(d, name))
    p.reasoning_format = "none"
    p.stop = []
    return p


def props_json(defaults: Defaults, n_ctx_slot: int) -> dict:
    """/props' default_generation_settings"""
    return {"params": props_params(defaults).to_json(only_metrics=True), "n_ctx": n_ctx_slot}


# ---------------------------------------------------------------------------------------------------------------
# the walk

class _Walk:
    def __init__(self, data: dict, defaults: Defaults, tok):
        self.data, self.d, self.tok = data, defaults, tok
        self.p = fresh(defaults)

    def name(self, *names):
        for n in names:
            if _has(self.data, n):
                return n
        return None

    def run(self, n, fn):
        try:
            fn(self.data[n])
        except (_TypeError, ValueError, _FieldError) as e:
            raise RequestError(f"Field '{n}': {e}") from None

    def boolean(self, attr, *names):
        n = self.name(*names)
        if n is not None:
            self.run(n, lambda v: setattr(self.p, attr, get_bool(v)))

    def num(self, attr, kind, *names, lo=None, hi=None, hard=False):
        n = self.name(*names)
        if n is None:
            return

        def f(v):
            x = get_num(v, kind)
            if lo is None and kind == "f32":
                # field_num's default limits are numeric_limits<float>::lowest() .. max(): infinities clamp
                x = _clamp(x, -FLT_MAX, FLT_MAX)
            elif lo is not None:
                if hard:
                    if x < lo or x > hi or _outside(v, kind):
                        raise _FieldError(f"Value must be between {to_string_num(lo, kind)} <= value <= "
                                          f"{to_string_num(hi, kind)}, but got {_as_given(v, x, kind)}")
                else:
                    x = _clamp(x, lo, hi)
            setattr(self.p, attr, x)
        self.run(n, f)

    def handler(self, fn, *names):
        n = self.name(*names)
        if n is not None:
            self.run(n, fn)


class _FieldError(Exception):
    pass


_RANGES = {"i32": (-2**31, 2**31 - 1), "u32": (0, 2**32 - 1), "i64": (-2**63, 2**63 - 1)}


def _outside(v, kind: str) -> bool:
    """A number the field's C type cannot hold (get<T> would wrap it, or give INT_MIN for a double). Such a
    value is refused by the hard limits even where llama-server's wrapped value lands inside them
    (n_predict 4294967301 runs as 5 there): a departure, see docs/grammar.md's "Depth and size limits"."""
    v = _json_number(v)
    if kind not in _RANGES or isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    lo, hi = _RANGES[kind]
    if isinstance(v, float):
        return not (math.isfinite(v) and lo - 1 < v < hi + 1)
    return not lo <= v <= hi


def _as_given(v, x, kind: str) -> str:
    """The value in the refusal: the request's own number when the C type could not hold it (llama-server
    prints the wrapped one: n_predict 1000000000000 "but got -727379968"), else std::to_string of the value."""
    if _outside(v, kind):
        from bankml.cxx.nljson import dump
        return dump(_json_number(v))
    return to_string_num(x, kind)


def _clamp(x, lo, hi):
    """std::max(lo, std::min(hi, x))"""
    m = x if x < hi else hi
    return m if lo < m else lo


def from_request(data: dict, defaults: Defaults, tok=None) -> Params:
    """eval_llama_cmpl_schema(vocab, params_base, logit_bias_eog, data): raises RequestError"""
    from bankml.grammar import request as greq
    if not isinstance(data, dict):
        data = {}
    w = _Walk(data, defaults, tok)
    p = w.p
    w.boolean("verbose", "verbose")
    w.boolean("timings_per_token", "timings_per_token")
    w.boolean("stream", "stream")
    so = data.get("stream_options")
    if isinstance(so, dict) and _has(so, "include_usage"):
        try:
            p.include_usage = get_bool(so["include_usage"])
        except _TypeError as e:
            raise RequestError(f"Field 'include_usage': {e}") from None
    w.boolean("cache_prompt", "cache_prompt")
    w.boolean("return_tokens", "return_tokens")
    w.boolean("return_progress", "return_progress")
    w.num("sse_ping_interval", "i32", "sse_ping_interval", lo=-1, hi=INT32_MAX, hard=True)
    w.num("n_predict", "i32", "n_predict", "max_completion_tokens", "max_tokens", lo=-1, hi=INT32_MAX, hard=True)
    w.num("n_indent", "i32", "n_indent", lo=0, hi=INT32_MAX, hard=True)
    w.num("n_keep", "i32", "n_keep", lo=-1, hi=INT32_MAX, hard=True)
    w.num("n_discard", "i32", "n_discard", lo=0, hi=INT32_MAX, hard=True)
    w.num("n_cmpl", "i32", "n_cmpl", "n", lo=1, hi=defaults.n_parallel, hard=True)
    w.num("n_cache_reuse", "i32", "n_cache_reuse", lo=0, hi=INT32_MAX, hard=True)
    w.num("t_max_predict_ms", "i64", "t_max_predict_ms", lo=-1, hi=INT64_MAX, hard=True)
    w.handler(lambda v: setattr(p, "response_fields", _json_value_str_list(data, "response_fields")),
              "response_fields")
    # sampling
    w.num("top_k", "i32", "top_k", lo=0, hi=INT32_MAX)
    w.num("top_p", "f32", "top_p", lo=0.0, hi=1.0)
    w.num("min_p", "f32", "min_p", lo=0.0, hi=1.0)
    w.num("top_n_sigma", "f32", "top_n_sigma")
    w.num("xtc_probability", "f32", "xtc_probability", lo=0.0, hi=1.0)
    w.num("xtc_threshold", "f32", "xtc_threshold", lo=0.0, hi=1.0)
    w.num("typ_p", "f32", "typical_p")
    w.num("temp", "f32", "temperature", lo=0.0, hi=math.inf)
    w.num("dynatemp_range", "f32", "dynatemp_range")
    w.num("dynatemp_exponent", "f32", "dynatemp_exponent")
    w.num("penalty_last_n", "i32", "repeat_last_n", lo=0, hi=INT32_MAX, hard=True)
    w.num("penalty_repeat", "f32", "repeat_penalty")
    w.num("penalty_freq", "f32", "frequency_penalty")
    w.num("penalty_present", "f32", "presence_penalty")
    w.num("dry_multiplier", "f32", "dry_multiplier")

    def dry_base(v):
        x = get_num(v, "f32")
        p.dry_base = defaults.dry_base if x < 1.0 else x
    w.handler(dry_base, "dry_base")
    w.num("dry_allowed_length", "i32", "dry_allowed_length", lo=0, hi=INT32_MAX, hard=True)
    w.num("dry_penalty_last_n", "i32", "dry_penalty_last_n", lo=0, hi=INT32_MAX, hard=True)
    w.num("mirostat", "i32", "mirostat", lo=0, hi=2)
    w.num("mirostat_tau", "f32", "mirostat_tau")
    w.num("mirostat_eta", "f32", "mirostat_eta")
    w.num("adaptive_target", "f32", "adaptive_target", lo=-FLT_MAX, hi=1.0)
    w.num("adaptive_decay", "f32", "adaptive_decay", lo=0.0, hi=f32(0.99), hard=True)
    w.num("seed", "u32", "seed")
    w.num("n_probs", "i32", "n_probs", "logprobs")
    w.num("min_keep", "i32", "min_keep", lo=0, hi=INT32_MAX, hard=True)
    w.boolean("backend_sampling", "backend_sampling")
    w.boolean("post_sampling_probs", "post_sampling_probs")

    def lora(v):
        if not isinstance(v, list):
            raise _FieldError("Error: 'lora' must be an array of objects with 'id' and 'scale' fields")
        out = {}
        for e in v:
            i = e.get("id") if isinstance(e, dict) else None
            s = e.get("scale") if isinstance(e, dict) else None
            i = get_num(i, "i32") if isinstance(i, (int, float)) else -1
            s = get_num(s, "f32") if isinstance(s, (int, float)) else 0.0
            out[i] = s
        p.lora = out
    w.handler(lora, "lora")

    def breakers(v):
        p.dry_sequence_breakers = _json_value_str_list(data, "dry_sequence_breakers")
        if not p.dry_sequence_breakers:
            raise _FieldError("Error: dry_sequence_breakers must be a non-empty array of strings")
    w.handler(breakers, "dry_sequence_breakers")

    n = w.name("json_schema", "grammar")
    if n is not None:
        try:
            p.grammar = greq.completion_grammar(data)
        except greq.ConstrainedRequestError as e:
            raise RequestError(e.message, e.status) from None
    w.boolean("grammar_lazy", "grammar_lazy")

    # chat parser fields
    def chat_format(v):
        p.chat_format = get_num(v, "i32")
    w.handler(chat_format, "chat_format")

    def reasoning_format(v):
        s = get_str(v)
        if s not in _REASONING_FORMATS:
            raise _FieldError("Unknown reasoning format: " + s)
        p.reasoning_format = s
        p.reasoning_in_content = p.stream and s == "deepseek-legacy"
    w.handler(reasoning_format, "reasoning_format")

    def generation_prompt(v):
        p.generation_prompt = get_str(v)
    w.handler(generation_prompt, "generation_prompt")
    w.boolean("parse_tool_calls", "parse_tool_calls")

    def chat_parser(v):
        p.chat_parser = get_str(v)
    w.handler(chat_parser, "chat_parser")
    w.handler(lambda v: setattr(p, "is_continuation", parse_continuation(v) != CONTINUE_NONE),
              "continue_final_message")
    w.boolean("echo", "echo")

    # token-level fields
    def tokenize(text, parse_special=True):
        if tok is None:
            raise RequestError("this request needs the tokenizer", 500)
        return list(tok.tokenize(text, add_special=False, parse_special=parse_special))

    def preserved(v):
        out = set()
        for t in _iterate(v):
            ids = tokenize(get_str(t))
            if len(ids) == 1:
                out.add(ids[0])
        p.preserved_tokens = out
    w.handler(preserved, "preserved_tokens")
    if w.name("grammar_triggers") is not None:
        try:
            p.grammar_triggers = greq.field_grammar_triggers(data, tokenize, p.preserved_tokens, p.grammar_lazy)
        except greq.ConstrainedRequestError as e:
            raise RequestError(e.message, e.status) from None
    if p.grammar is not None:
        p.grammar.lazy = p.grammar_lazy
        p.grammar.triggers = p.grammar_triggers
    w.boolean("reasoning_control", "reasoning_control")
    w.num("reasoning_budget_tokens", "i32", "reasoning_budget_tokens", lo=-1, hi=INT32_MAX, hard=True)
    w.handler(lambda v: setattr(p, "reasoning_budget_start", tokenize(get_str(v))), "reasoning_budget_start_tag")

    def end_tags(v):
        p.reasoning_budget_end = []
        if "reasoning_budget_end_tags" in data:
            for t in _iterate(data["reasoning_budget_end_tags"]):
                s = get_str(t)
                if s:
                    p.reasoning_budget_end.append(tokenize(s))
        elif "reasoning_budget_end_tag" in data:
            s = get_str(data["reasoning_budget_end_tag"])
            if s:
                p.reasoning_budget_end.append(tokenize(s))
    w.handler(end_tags, "reasoning_budget_end_tags", "reasoning_budget_end_tag")

    def budget_message(v):
        if p.reasoning_budget_end:
            end = list(p.reasoning_budget_end[0])
            m = data.get("reasoning_budget_message")
            m = m if isinstance(m, str) else ""
            if m:
                end = tokenize(m) + end
            p.reasoning_budget_forced = end
    w.handler(budget_message, "reasoning_budget_message")

    def logit_bias(v):
        out = []
        nv = defaults.n_vocab

        def bias_of(b):
            b = _json_number(b)
            if isinstance(b, bool):
                return -math.inf if b is False else None
            if isinstance(b, (int, float)):
                return get_num(b, "f32")
            return None
        if isinstance(v, list):
            for el in v:
                if not isinstance(el, list) or len(el) != 2:
                    continue
                b = bias_of(el[1])
                if b is None:
                    continue
                t = _json_number(el[0])
                if isinstance(t, int) and not isinstance(t, bool):
                    t = _wrap(t, 32, True)
                    if 0 <= t < nv:
                        out.append((t, b))
                elif isinstance(t, str):
                    out += [(i, b) for i in tokenize(t, parse_special=False)]
        elif isinstance(v, dict):
            for key, bv in v.items():
                b = bias_of(bv)
                if b is None:
                    continue
                t = _strtol_full(key)
                if t is not None:
                    if 0 <= t < nv:
                        out.append((t, b))
                else:
                    out += [(i, b) for i in tokenize(key, parse_special=False)]
        p.logit_bias = out
    w.handler(logit_bias, "logit_bias")

    def ignore_eos(v):
        p.ignore_eos = get_bool(v)
        if p.ignore_eos:
            p.logit_bias = p.logit_bias + defaults.logit_bias_eog
    w.handler(ignore_eos, "ignore_eos")

    def stop(v):
        p.stop = []
        if isinstance(v, list):
            for word in v:
                if word is None or (isinstance(word, (list, dict)) and not word):
                    continue
                p.stop.append(get_str(word))
        elif isinstance(v, str):
            p.stop.append(v)
        if not p.stop:
            p.stop = list(defaults.antiprompt)
    w.handler(stop, "stop")

    def samplers(v):
        if isinstance(v, list):
            p.samplers = [SAMPLER_ALIASES[s.lower()] for s in get_str_list(v) if s.lower() in SAMPLER_ALIASES]
        elif isinstance(v, str):
            p.samplers = [SAMPLER_CHARS[c] for c in v if c in SAMPLER_CHARS]
    w.handler(samplers, "samplers")

    # outside the schema: the completion handler's own reads
    v = data.get("id_slot")
    try:
        p.id_slot = get_num(v, "i32") if v is not None else -1
    except _TypeError:
        p.id_slot = -1
    return p


_STRTOL = re.compile(r"[ \t\n\v\f\r]*([+-]?[0-9]+)")


def _strtol_full(key: str):
    """strtol(key, &end, 10) with *end == 0: the token id, or None when text follows (an empty key is 0)"""
    if key == "":
        return 0
    m = _STRTOL.match(key)
    if m is None or m.end() != len(key):
        return None
    n = int(m.group(1))
    n = max(-2**63, min(2**63 - 1, n))   # strtol saturates (long is 64-bit)
    return _wrap(n, 32, True)


def param_names() -> list[str]:
    return [f.name for f in fields(Params)]
