"""The models an Ollama client sees, by Ollama's names: every model the residency may serve (the registry's, or
the router's models directory) under its Ollama name, and the derived models (bankml.models.derived: a small
manifest layered on a pinned file) over them.

    cat = Catalog(residency)
    m = cat.find("SmolLM2-135M-Instruct-Q4_1")    # an OllamaModel, or None (unknown or invalid name)
    m.resident                                    # the residency name whose lease holds its weights
    m.parameters, m.system, m.template, m.messages, m.license   # what a Modelfile stored ({} / None / [])
    cat.models()                                  # every model, for /api/tags

Names match as Ollama matches them (names.parse(...).key(): without regard to case, `:latest` implied); a
derived model shadows a registry model of the same name.

    header(path)          the GGUF header (cached by the file's identity)
    details(path)         /api/tags' details: family (general.architecture), families, parameter_size
                          (format.HumanNumber of the tensors' element count), quantization_level (the file type)
    digest(m), size(m)    /api/tags' digest and size (see docs/ollama-models.md: a registry model has no manifest)
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import names
from ...models import derived as derived_store


@dataclass
class OllamaModel:
    name: str                         # DisplayShortest of its name ("smollm2-135m-instruct-q4_1:latest")
    resident: str                     # the bankml.server.residency name of its weights
    path: str                         # the GGUF file
    parameters: dict = field(default_factory=dict)   # stored PARAMETERs: option key -> typed value
    system: str | None = None
    template: str | None = None
    messages: list = field(default_factory=list)     # MESSAGE lines: [{"role", "content"}]
    license: list = field(default_factory=list)
    parent: str = ""                  # parent_model: the base of a derived model
    derived: bool = False             # a manifest of bankml.models.derived (else a registry model)
    modified: float = 0.0             # mtime (seconds since the epoch) of its manifest, or of its file


class Catalog:
    def __init__(self, residency):
        self.residency = residency

    def _sync_registry(self) -> None:
        """Single-model mode: registry models that appeared since start-up (a pull, a file moved in) join the
        residency, as app._add_registry added the others."""
        cfg = getattr(self.residency, "cfg", None)
        if cfg is None or getattr(cfg, "router_mode", True):
            return
        from ...models.registry import Registry
        try:
            entries = Registry().entries()
        except OSError:
            return
        known = {os.path.realpath(r.path) for r in list(self.residency.models.values())}
        for e in entries:
            if os.path.realpath(e.path) not in known and self.residency.resolve(e.name) is None:
                self.residency.add(e.name, str(e.path), e.aliases)

    def _base_models(self) -> list[OllamaModel]:
        self._sync_registry()
        out = []
        for r in list(self.residency.models.values()):
            # its own name, else (the startup model is named by its path) the first alias that is an Ollama name
            n = next((c for c in map(names.parse, (r.name,) + tuple(r.aliases))
                      if c.valid and ".gguf" not in c.model), None)
            if n is None or not os.path.exists(r.path):
                continue
            try:
                mtime = os.stat(r.path).st_mtime
            except OSError:
                mtime = 0.0
            out.append(OllamaModel(n.display(), r.name, r.path, modified=mtime))
        return out

    def _resident_for(self, path: str) -> str:
        """The residency entry of a base file (added when the residency does not hold it yet)."""
        real = os.path.realpath(path)
        for r in list(self.residency.models.values()):
            if os.path.realpath(r.path) == real:
                return r.name
        stem = os.path.basename(path).replace(".gguf", "")
        name, i = stem, 1
        while self.residency.resolve(name) is not None:
            i += 1
            name = f"{stem}-{i}"
        self.residency.add(name, path)
        return name

    def _derived_models(self) -> list[OllamaModel]:
        out = []
        for n, mpath in derived_store.listing():
            try:
                man = derived_store.load(mpath)
                base = derived_store.base_path(man)
                mtime = os.stat(mpath).st_mtime
            except (derived_store.DerivedError, OSError):
                continue
            out.append(OllamaModel(n.display(), self._resident_for(str(base)), str(base),
                                   parameters=dict(man.get("parameters") or {}), system=man.get("system"),
                                   template=man.get("template"), messages=list(man.get("messages") or []),
                                   license=list(man.get("license") or []), parent=man["base"].get("model", ""),
                                   derived=True, modified=mtime))
        return out

    def models(self) -> list[OllamaModel]:
        """Every model a client can name (the derived ones, then the registry's they do not shadow)."""
        mine = self._derived_models()
        keys = {names.parse(m.name).key() for m in mine}
        return mine + [m for m in self._base_models() if names.parse(m.name).key() not in keys]

    def find(self, name: str) -> OllamaModel | None:
        n = names.parse(name) if isinstance(name, str) else None
        if n is None or not n.valid:
            return None
        key = n.key()
        for m in self.models():
            if names.parse(m.name).key() == key:
                return m
        # an alias of a residency entry (the lower-case stem, the base name without its weight type, ...)
        for r in list(self.residency.models.values()):
            for a in r.aliases:
                an = names.parse(a)
                if an.valid and an.key() == key:
                    return next((m for m in self._base_models() if m.resident == r.name), None)
        return None


# --- what /api/tags, /api/ps and /api/show read from the file -------------------------------------------------

_HEADERS: dict = {}


def header(path: str):
    """The GGUF header of a file (bankml.models.gguf), cached by (realpath, size, mtime)."""
    from ...models import gguf
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    h = _HEADERS.get(key)
    if h is None:
        h = _HEADERS[key] = gguf.read_header_file(path)
    return h


def human_number(b: int) -> str:
    """format.HumanNumber (format/format.go, v0.13.3)."""
    if b >= 10**9:
        x = b / 10**9
        return f"{x:.0f}B" if x == int(x) else f"{x:.1f}B"
    if b >= 10**6:
        x = b / 10**6
        return f"{x:.0f}M" if x == int(x) else f"{x:.2f}M"
    if b >= 10**3:
        return f"{b / 10**3:.0f}K"
    return str(b)


#: fs/ggml/type.go: FileType.String (v0.13.3); others are "unknown"
_FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 4: "MXFP4", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
               11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M",
               18: "Q6_K", 21: "Q2_K_S", 32: "BF16"}


