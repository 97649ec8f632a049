"""The registry: which models bankml may serve, under which names, and the identity cache of verified files.

Owns:
- naming the models of a models directory as llama-server b11192's router does with `--models-dir` (common/
  preset.cpp, load_from_models_dir): a `.gguf` file directly in the directory is the model named by its file
  name without ".gguf"; a sub-folder is the model named by the folder, whose file is its "-00001-of-" shard if
  it has one, else its `.gguf` that is neither a projector (a name with "mmproj") nor a draft ("mtp-",
  "dspark-", "dflash-" prefixes); projector and draft files directly in the directory are no models;
- the aliases a name also resolves by (lower case, ":latest", the file name, the base name without its weight
  type when it is unambiguous), and files named only by a pin (`NAME.gguf.FORK.json`) in a models or forks
  directory;
- `Verified`, the identity cache: a file verified once (guard, then pin) is not hashed again while its
  (device, inode, size, mtime) and its pin's stay the same.
Must not know: the engine, HTTP, or where models come from (bankml.models.pull fills the directory).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from . import verify
from ._progress import ProgressArg
from ..errors import BankmlError

SOURCE_MODELS_DIR, SOURCE_PIN = "models_dir", "pin"

#: llama_ftype (include/llama.h) -> the weight type's short name, as `bankml list` shows it (general.file_type)
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
              11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M",
              18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S",
              25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M",
              32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0"}

_DRAFT_PREFIXES = ("mtp-", "dspark-", "dflash-")
_FIRST_SHARD = "-00001-of-"
#: a weight type at the end of a model name: "-q4_1", "-Q4_K_M", ".f16", "-bf16", "-iq4_xs", "-mxfp4_moe"
_WEIGHT_SUFFIX = re.compile(r"[-._](?:f32|f16|bf16|q\d(?:_[0-9a-z]+)*|iq\d(?:_[0-9a-z]+)*|tq\d_\d|mxfp4(?:_moe)?"
                            r"|nvfp4)\Z", re.IGNORECASE)
#: working folders in a models directory that hold no model of their own: `derived/` keeps the test suite's
#: conversions (tests/test_engine_oracle.py); llama-server would list it as a model named "derived"
_WORK_DIRS = frozenset({"derived"})
#: partial downloads and temporary files (besides hidden names, which are all skipped)
_TEMP_SUFFIXES = (".tmp", ".part", ".partial", ".download", ".crdownload", ".incomplete")


class RegistryError(BankmlError):
    """A name the registry cannot act on: unknown, ambiguous, or not in a models directory."""


@dataclass(frozen=True)
class Entry:
    """A model the registry can serve.

    `name` is llama-server's router name; `path` the model file; `aliases` the other names that resolve to it;
    `size` the model file's bytes; `source` "models_dir" (a .gguf found by the scan) or "pin" (a file a pin names
    that the scan does not find); `pin` the pin that names this file by its name, or None (a pin may still match
    it by sha256 at verify time); `root` the models directory it was found in."""

    name: str
    path: Path
    aliases: tuple[str, ...]
    size: int
    source: str
    pin: Path | None
    root: Path | None = None


def identity(path: str | os.PathLike) -> tuple:
    """(st_dev, st_ino, st_size, st_mtime_ns) of a file (following links): what says it is still the same file."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def is_safe_name(name: str) -> bool:
    """A name the registry may look up: not empty, no path separator, no NUL, not "." or ".."."""
    return (bool(name) and "/" not in name and os.sep not in name and (os.altsep or "/") not in name
            and "\0" not in name and name not in (".", ".."))


def _skipped(name: str) -> bool:
    return name.startswith(".") or name.lower().endswith(_TEMP_SUFFIXES)


def _is_companion(fname: str) -> bool:
    return "mmproj" in fname or fname.startswith(_DRAFT_PREFIXES)


def _subdir_model(d: Path) -> Path | None:
    """The model file of a sub-folder, as preset.cpp's scan_subdir picks it: the first shard, else a .gguf that
    is not a projector or a draft (the first by name: llama.cpp takes whichever its directory listing gives last)."""
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return None
    shard = model = None
    for n in names:
        if _skipped(n) or not n.endswith(".gguf") or _is_companion(n) or not (d / n).is_file():
            continue
        if _FIRST_SHARD in n:
            shard = shard or n
        else:
            model = model or n
    pick = shard or model
    return d / pick if pick else None


