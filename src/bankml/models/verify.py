"""The guard and the pin: may bankml run this GGUF file, and is it the file we think it is?

Owns:
- the guard, `guard(path) -> GuardReport`: from the header alone, play / refuse / need_more, with every reason
  (malformed header, what llama.cpp itself would refuse, and what bankml's engine cannot run yet: the
  architecture's description in `bankml.models.arch`, its keys, tensors and graph checks, and the weight types
  and tokenizers of `bankml.models.capabilities`);
- pins, `NAME.gguf.FORK.json`: the bytes and sha256 of a model's files and where they came from, found beside the
  model or in a forks directory (`$BANKML_FORKS`, then the pins shipped with bankml in `bankml/models/forks/`);
  a file no pin names is found by content: a single-file pin listing its size and sha256 (a renamed copy);
- `verify(path)`: the guard, then the pin; every load runs it.
Must not know: how a model runs (bankml.engine) or where models come from (bankml.models.pull).
Mirrors: ggml/src/gguf.cpp (data layout) and src/llama-model-loader.cpp (key types, tensor set) of b11192.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import shlex
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import arch
from . import capabilities as caps
from ._progress import Progress, ProgressArg
from ..errors import GGUFError, GGUFTruncated, ModelRefused, PinMismatch
from .gguf import GGUFHeader, ValueType, check_data_fits, parse_header

PLAY, REFUSE, NEED_MORE = "play", "refuse", "need_more"
EXIT_CODES = {PLAY: 0, REFUSE: 2, NEED_MORE: 3}  # and 1: the file cannot be read at all
PIN_SUFFIX = ".FORK.json"
PIN_FORMAT = 1
SHIPPED_FORKS = Path(__file__).parent / "forks"


# --- the guard ------------------------------------------------------------------------------------------------

@dataclass
class GuardReport:
    """What the guard decided about one file, and why. `header` is None when it could not be parsed."""

    path: str
    verdict: str                     # PLAY, REFUSE or NEED_MORE
    reasons: list[str]               # empty exactly when the verdict is PLAY
    file_size: int
    header: GGUFHeader | None = field(default=None, repr=False)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def architecture(self) -> str | None:
        return self.header.architecture if self.header else None

    def tensor_types(self) -> dict[str, int]:
        """How many tensors of each ggml type the file holds."""
        if self.header is None:
            return {}
        return dict(Counter(t.type.name for t in self.header.tensors.values()).most_common())

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "verdict": self.verdict, "reasons": list(self.reasons),
                             "file_size": self.file_size}
        h = self.header
        if h is not None:
            d.update({"gguf_version": h.version, "architecture": h.architecture,
                      "name": h.get("general.name") if isinstance(h.get("general.name"), str) else None,
                      "tensor_count": len(h.tensors), "tensor_types": self.tensor_types(),
                      "tokenizer": {"model": _str(h, "tokenizer.ggml.model"),
                                    "pre": _str(h, "tokenizer.ggml.pre")},
                      "has_chat_template": "tokenizer.chat_template" in h.metadata})
        return d


def _str(h: GGUFHeader, key: str) -> str | None:
    v = h.get(key)
    return v if isinstance(v, str) else None


def guard(path: str | os.PathLike) -> GuardReport:
    """Read the header of `path` and decide. Raises OSError when the file cannot be read at all (missing, a
    directory, no permission); every other problem is a reason in the report."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            return GuardReport(path, NEED_MORE, ["the file is empty"], 0)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            try:
                header = parse_header(mm, size, check_data=False)
            except GGUFTruncated as e:
                return GuardReport(path, NEED_MORE, [f"truncated: {e}"], size)
            except GGUFError as e:
                return GuardReport(path, REFUSE, [f"malformed GGUF header: {e}"], size)
    truncated = None
    try:
        check_data_fits(header, size)
    except GGUFTruncated as e:
        truncated = f"truncated: {e}"
    reasons = check_header(header)
    if reasons:
        return GuardReport(path, REFUSE, reasons + ([truncated] if truncated else []), size, header)
    if truncated:
        return GuardReport(path, NEED_MORE, [truncated], size, header)
    return GuardReport(path, PLAY, [], size, header)


