"""The parts of an architecture description (`Architecture`, `Key`, `Tensor`, `Check`, the default rules) and
the rules that read a GGUF header through one (`Architecture.read`). The descriptions themselves are the
sibling modules (`llama.py`, ...); the table of them is `bankml.models.arch.ARCHITECTURES`.

Owns: what a description is and how a header is read through it. Must not know: any one architecture, weight
types per role (bankml.models.capabilities), tensor data, how the graph runs (bankml.engine).
Mirrors: src/llama-model.cpp (load_hparams: keys, defaults) and src/llama-arch.cpp (tensor names) of b11192.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..gguf import GGUFHeader

NORMS = frozenset({"rms"})            # what the compiled graphs implement, per option
ROPE_TYPES = frozenset({"normal", "neox"})
# "none": every layer attends to the whole cache; "standard/6": llama_hparams::set_swa_pattern(6) with
# LLAMA_SWA_TYPE_STANDARD, layer il sliding when il % 6 < 5 (Gemma 3), the window from the field n_swa
SWA_PATTERNS = frozenset({"none", "standard/6"})
CACHE_TYPES = ("f16", "q8_0")         # the KV cache types (--cache-type-k/v) a graph can reproduce
LAYER_FIELD = "n_layer"               # the field "{i}" in tensor names ranges over: 0 .. n_layer-1
_PY_TYPES = {"UINT32": int, "INT32": int, "UINT64": int, "FLOAT32": float, "BOOL": bool, "STRING": str}


# --- default rules --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Same:
    """The field takes another (earlier) field's value."""

    of: str

    def __call__(self, values: Mapping[str, Any], h: GGUFHeader) -> Any:
        return values.get(self.of)

    def __str__(self) -> str:
        return self.of


@dataclass(frozen=True)
class Ratio:
    """The exact quotient of two fields; unknown when the divisor is zero or does not divide."""

    num: str
    den: str

    def __call__(self, values: Mapping[str, Any], h: GGUFHeader) -> Any:
        a, b = values.get(self.num), values.get(self.den)
        if a is None or not b or a % b:
            return None
        return a // b

    def __str__(self) -> str:
        return f"{self.num} / {self.den}"


@dataclass(frozen=True)
class TokenCount:
    """The number of tokens in the vocabulary (`tokenizer.ggml.tokens`)."""

    def __call__(self, values: Mapping[str, Any], h: GGUFHeader) -> Any:
        tokens = h.get("tokenizer.ggml.tokens")
        return len(tokens) if isinstance(tokens, list) else None

    def __str__(self) -> str:
        return "the number of tokens"


# --- the parts of a description -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Key:
    """`{arch}.{suffix}` of GGUF type `gguf_type`, filling the field `field`. An absent optional key (or one of
    another type, which the guard refuses) leaves the field to `default`: a constant, or a rule over the fields
    declared before it (Same, Ratio, TokenCount). None: the field is unknown."""

    suffix: str
    gguf_type: str
    field: str
    required: bool = False
    default: Any = None


@dataclass(frozen=True)
class Tensor:
    """A tensor of the graph. `name` holds "{i}" for one tensor per layer; `shape` is in ggml order, written
    with dimension names; `slot` is the engine's weights-dict key it fills (per layer when the name has "{i}");
    `tied_to`: when this tensor is absent, the slot is filled from that tensor instead."""

    name: str
    role: str
    shape: tuple[str, ...]
    required: bool
    slot: str
    tied_to: str | None = None

    @property
    def per_layer(self) -> bool:
        return "{i}" in self.name

    def names(self, n_layer: int) -> list[str]:
        return [self.name.replace("{i}", str(i)) for i in range(n_layer)] if self.per_layer else [self.name]


@dataclass(frozen=True)
class Check:
    """One rule the graph asserts about the fields. It runs when every field in `reads` is known; `ok` gets the
    values (None for an unknown field) and `reason` is formatted with them when it fails. A failed `fatal`
    check ends the checking: the later checks and the tensor shapes depend on it."""

    reads: tuple[str, ...]
    ok: Callable[[Mapping[str, Any]], bool]
    reason: str
    fatal: bool = False


@dataclass
class Reading:
    """A header read through a description: the fields (unknown ones absent), every reason it does not fit
    (in the guard's order: key types, unsupported keys, graph checks), and the dimensions the tensor shapes are
    written in (None when a field they use is unknown or a fatal check failed)."""

    values: dict[str, Any]
    reasons: list[str]
    dims: dict[str, int] | None

    @property
    def n_layer(self) -> int | None:
        return self.values.get(LAYER_FIELD)


_EXPR = re.compile(r"\s*(?:([A-Za-z_]\w*)|(\d+)|(\*|//|\+|-))")