def weight_base(name: str) -> str | None:
    """The name without its weight-type suffix ("smollm2-135m-instruct" for "smollm2-135m-instruct-q4_1"), or
    None when it has none."""
    m = _WEIGHT_SUFFIX.search(name)
    return name[: m.start()] if m and m.start() > 0 else None


class Registry:
    """The models in the models directories (default: `pull.models_dir()`, i.e. $BANKML_MODELS) and the files
    their pins and the forks directories' pins name (default forks: `verify.forks_dirs()`). Every call rescans
    the directories (a listdir and a stat per file, never a read of a model); `reload()` does the same and keeps
    the result."""

    def __init__(self, models_dirs=None, forks_dirs=None):
        self._models_dirs = None if models_dirs is None else [Path(d) for d in models_dirs]
        self._forks_dirs = None if forks_dirs is None else [Path(d) for d in forks_dirs]
        self._entries: list[Entry] = []

    @property
    def models_dirs(self) -> list[Path]:
        if self._models_dirs is not None:
            return list(self._models_dirs)
        from .pull import models_dir

        return [models_dir()]

    @property
    def forks_dirs(self) -> list[Path]:
        return list(self._forks_dirs) if self._forks_dirs is not None else verify.forks_dirs()

    # --- scanning ---

    def _pin_by_name(self, path: Path, forks: list[Path]) -> Path | None:
        beside = verify.pin_path_beside(path)
        if beside.is_file():
            return beside
        for d in forks:
            p = d / (path.name + verify.PIN_SUFFIX)
            if p.is_file():
                return p
        return None

    def _scan(self) -> list[tuple[str, Path, str, Path | None, Path]]:
        """(name, path, source, pin, root) of every model, before aliases."""
        forks = self.forks_dirs
        found: list[tuple[str, Path, str, Path | None, Path]] = []
        seen: set[str] = set()
        for root in self.models_dirs:
            try:
                names = sorted(os.listdir(root))
            except OSError:
                continue
            for n in names:
                if _skipped(n):
                    continue
                p = root / n
                if p.is_dir():
                    model = None if n in _WORK_DIRS else _subdir_model(p)
                    if model is None:
                        continue
                    name = n
                elif n.endswith(".gguf") and p.is_file() and not _is_companion(n):
                    model, name = p, n.replace(".gguf", "")  # preset.cpp replaces every ".gguf" in the name
                else:
                    continue
                if not name:
                    continue
                found.append((name, model, SOURCE_MODELS_DIR, self._pin_by_name(model, forks), root))
                seen.add(os.path.abspath(model))
        # files a pin names that the scan did not find: a pin in a models directory names files there; a pin in
        # a forks directory names files in each models directory
        for root in self.models_dirs:
            if not root.is_dir():
                continue
            for pin_path in verify.pin_files([root] + forks):
                model = self._pinned_file(pin_path, root)
                if model is None or os.path.abspath(model) in seen:
                    continue
                name = pin_path.name[: -len(verify.PIN_SUFFIX)].replace(".gguf", "")
                if not name or not is_safe_name(name):
                    continue
                found.append((name, model, SOURCE_PIN, pin_path, root))
                seen.add(os.path.abspath(model))
        return found

    @staticmethod
    def _pinned_file(pin_path: Path, root: Path) -> Path | None:
        """The model file a pin names inside `root`: its entry of the pin's own name, else its first; None when
        that file does not exist, is hidden or temporary, or would lie outside `root`."""
        try:
            pin = verify.load_pin(pin_path)
        except verify.PinMismatch:
            return None
        own = pin_path.name[: -len(verify.PIN_SUFFIX)]
        entry = next((e for e in pin["files"] if os.path.basename(e["path"]) == own), pin["files"][0])
        rel = Path(entry["path"])
        if any(_skipped(part) for part in rel.parts):
            return None
        model = root / rel
        return model if _inside(model, root) and model.is_file() else None

    def reload(self) -> None:
        """Scan the directories again and keep the result."""
        found = self._scan()
        # the base name (without the weight type) is an alias only where exactly one model has it
        bases: dict[str, int] = {}
        for name, *_ in found:
            for b in {weight_base(name), (weight_base(name) or "").lower()} - {None, ""}:
                bases[b] = bases.get(b, 0) + 1
        entries = []
        for name, path, source, pin, root in found:
            aliases = [name.lower(), f"{name}:latest", f"{name.lower()}:latest", path.name]
            base = weight_base(name)
            if base:
                aliases += [b for b in (base, base.lower()) if bases.get(b) == 1]
            aliases = tuple(dict.fromkeys(a for a in aliases if a != name))
            try:
                size = path.stat().st_size
            except OSError:
                continue  # gone between the listing and now
            entries.append(Entry(name, path, aliases, size, source, pin, root))
        entries.sort(key=lambda e: (e.name, str(e.path)))
        self._entries = entries

    def entries(self) -> list[Entry]:
        """Every model, sorted by name (the directories are scanned again)."""
        self.reload()
        return list(self._entries)

    def matches(self, name: str) -> list[Entry]:
        """The entries `name` names: those of that exact name if any, else those with it as an alias. Empty for an
        unknown name or one with a path separator or "..". More than one: the name is ambiguous."""
        if not is_safe_name(name):
            return []
        entries = self.entries()
        exact = [e for e in entries if e.name == name]
        return exact or [e for e in entries if name in e.aliases]

    def resolve(self, name: str) -> Entry | None:
        """The entry of this name (exact name first, then aliases); None when unknown or ambiguous."""
        m = self.matches(name)
        return m[0] if len(m) == 1 else None


