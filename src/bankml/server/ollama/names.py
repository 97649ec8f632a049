"""Ollama's model names (types/model/name.go at v0.13.3): `[host/][namespace/]model[:tag]`, the defaults
registry.ollama.ai / library / latest, each part's characters and length, the shortest display, and matching
without regard to case.

    n = parse("SmolLM2:latest")       # a Name, its missing parts filled with the defaults (ParseName)
    n.valid                           # IsValid (every part present and well formed)
    n.display()                       # DisplayShortest: "smollm2:latest", "ns/model:tag", "host/ns/model:tag"
    n.key()                           # what two names that match without regard to case share
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
MISSING = "!MISSING!"

_HOST, _NAMESPACE, _MODEL, _TAG = range(4)


def _alnum_(c: str) -> bool:
    return c == "_" or ("0" <= c <= "9") or ("A" <= c <= "Z") or ("a" <= c <= "z")


def _valid_part(kind: int, s: str) -> bool:
    # isValidPart: Go ranges over the string's bytes' positions and reads bytes, so any non-ASCII byte fails
    b = s.encode("utf-8")
    if not 1 <= len(b) <= (350 if kind == _HOST else 80):
        return False
    for i, byte in enumerate(b):
        c = chr(byte)
        if i == 0:
            if not _alnum_(c):
                return False
        elif c in "_-":
            continue
        elif c == ".":
            if kind == _NAMESPACE:
                return False
        elif c == ":":
            if kind != _HOST:
                return False
        elif not _alnum_(c):
            return False
    return True


def _cut_promised(s: str, sep: str):
    i = s.rfind(sep)
    if i < 0:
        return s, "", False
    return (s[:i] or MISSING), (s[i + len(sep):] or MISSING), True


@dataclass(frozen=True)
class Name:
    host: str = ""
    namespace: str = ""
    model: str = ""
    tag: str = ""

    @property
    def valid(self) -> bool:
        return all(_valid_part(k, p) for k, p in enumerate((self.host, self.namespace, self.model, self.tag)))

    def display(self) -> str:
        """DisplayShortest."""
        if self.host.lower() != DEFAULT_HOST:
            head = f"{self.host}/{self.namespace}/"
        elif self.namespace.lower() != DEFAULT_NAMESPACE:
            head = f"{self.namespace}/"
        else:
            head = ""
        return f"{head}{self.model}:{self.tag}"

    def __str__(self) -> str:
        out = ""
        if self.host:
            out += self.host + "/"
        if self.namespace:
            out += self.namespace + "/"
        out += self.model
        if self.tag:
            out += ":" + self.tag
        return out

    def key(self) -> tuple:
        """EqualFold's key: names equal without regard to case share it."""
        return (self.host.lower(), self.namespace.lower(), self.model.lower(), self.tag.lower())

    def filepath_parts(self) -> tuple:
        """Filepath's parts (host, namespace, model, tag); only for a valid name."""
        if not self.valid:
            raise ValueError(f"invalid model name {self}")
        return (self.host, self.namespace, self.model, self.tag)


def parse_bare(s: str) -> Name:
    """ParseNameBare: the parts a name spells, none filled in."""
    host = namespace = model = tag = ""
    if s.rfind(":") > s.rfind("/"):
        s, tag, _ = _cut_promised(s, ":")
    s, model, promised = _cut_promised(s, "/")
    if not promised:
        return Name("", "", s, tag)
    s, namespace, promised = _cut_promised(s, "/")
    if not promised:
        return Name("", s, model, tag)
    scheme, sep, rest = s.partition("://")
    host = rest if sep else scheme
    return Name(host, namespace, model, tag)


def parse(s: str) -> Name:
    """ParseName: ParseNameBare with the default host, namespace and tag filled in."""
    n = parse_bare(s)
    return Name(n.host or DEFAULT_HOST, n.namespace or DEFAULT_NAMESPACE, n.model, n.tag or DEFAULT_TAG)


def is_valid(s: str) -> bool:
    return parse(s).valid