def parameter_count(h) -> int:
    """fs/ggml/gguf.go: general.parameter_count is patched to the sum of the tensors' elements."""
    total = 0
    for t in h.tensors.values():
        n = 1
        for d in t.shape:
            n *= int(d)
        total += n
    return total


def details(path: str, parent: str = "") -> dict:
    """ModelDetails of a GGUF file as create.go records them in the config (createModel)."""
    h = header(path)
    arch = h.get("general.architecture")
    arch = arch if isinstance(arch, str) else "unknown"   # KV.Architecture's default
    ft = h.get("general.file_type")
    # KV.FileType: general.file_type when it is above 0 (an F32 file's 0 reads as unknown)
    quant = _FILE_TYPES.get(ft, "unknown") if isinstance(ft, int) and ft > 0 else "unknown"
    return {"parent_model": parent, "format": "gguf", "family": arch, "families": [arch],
            "parameter_size": human_number(parameter_count(h)), "quantization_level": quant}


def size(m: OllamaModel) -> int:
    """The bytes of the file (and of the manifest, for a derived model: Manifest.Size sums its layers)."""
    n = os.path.getsize(m.path)
    if m.derived:
        found = derived_store.find(m.name)
        if found is not None:
            n += os.path.getsize(found[1])
    return n


def digest(m: OllamaModel) -> str:
    """A derived model: the sha256 of its manifest (as Ollama's). A registry model has no manifest: the sha256
    of "<the pin's sha256 of its file>:<bytes>" (of "<path>:<bytes>:<mtime ns>" when no pin names it)."""
    import hashlib
    if m.derived:
        found = derived_store.find(m.name)
        if found is not None:
            return derived_store.digest_of(found[1])
    from ...models import verify
    st = os.stat(m.path)
    seed = f"{os.path.realpath(m.path)}:{st.st_size}:{st.st_mtime_ns}"
    pin = verify.find_pin(m.path)
    if pin is not None:
        try:
            files = verify.load_pin(pin)["files"]
            mine = next((e for e in files if os.path.basename(e["path"]) == os.path.basename(m.path)), None)
            if mine is not None and mine["bytes"] == st.st_size:
                seed = f"{mine['sha256']}:{st.st_size}"
        except verify.PinMismatch:
            pass
    return hashlib.sha256(seed.encode()).hexdigest()