def check_header(h: GGUFHeader) -> list[str]:
    """Every reason bankml cannot run a file with this (well-formed) header; empty when it can."""
    reasons: list[str] = []
    reasons += _check_llama_cpp_rules(h)
    reasons += _check_model(h)
    reasons += _check_tokenizer(h)
    reasons += _check_template(h)
    return reasons


def gguf_cpp_refusals(h: GGUFHeader) -> list[str]:
    """What llama.cpp's gguf.cpp refuses in a header that bankml.models.gguf reads: arrays of arrays, and tensor data
    not laid out as gguf.cpp requires (each offset equal to the padded sizes of the tensors before it)."""
    reasons = []
    nested = [k for k, t in h.array_types.items() if t == ValueType.ARRAY]
    if nested:
        reasons.append(f"metadata {_names(nested)} {'is an array' if len(nested) == 1 else 'are arrays'} "
                       "of arrays, which llama.cpp refuses")
    expect = 0
    for ti in h.tensors.values():
        if ti.offset != expect:
            reasons.append(f"tensor {ti.name!r} data is at offset {ti.offset} of the data section, but llama.cpp "
                           f"requires {expect} (each tensor right after the previous one, in table order, padded "
                           f"to {h.alignment} bytes)")
            break
        expect += ti.nbytes + (-ti.nbytes) % h.alignment
    return reasons


def _check_llama_cpp_rules(h: GGUFHeader) -> list[str]:
    reasons = gguf_cpp_refusals(h)
    nul = [n for n in h.tensors if "\0" in n]
    if nul:
        reasons.append(f"tensor names with a NUL byte, which ggml cuts short: {_names(nul)}")
    return reasons