# --- the identity cache ---------------------------------------------------------------------------------------

def _pin_identity(pin_path: str) -> tuple | None:
    try:
        return identity(pin_path)
    except OSError:
        return None


class Verified:
    """The identity cache of verified files: `check(path)` runs `verify.verify` (the guard, then the pin: the file
    is hashed) the first time, and returns the same report, without reading the file, while the file's identity
    (device, inode, size, mtime) and its pin's stay the same. A changed identity verifies it again in full.
    Safe to share between threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self._known: dict[str, tuple[tuple, tuple | None, verify.VerifyReport]] = {}

    @staticmethod
    def _key(path) -> str:
        return os.path.realpath(os.fspath(path))

    def check(self, path: str | os.PathLike, progress: ProgressArg = None) -> verify.VerifyReport:
        """The file's VerifyReport; raises like `verify.verify` (ModelRefused, PinMismatch, OSError)."""
        key = self._key(path)
        before = identity(path)
        with self._lock:
            known = self._known.get(key)
        if known is not None and known[0] == before and known[1] == _pin_identity(known[2].pin_path):
            return known[2]
        with self._lock:
            self._known.pop(key, None)
        report = verify.verify(path, progress)
        after = identity(path)
        if after == before:  # a file that changed while it was hashed is not remembered
            with self._lock:
                self._known[key] = (after, _pin_identity(report.pin_path), report)
        return report

    def same(self, path: str | os.PathLike, report: verify.VerifyReport) -> bool:
        """Is the file still the one `report` verified (this cache's report of it, identity unchanged)?"""
        with self._lock:
            known = self._known.get(self._key(path))
        if known is None or known[2] is not report:
            return False
        try:
            return identity(path) == known[0] and _pin_identity(report.pin_path) == known[1]
        except OSError:
            return False

    def forget(self, path: str | os.PathLike | None = None) -> None:
        """Drop one file's report (or all of them)."""
        with self._lock:
            if path is None:
                self._known.clear()
            else:
                self._known.pop(self._key(path), None)


# --- what `bankml list` and `bankml rm` do ------------------------------------------------------------------

def file_type(header) -> str | None:
    """The weight type of a file: general.file_type's name (Q4_1, Q4_K_M, ...), else the most common type of its
    matrices; None when neither says."""
    ft = header.get("general.file_type")
    if isinstance(ft, int) and ft in FILE_TYPES:
        return FILE_TYPES[ft]
    if isinstance(ft, int):
        return f"ftype {ft}"
    mats = [t.type.name for t in header.tensors.values() if len(t.shape) >= 2]
    return max(set(mats), key=mats.count) if mats else None


