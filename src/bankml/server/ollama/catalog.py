"""The models an Ollama client sees, by Ollama's names: every model the residency may serve (the registry's, or
the router's models directory) under its Ollama name, and the derived models (bankml.models.derived: a small
manifest layered on a pinned file) over them.

    cat = Catalog(residency)
    m = cat.find("SmolLM2-135M-Instruct-Q4_1")    # an OllamaModel, or None (unknown or invalid name)
    m.resident                                    # the residency name whose lease holds its weights
    m.parameters, m.system, m.template, m.messages, m.license   # what a Modelfile stored ({} / None / [])
    cat.models()                                  # every model, for /api/tags

Names match as Ollama matches them (names.parse(...).key(): without regard to case, `:latest` implied).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from . import names


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

    def _base_models(self) -> list[OllamaModel]:
        out = []
        for r in list(self.residency.models.values()):
            n = names.parse(r.name)
            if not n.valid:
                # a -m FILE model is named by its path: its Ollama name is the file's stem
                stem = os.path.basename(r.path)
                n = names.parse(stem[:-5] if stem.lower().endswith(".gguf") else stem)
                if not n.valid:
                    continue
            try:
                mtime = os.stat(r.path).st_mtime
            except OSError:
                mtime = 0.0
            out.append(OllamaModel(n.display(), r.name, r.path, modified=mtime))
        return out

    def models(self) -> list[OllamaModel]:
        """Every model a client can name (the registry's, then the derived ones)."""
        return self._base_models()

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