def _names(names: list[str], most: int = 4, quote: bool = True) -> str:
    shown = ", ".join(repr(n) if quote else n for n in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def _type_groups(tensors: list, why: str) -> str:
    """'27 tensors of type Q4_K (e.g. 'blk.0.attn_k.weight'), 9 tensors of type Q6_K (...)' + why."""
    by_type: dict[str, list[str]] = {}
    for t in tensors:
        by_type.setdefault(t.type.name, []).append(t.name)
    parts = [f"{len(ns)} tensor{'s' if len(ns) > 1 else ''} of type {ty} (e.g. {ns[0]!r})"
             for ty, ns in sorted(by_type.items(), key=lambda kv: -len(kv[1]))]
    return why + ": " + ", ".join(parts)


def _check_model(h: GGUFHeader) -> list[str]:
    name = h.get("general.architecture")
    supported = sorted(arch.ARCHITECTURES)
    if name is None:
        return ["general.architecture is missing"]
    if not isinstance(name, str):
        return [f"general.architecture is a {h.value_types['general.architecture'].name.lower()}, not a string"]
    desc = arch.ARCHITECTURES.get(name)
    if desc is None:
        # without the architecture's tensor roles, check the types against every role's
        any_role = frozenset().union(*caps.WEIGHT_TYPES.values())
        bad = [t for t in h.tensors.values() if t.type.name not in any_role]
        reasons = [f"architecture {name!r} is not supported yet (bankml runs: {', '.join(supported)})"]
        if bad:
            reasons.append(_type_groups(bad, "weight types the engine cannot run yet"))
        return reasons
    reading = desc.read(h)  # key types, unsupported keys, the graph's checks: the description's own reasons
    return reading.reasons + _check_tensors(h, desc, reading.n_layer, reading.dims)


def _check_tensors(h: GGUFHeader, desc: arch.Architecture, n_layer: int | None, dims: dict | None) -> list[str]:
    reasons = []
    unknown, bad_type, bad_shape = [], {}, []
    for ti in h.tensors.values():
        t = desc.match(ti.name, n_layer)
        if t is None:
            unknown.append(ti.name)  # the graph does not use it, or a layer the file does not have
            continue
        if ti.type.name not in caps.weight_types(desc.name, t.role):
            bad_type.setdefault(t.role, []).append(ti)
        if dims is not None:
            want = tuple(dims[d] for d in t.shape)
            if ti.shape != want:
                bad_shape.append(f"{ti.name!r} {list(ti.shape)} (expected {list(want)})")
    for role, ts in bad_type.items():
        ok = ", ".join(sorted(caps.weight_types(desc.name, role)))
        reasons.append(_type_groups(ts, f"{role} weight types the engine cannot run yet (it runs {ok})"))
    if bad_shape:
        reasons.append(f"tensor shapes that do not match the hyper-parameters: {_names(bad_shape, 3, False)}")
    if unknown:
        reasons.append(f"{len(unknown)} tensor{'s' if len(unknown) > 1 else ''} the engine does not use "
                       f"(llama.cpp refuses unused tensors): {_names(unknown)}")
    if n_layer is not None:
        missing = [n for t in desc.tensors if t.required for n in t.names(n_layer) if n not in h.tensors]
        if missing:
            reasons.append(f"{len(missing)} required tensor{'s' if len(missing) > 1 else ''} missing: "
                           f"{_names(missing)}")
    return reasons


def _check_tokenizer(h: GGUFHeader) -> list[str]:
    model = h.get("tokenizer.ggml.model")
    if model is None:
        return ["tokenizer.ggml.model is missing (bankml needs the vocabulary in the file)"]
    if not isinstance(model, str):
        return ["tokenizer.ggml.model is not a string"]
    if model not in caps.TOKENIZERS:
        return [f"tokenizer model {model!r} is not supported yet (bankml runs: {', '.join(sorted(caps.TOKENIZERS))})"]
    reasons = []
    pres = caps.TOKENIZERS[model]
    pre = h.get("tokenizer.ggml.pre", "default")
    if pres is not None and pre not in pres:
        reasons.append(f"pre-tokenizer {pre!r} of tokenizer model {model!r} is not supported yet "
                       f"(bankml runs: {', '.join(sorted(pres))})")
    for key, (vtype, etype) in caps.TOKENIZER_KEYS.get(model, {}).items():
        if key not in h.metadata:
            reasons.append(f"{key} is missing (tokenizer model {model!r} needs it)")
        elif h.value_types[key].name != vtype or (etype and h.array_types.get(key, ValueType.ARRAY).name != etype):
            reasons.append(f"{key} is not an array of {etype.lower() if etype else vtype.lower()}s")
    return reasons


def _check_template(h: GGUFHeader) -> list[str]:
    if "tokenizer.chat_template" not in h.metadata:
        return []
    tmpl = h.metadata["tokenizer.chat_template"]
    if not isinstance(tmpl, str):
        return ["tokenizer.chat_template is not a string"]
    from .. import jinja  # llama.cpp's own Jinja dialect: what llama-server --jinja (and bankml) parse with

    try:
        jinja.Program.parse(tmpl)
    except jinja.JinjaError as e:
        first = e.text.splitlines()[0] if e.text else "syntax error"
        return [f"the chat template does not parse ({first}); llama-server refuses to start with it"]
    return []


# --- hashing --------------------------------------------------------------------------------------------------

_HASH_CACHE: dict[tuple, str] = {}


def sha256_file(path: str | os.PathLike, progress: ProgressArg = None) -> str:
    """The sha256 of a file, hex. `progress`: None shows a bar on stderr when it is a terminal; True/False
    force it; a callable gets (bytes_done, bytes_total). Remembered for the process while the file's size,
    mtime and inode stay the same."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        key = (os.path.realpath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if key in _HASH_CACHE:
            return _HASH_CACHE[key]
        h = hashlib.sha256()
        with Progress(st.st_size, f"sha256 {os.path.basename(path)}", progress) as bar:
            while chunk := fh.read(1 << 22):
                h.update(chunk)
                bar.update(len(chunk))
    digest = h.hexdigest()
    _HASH_CACHE[key] = digest
    return digest


# --- pins -----------------------------------------------------------------------------------------------------

def forks_dirs() -> list[Path]:
    """Where pins are looked for after the model's own directory: each entry of $BANKML_FORKS (separated by
    os.pathsep), then the pins shipped with bankml."""
    dirs = [Path(d) for d in os.environ.get("BANKML_FORKS", "").split(os.pathsep) if d]
    return dirs + [SHIPPED_FORKS]


def pin_path_beside(path: str | os.PathLike) -> Path:
    return Path(os.fspath(path) + PIN_SUFFIX)


def find_pin(path: str | os.PathLike) -> Path | None:
    """The pin of a model file: `NAME.gguf.FORK.json` beside it, else in a forks directory; None if none."""
    beside = pin_path_beside(path)
    if beside.is_file():
        return beside
    name = os.path.basename(os.fspath(path)) + PIN_SUFFIX
    for d in forks_dirs():
        if (d / name).is_file():
            return d / name
    return None


def load_pin(pin_path: str | os.PathLike) -> dict:
    """Read and check a pin file. Raises PinMismatch when it is not a valid pin."""
    pin_path = os.fspath(pin_path)
    try:
        with open(pin_path, encoding="utf-8") as f:
            pin = json.load(f)
    except (OSError, ValueError) as e:
        raise PinMismatch(pin_path, f"the pin cannot be read: {e}") from None
    files = pin.get("files") if isinstance(pin, dict) else None
    ok = isinstance(files, list) and files and all(
        isinstance(e, dict) and isinstance(e.get("path"), str) and isinstance(e.get("bytes"), int)
        and isinstance(e.get("sha256"), str) and re.fullmatch(r"[0-9a-f]{64}", e["sha256"])
        and e["path"] and not os.path.isabs(e["path"]) and ".." not in Path(e["path"]).parts
        for e in files)
    if not ok:
        raise PinMismatch(pin_path, "not a valid pin: it needs \"files\": [{\"path\" (relative), \"bytes\", "
                                    "\"sha256\" (64 lowercase hex digits)}, ...]")
    if not isinstance(pin.get("provenance"), dict):
        raise PinMismatch(pin_path, "not a valid pin: \"provenance\" (an object) is missing")
    return pin


def make_pin(files: list[dict], provenance: dict) -> dict:
    return {"format": PIN_FORMAT, "files": files, "provenance": provenance}


def write_pin(pin_path: str | os.PathLike, pin: dict) -> Path:
    """Write a pin atomically (a temporary file in the same directory, then a rename)."""
    pin_path = Path(pin_path)
    text = json.dumps(pin, indent=2, ensure_ascii=False) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=".pin-", suffix=".tmp", dir=pin_path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, pin_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return pin_path


def pin(path: str | os.PathLike, provenance: dict, progress: ProgressArg = None) -> Path:
    """Hash a model file and write its pin beside it (`NAME.gguf.FORK.json`). The file must be a whole,
    well-formed GGUF file (GGUFError otherwise); the guard's other verdicts do not matter here. Returns the
    pin's path."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        if size == 0:
            raise GGUFTruncated("the file is empty", 0)
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            parse_header(mm, size)
    entry = {"path": os.path.basename(path), "bytes": size, "sha256": sha256_file(path, progress)}
    return write_pin(pin_path_beside(path), make_pin([entry], dict(provenance)))