def pinned_state(entry: Entry) -> str:
    """Without hashing: "yes" (a pin of its name lists its size), "mismatch" (it lists another size), "invalid"
    (the pin does not read), "by-content?" (no pin has its name, a single-file pin lists its size: the sha256
    decides at load), "no"."""
    if entry.pin is not None:
        try:
            pin = verify.load_pin(entry.pin)
        except verify.PinMismatch:
            return "invalid"
        mine = [e for e in pin["files"] if os.path.basename(e["path"]) == entry.path.name]
        if not mine and entry.source == SOURCE_PIN:
            mine = pin["files"][:1]
        return "yes" if mine and mine[0]["bytes"] == entry.size else "mismatch"
    return "by-content?" if verify.single_file_pins(entry.size, verify.content_pin_dirs(entry.path)) else "no"


def describe(reg: Registry) -> list[dict]:
    """One dict a model, for `bankml list`: name, path, aliases, size, type, pinned, pin, source, status (playable,
    or the guard's first reason), verdict. Reads each file's header only."""
    out = []
    for e in reg.entries():
        try:
            g = verify.guard(e.path)
        except OSError as err:
            verdict, status, ftype = "unreadable", f"cannot read: {err.strerror or err}", None
        else:
            verdict = g.verdict
            status = "playable" if g.verdict == verify.PLAY else g.reasons[0]
            ftype = file_type(g.header) if g.header is not None else None
        out.append({"name": e.name, "path": str(e.path), "aliases": list(e.aliases), "size": e.size,
                    "type": ftype, "pinned": pinned_state(e), "pin": str(e.pin) if e.pin else None,
                    "source": e.source, "verdict": verdict, "status": status})
    return out


def _inside(path: Path, root: Path) -> bool:
    """Does `path` (its directory resolved, the name itself not followed) lie in `root`?"""
    real_root = os.path.realpath(root)
    parent = os.path.realpath(path.parent)
    return os.path.commonpath([parent, real_root]) == real_root and path.name not in ("", ".", "..")


def removable(reg: Registry, name: str) -> Entry:
    """The entry `bankml rm NAME` removes; RegistryError when the name is not one model of a models directory."""
    if not is_safe_name(name):
        raise RegistryError(f"{name!r} is not a model name (no path separators or '..')")
    m = reg.matches(name)
    if not m:
        raise RegistryError(f"model {name!r} not found (`bankml list` lists them)")
    if len(m) > 1:
        raise RegistryError(f"{name!r} is ambiguous: it names " + ", ".join(f"{e.name} ({e.path})" for e in m))
    entry = m[0]
    if entry.root is None or not _inside(entry.path, entry.root):
        raise RegistryError(f"{entry.path} is not in a models directory; not removing it")
    return entry


def _files_of(entry: Entry) -> list[Path]:
    """The model's own files: the file, or, for a sharded model, every shard of its set."""
    m = re.search(r"-00001-of-(\d{5})\.gguf\Z", entry.path.name)
    if not m:
        return [entry.path]
    stem = entry.path.name[: m.start()]
    return [entry.path.with_name(f"{stem}-{i:05d}-of-{m.group(1)}.gguf") for i in range(1, int(m.group(1)) + 1)]


def _lists_only(pin_path: Path, fname: str) -> bool:
    try:
        files = verify.load_pin(pin_path)["files"]
    except verify.PinMismatch:
        return False
    return [os.path.basename(e["path"]) for e in files] == [fname]


def remove(entry: Entry) -> list[Path]:
    """Delete a model from its models directory: its file (a link itself, never what it points to; every shard of
    a sharded model) and the pin beside each; a sub-folder left empty goes too. Pins in forks directories and
    the shipped ones stay. Returns what was deleted."""
    if entry.root is None or not _inside(entry.path, entry.root):
        raise RegistryError(f"{entry.path} is not in a models directory; not removing it")
    gone = []
    for f in _files_of(entry):
        for p in (f, verify.pin_path_beside(f)):
            if (p.is_file() or p.is_symlink()) and _inside(p, entry.root):
                p.unlink()
                gone.append(p)
    pin = entry.pin
    if (pin is not None and pin not in gone and pin.is_file() and pin.parent == entry.path.parent
            and _inside(pin, entry.root) and _lists_only(pin, entry.path.name)):
        pin.unlink()  # a pin of another name beside the file, naming only it
        gone.append(pin)
    parent = entry.path.parent
    if os.path.realpath(parent) != os.path.realpath(entry.root):
        try:
            parent.rmdir()  # only when empty
        except OSError:
            pass
    return gone
