"""Derived models: what `ollama create` / `bankml create` makes, kept in the models directory as a small manifest
layered on a pinned file (never a copy of the weights), and the blobs POST /api/blobs uploads.

    <models>/ollama/manifests/<host>/<namespace>/<model>/<tag>    one JSON manifest a model (Ollama's name parts)
    <models>/ollama/blobs/sha256-<64 hex>                          uploaded blobs (the registry lists none of them)

A manifest: {"bankml_derived": 1, "base": {"path": <relative to the models directory>, "sha256", "bytes",
"model": <parent model's name>}, "parameters": {...}, "system", "template", "messages": [...], "license": [...]}.
The base file lies inside the models directory: a registry model's file, an uploaded blob, or a pinned file from
elsewhere hard-linked into blobs/ under its sha256 (a link, not a copy; across file systems it is refused).
Every write goes to a temporary name in the same folder and is renamed over; every path is checked to stay in the
models directory; removing a manifest never removes the file under it (nor a blob).

Names are matched as Ollama matches them (without regard to case: bankml.server.ollama.names, which is plain
text handling). Must not know HTTP, the residency or the engine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

from ..errors import BankmlError
from ..files import write_atomically
from ..server.ollama import names as onames
from . import verify

FORMAT = 1
DIGEST = re.compile(r"^sha256[:-][0-9a-fA-F]{64}$")    # server/modelpath.go:127 (v0.13.3)


class DerivedError(BankmlError):
    """A derived model bankml cannot make or read (the message says why)."""


def models_dir() -> Path:
    from .pull import models_dir as md
    return md()


def store(root: str | os.PathLike | None = None) -> Path:
    return Path(root) if root is not None else models_dir() / "ollama"


def _inside(path: Path, root: Path) -> bool:
    real_root = os.path.realpath(root)
    real = os.path.realpath(path.parent)
    return os.path.commonpath([real, real_root]) == real_root and path.name not in ("", ".", "..")


def _atomic_write(path: Path, data: bytes, top: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not _inside(path, top):
        raise DerivedError(f"{path} would lie outside {top}")
    write_atomically(path, data, prefix="." + path.name + ".")


# --- manifests ------------------------------------------------------------------------------------------------

def _manifest_dir(root: Path) -> Path:
    return root / "manifests"


def manifest_path(name: onames.Name, root: Path) -> Path:
    parts = name.filepath_parts()
    p = _manifest_dir(root).joinpath(*parts)
    if not _inside(p, root):
        raise DerivedError(f"invalid model name {name}")
    return p


def listing(root: str | os.PathLike | None = None) -> list[tuple[onames.Name, Path]]:
    """Every manifest: (its name, its path), by path."""
    root = store(root)
    top = _manifest_dir(root)
    out = []
    if not top.is_dir():
        return out
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        rel = Path(dirpath).relative_to(top).parts
        if len(rel) != 3:
            continue
        for f in sorted(filenames):
            if f.startswith("."):
                continue
            n = onames.Name(rel[0], rel[1], rel[2], f)
            if n.valid:
                out.append((n, Path(dirpath) / f))
    return out


def find(name: str, root: str | os.PathLike | None = None) -> tuple[onames.Name, Path] | None:
    """The manifest this name names (without regard to case), or None."""
    n = onames.parse(name)
    if not n.valid:
        return None
    key = n.key()
    return next(((m, p) for m, p in listing(root) if m.key() == key), None)


def load(path: str | os.PathLike) -> dict:
    """A manifest; DerivedError when it does not read as one."""
    try:
        with open(path, "rb") as f:
            m = json.loads(f.read())
    except (OSError, ValueError) as e:
        raise DerivedError(f"{path}: not a derived model's manifest: {e}") from None
    if not isinstance(m, dict) or m.get("bankml_derived") != FORMAT or not isinstance(m.get("base"), dict):
        raise DerivedError(f"{path}: not a derived model's manifest")
    return m


def base_path(manifest: dict, root: str | os.PathLike | None = None) -> Path:
    """The file a manifest is layered on (inside the models directory)."""
    top = store(root).parent
    p = top / manifest["base"]["path"]
    if not _inside(p, top):
        raise DerivedError(f"{manifest['base']['path']} lies outside the models directory")
    return p


def write(name: str, manifest: dict, root: str | os.PathLike | None = None) -> Path:
    """Write (or replace) the manifest of `name`; an existing manifest of the same name in another case is the
    one replaced (Ollama's getExistingName)."""
    root = store(root)
    n = onames.parse(name)
    if not n.valid:
        raise DerivedError("invalid model name")
    old = find(name, root)
    path = old[1] if old else manifest_path(n, root)
    data = json.dumps(dict(manifest, bankml_derived=FORMAT), indent=1, sort_keys=True).encode() + b"\n"
    _atomic_write(path, data, root)
    return path


def remove(name: str, root: str | os.PathLike | None = None) -> Path | None:
    """Delete the manifest of `name` (never its base file); empty folders above it go too. None: no such model."""
    root = store(root)
    found = find(name, root)
    if found is None:
        return None
    path = found[1]
    if not _inside(path, root):
        raise DerivedError(f"{path} lies outside {root}")
    path.unlink()
    d = path.parent
    top = os.path.realpath(_manifest_dir(root))
    while os.path.realpath(d) != top and os.path.commonpath([os.path.realpath(d), top]) == top:
        try:
            d.rmdir()
        except OSError:
            break
        d = d.parent
    return path


def copy(src: str, dst: str, root: str | os.PathLike | None = None) -> Path:
    """CopyModel: the manifest again under another name (the same base file)."""
    root = store(root)
    found = find(src, root)
    if found is None:
        raise FileNotFoundError(src)
    if onames.parse(dst).key() == found[0].key():
        return found[1]
    return write(dst, load(found[1]), root)


def digest_of(path: str | os.PathLike) -> str:
    """An Ollama digest (hex, as /api/tags prints it): the sha256 of the manifest's bytes (manifest.go)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


# --- blobs ----------------------------------------------------------------------------------------------------

def blob_path(digest: str, root: str | os.PathLike | None = None) -> Path:
    """GetBlobsPath: `sha256:<hex>` or `sha256-<hex>` -> blobs/sha256-<hex>; ValueError("invalid digest format")."""
    if not isinstance(digest, str) or not DIGEST.match(digest):
        raise ValueError("invalid digest format")
    return store(root) / "blobs" / digest.replace(":", "-")


def blob_temp(root: str | os.PathLike | None = None):
    """(file object, its path): a temporary file in blobs/ for an upload."""
    d = store(root) / "blobs"
    d.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".sha256-", suffix=".tmp", dir=d)
    return os.fdopen(fd, "wb"), Path(tmp)


def finish_blob(tmp: Path, sha256_hex: str, root: str | os.PathLike | None = None) -> Path:
    """Rename an upload to its digest's name."""
    final = blob_path("sha256:" + sha256_hex, root)
    os.chmod(tmp, 0o644)
    os.replace(tmp, final)
    return final


def pinned_blob(digest: str, root: str | os.PathLike | None = None) -> Path:
    """The blob of this digest when its content is pinned (a pin in the blobs folder, a forks directory or
    shipped with bankml lists its sha256 and size); DerivedError with the reason and the `bankml pin` command."""
    p = blob_path(digest, root)
    if not p.is_file():
        raise DerivedError(f"blob {digest!r} not found (upload it with POST /api/blobs/{digest})")
    sha = digest[7:].lower()
    size = p.stat().st_size
    if verify.find_pin_by_sha256(sha, size, verify.content_pin_dirs(p)) is None:
        raise DerivedError(f"the blob {digest} is not a pinned file: bankml serves only files whose sha256 a pin "
                           f"lists; `{verify.pin_command(p)}` pins it (--package, --package-version and --how "
                           "record where it came from)")
    return p


def base_for_file(path: str | os.PathLike, parent: str = "", root: str | os.PathLike | None = None) -> dict:
    """A manifest's "base" for a pinned file: verified (guard and pin; raises verify's errors with their reasons),
    and inside the models directory (a file elsewhere is hard-linked into blobs/ under its sha256)."""
    root = store(root)
    top = root.parent
    report = verify.verify(path)
    p = Path(os.path.abspath(path))
    if not _inside(p, top):
        link = blob_path("sha256:" + report.sha256, root)
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.exists():
            try:
                os.link(p, link)
            except OSError as e:
                raise DerivedError(f"{p} lies outside the models directory {top} and cannot be hard-linked into "
                                   f"it ({e.strerror or e}); move it into {top} (bankml never copies weights)") \
                    from None
        p = link
    rel = os.path.relpath(os.path.realpath(p.parent), os.path.realpath(top))
    return {"path": str(Path(rel) / p.name) if rel != "." else p.name, "sha256": report.sha256,
            "bytes": report.bytes, "model": parent}