@dataclass
class VerifyReport:
    """A file the guard plays and whose bytes match its pin. `pinned_as` is the file name the pin lists;
    `by_content` is True when no pin has this file's name and the pin was found by its sha256 and size (a renamed
    copy of a pinned model)."""

    path: str
    guard: GuardReport
    pin_path: str
    sha256: str
    bytes: int
    provenance: dict
    pinned_as: str = ""
    by_content: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "verdict": "verified", "guard": self.guard.to_dict(),
                "pin": self.pin_path, "sha256": self.sha256, "bytes": self.bytes, "provenance": self.provenance,
                "pinned_as": self.pinned_as or os.path.basename(self.path),
                "pin_match": "sha256" if self.by_content else "name"}


def pin_files(dirs) -> list[Path]:
    """Every `*.FORK.json` directly in these directories (hidden and temporary files skipped), in order: directory
    by directory, by name within each; a directory that does not exist is skipped."""
    out: list[Path] = []
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        out += [Path(d) / n for n in names if n.endswith(PIN_SUFFIX) and not n.startswith(".")
                and os.path.isfile(os.path.join(d, n))]
    return out


def content_pin_dirs(path: str | os.PathLike) -> list[Path]:
    """Where a pin is looked for by content: the file's own directory, then the forks directories."""
    own = Path(os.path.dirname(os.path.abspath(os.fspath(path))))
    return [own] + [d for d in forks_dirs() if os.path.abspath(d) != str(own)]


def single_file_pins(size: int, dirs) -> list[tuple[Path, dict, dict]]:
    """The valid single-file pins in `dirs` whose one entry has `size` bytes: (pin path, pin, entry). Invalid pins
    are passed over (they are reported when a file of their own name is verified)."""
    out = []
    for p in pin_files(dirs):
        try:
            pin = load_pin(p)
        except PinMismatch:
            continue
        if len(pin["files"]) == 1 and pin["files"][0]["bytes"] == size:
            out.append((p, pin, pin["files"][0]))
    return out