def _eval(expr: str, values: Mapping[str, Any]) -> int | None:
    """A dimension expression: names and integers joined by *, //, +, - (left to right). None when a name is
    unknown."""
    pos, acc, op = 0, None, None
    while pos < len(expr.rstrip()):
        m = _EXPR.match(expr, pos)
        if m is None:
            raise ValueError(f"bad dimension expression {expr!r}")
        pos = m.end()
        name, num, sym = m.groups()
        if sym:
            op = sym
            continue
        v = values.get(name) if name else int(num)
        if v is None:
            return None
        acc = v if op is None else {"*": acc * v, "//": acc // v, "+": acc + v, "-": acc - v}[op]
    return acc


def _names_in(expr: str) -> set[str]:
    return {m.group(1) for m in _EXPR.finditer(expr) if m.group(1)}


@dataclass(frozen=True)
class Architecture:
    """One architecture's description (see the module docstring)."""

    name: str
    keys: tuple[Key, ...]
    unsupported: Mapping[str, Any]   # key suffix -> the only value accepted (None: any value is refused)
    dims: Mapping[str, str]          # dimension name -> expression over fields (every field is a dimension too)
    tensors: tuple[Tensor, ...]
    checks: tuple[Check, ...]
    norm: str = "rms"
    rope: str = "normal"
    swa: str = "none"
    cache_types: tuple[str, ...] = CACHE_TYPES  # the KV cache types reproduced for this architecture
    mirrors: str = ""
    _patterns: tuple = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for what, value, known in (("norm", self.norm, NORMS), ("rope", self.rope, ROPE_TYPES),
                                   ("swa", self.swa, SWA_PATTERNS)):
            if value not in known:
                raise ValueError(f"architecture {self.name!r}: {what} {value!r} is not one of {sorted(known)}")
        if not set(self.cache_types) <= set(CACHE_TYPES):
            raise ValueError(f"architecture {self.name!r}: cache types {self.cache_types} not all in {CACHE_TYPES}")
        pats = tuple((re.compile(re.escape(t.name).replace(r"\{i\}", r"(\d+)") + r"\Z"), t) for t in self.tensors)
        object.__setattr__(self, "_patterns", pats)

    # --- the description's parts ------------------------------------------------------------------------

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(k.field for k in self.keys)

    def key(self, suffix: str) -> str:
        return f"{self.name}.{suffix}"

    def dim_fields(self) -> set[str]:
        """The fields the tensor shapes read."""
        out: set[str] = set()
        for t in self.tensors:
            for d in t.shape:
                out |= _names_in(self.dims[d]) if d in self.dims else {d}
        return out

    def swa_layers(self, n_layer: int) -> list[bool]:
        """Which layers attend through the sliding window (src/llama-hparams.cpp set_swa_pattern, b11192)."""
        if self.swa == "none":
            return [False] * n_layer
        kind, period = self.swa.split("/")
        return [il % int(period) < int(period) - 1 for il in range(n_layer)]

    @property
    def swa_type(self) -> str:
        """The sliding-window type of the SWA layers ("none" without them): the engine's swa_type."""
        return self.swa.split("/")[0]

    def match(self, name: str, n_layer: int | None) -> Tensor | None:
        """The tensor of the description a file's tensor name is (None: the graph does not use it). A layer
        number must be written plainly and, when n_layer is known, below it."""
        for rx, t in self._patterns:
            m = rx.match(name)
            if m is None:
                continue
            if m.groups():
                layer = int(m.group(1))
                if n_layer is not None and (layer >= n_layer or str(layer) != m.group(1)):
                    return None
            return t
        return None

    def tied(self, tensor_names) -> bool:
        """Whether a tensor with a fallback is absent, so that its slot is filled from another (tied head)."""
        return any(t.tied_to and t.name not in tensor_names for t in self.tensors)

    # --- reading a header ----------------------------------------------------------------------------------

    def read(self, h: GGUFHeader) -> Reading:
        """The fields of `h` by this description, with every reason the header does not fit it."""
        reasons: list[str] = []
        raw: dict[str, Any] = {}
        for required in (True, False):
            for k in self.keys:
                if k.required != required:
                    continue
                key = self.key(k.suffix)
                if key not in h.metadata:
                    if required:
                        reasons.append(f"hyper-parameter {key} is missing")
                    continue
                got = h.value_types[key].name
                if got == "ARRAY":
                    reasons.append(f"hyper-parameter {key} is given per layer (an array); bankml needs one value")
                elif got != k.gguf_type:
                    reasons.append(f"hyper-parameter {key} is a {got.lower()}; llama.cpp requires a "
                                   f"{k.gguf_type.lower()}")
                else:
                    raw[k.field] = _PY_TYPES[k.gguf_type](h.metadata[key])
        for suffix, only in self.unsupported.items():
            key = self.key(suffix)
            if key in h.metadata and (only is None or h.metadata[key] != only):
                reasons.append(f"{key} = {h.metadata[key]!r} is not supported yet"
                               + ("" if only is None else f" (only {only!r})"))
        values: dict[str, Any] = {}
        for k in self.keys:
            if k.field in raw:
                values[k.field] = raw[k.field]
            else:
                v = k.default(values, h) if callable(k.default) else k.default
                if v is not None:
                    values[k.field] = v
        dims = self._check(values, reasons)
        return Reading(values, reasons, dims)

    def _check(self, values: dict[str, Any], reasons: list[str]) -> dict[str, int] | None:
        """The graph checks, then the dimensions. Neither runs while a required field they read is unknown
        (the missing key is the reason)."""
        used = self.dim_fields().union(*(c.reads for c in self.checks))
        if any(k.required and k.field in used and k.field not in values for k in self.keys):
            return None
        full = {f: values.get(f) for f in self.fields}
        for c in self.checks:
            if any(values.get(f) is None for f in c.reads):
                continue
            if not c.ok(full):
                reasons.append(c.reason.format(**full))
                if c.fatal:
                    return None
        dims: dict[str, int] = {}
        for t in self.tensors:
            for d in t.shape:
                v = _eval(self.dims[d], values) if d in self.dims else values.get(d)
                if v is None:
                    return None
                dims[d] = v
        return dims

    def table(self) -> dict[str, dict]:
        """The description as the plain table `bankml.models.capabilities.ARCHITECTURES` shows."""
        return {"hparams": {k.suffix: k.gguf_type for k in self.keys if k.required},
                "optional_hparams": {k.suffix: k.gguf_type for k in self.keys if not k.required},
                "unsupported": dict(self.unsupported),
                "tensors": {t.name: (t.role, tuple(t.shape), t.required) for t in self.tensors}}
