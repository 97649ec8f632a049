"""The layout's rules, read from the source (docs/architecture.md): bankml's modules import one another without a
circle, counting imports deferred inside functions; only bankml.engine touches the engine's compiled objects."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def _modules() -> dict[str, Path]:
    mods = {}
    for p in sorted((SRC / "bankml").rglob("*")):
        if p.suffix not in (".py", ".pyx"):
            continue
        name = ".".join(p.relative_to(SRC).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = p
    return mods


def _python_source(p: Path) -> str:
    text = p.read_text()
    if p.suffix == ".pyx":      # Cython: only its Python-level import statements
        text = "\n".join(line.strip() for line in text.splitlines()
                         if line.strip().startswith(("import ", "from ")) and " cimport " not in line)
    return text


def _imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The bankml modules `name` imports anywhere in its text (module level or inside functions), each as the
    deepest module the statement names: `from .x import y` is x, or x.y when y is a module."""
    out = set()
    is_pkg = path.name.startswith("__init__.")
    for node in ast.walk(ast.parse(_python_source(path))):
        named = []
        if isinstance(node, ast.Import):
            named = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = name.split(".") if is_pkg else name.split(".")[:-1]
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
            named = subs + ([base] if len(subs) < len(node.names) else [])
        for n in named:
            while n and n not in mods:
                n = n.rpartition(".")[0]
            if n.startswith("bankml") and n != name:
                out.add(n)
    return out


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    mods = _modules()
    edges = {m: _imports(m, p, mods) for m, p in mods.items()}
    assert sum(len(e) for e in edges.values()) > 150          # the reader sees the imports at all
    assert "bankml.models.gguf" in edges["bankml.engine.model"]
    assert _cycles(edges) == []


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_compiled_engine_objects_stay_in_the_engine():
    # `x._c` is an engine object's compiled half (KVCache._c, ...): only bankml.engine may reach into it
    offenders = []
    for p in sorted((SRC / "bankml").rglob("*.py")):
        if "engine" in p.relative_to(SRC / "bankml").parts[:1]:
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if re.search(r"\w\._c\b", line.split("#")[0]):
                offenders.append(f"{p.relative_to(SRC)}:{i}")
    assert offenders == []