def find_pin_by_sha256(sha256: str, size: int, dirs, candidates=None) -> tuple[Path, dict, dict] | None:
    """The first single-file pin in `dirs` (in order) that lists a file of this sha256 and byte count
    (`candidates`: `single_file_pins(size, dirs)` when the caller has it already)."""
    for p, pin, entry in single_file_pins(size, dirs) if candidates is None else candidates:
        if entry["sha256"] == sha256:
            return p, pin, entry
    return None


def find_pin_by_content(path: str | os.PathLike, progress: ProgressArg = None) -> tuple[Path, dict, dict] | None:
    """A pin that lists this file's bytes under another name: a single-file pin beside the file (same directory),
    in a forks directory or shipped with bankml whose entry has this file's size and sha256. The file is hashed
    only when some pin lists its size. Returns (pin path, pin, entry) or None."""
    path = os.fspath(path)
    dirs = content_pin_dirs(path)
    size = os.path.getsize(path)
    candidates = single_file_pins(size, dirs)
    if not candidates:
        return None
    return find_pin_by_sha256(sha256_file(path, progress), size, dirs, candidates)


def pin_command(path: str | os.PathLike) -> str:
    """The command that pins a local file (what an unpinned file's refusal tells the user to run)."""
    return f"bankml pin {shlex.quote(os.fspath(path))}"


def check_pin(path: str | os.PathLike, progress: ProgressArg = None) -> tuple[Path, dict, dict]:
    """Check a file's bytes against its pin. Returns (pin path, pin, this file's entry); raises PinMismatch.

    The pin is the one of the file's name (`find_pin`); when there is none, a single-file pin that lists the
    file's size and sha256 under another name (`find_pin_by_content`): a file whose bytes are a pinned model's is
    that model, whatever it is called. The entry returned is then the pin's, naming the pinned file."""
    path = os.fspath(path)
    pin_path = find_pin(path)
    if pin_path is None:
        found = find_pin_by_content(path, progress)
        if found is not None:
            return found
        looked = [str(pin_path_beside(path))] + [str(d) for d in forks_dirs()]
        raise PinMismatch(path, f"no pin ({os.path.basename(path)}{PIN_SUFFIX}) found; looked in: "
                                + ", ".join(looked) + "; and no single-file pin there lists its size and sha256; "
                                f"`{pin_command(path)}` pins it (--package, --package-version and --how "
                                "record where it came from)")
    p = load_pin(pin_path)
    base = os.path.dirname(os.path.abspath(path))
    mine = None
    for entry in p["files"]:
        f = os.path.join(base, entry["path"])
        if os.path.basename(entry["path"]) == os.path.basename(path):
            mine = entry
            f = path
        try:
            size = os.path.getsize(f)
        except OSError as e:
            raise PinMismatch(path, f"{entry['path']}, listed in {pin_path}, cannot be read: {e}") from None
        if size != entry["bytes"]:
            raise PinMismatch(path, f"{entry['path']} has {size} bytes; the pin {pin_path} says {entry['bytes']}")
        digest = sha256_file(f, progress)
        if digest != entry["sha256"]:
            raise PinMismatch(path, f"{entry['path']} has sha256 {digest}; the pin {pin_path} says "
                                    f"{entry['sha256']}")
    if mine is None:
        raise PinMismatch(path, f"the pin {pin_path} does not list {os.path.basename(path)}")
    return pin_path, p, mine


def verify(path: str | os.PathLike, progress: ProgressArg = None) -> VerifyReport:
    """The guard, then the pin. Raises ModelRefused (with every reason) unless the guard plays the file,
    PinMismatch when its bytes are not the pinned ones (or it has no pin), OSError when it cannot be read."""
    path = os.fspath(path)
    report = guard(path)
    if report.verdict != PLAY:
        raise ModelRefused(path, report.reasons, report.verdict)
    by_content = find_pin(path) is None
    pin_path, p, entry = check_pin(path, progress)
    return VerifyReport(path, report, str(pin_path), entry["sha256"], entry["bytes"], p["provenance"],
                        os.path.basename(entry["path"]), by_content)
