"""`bankml quantize IN OUT TYPE`: derived GGUF files, re-encoded deterministically (same bytes every run).

Owns: decoding tensor data of the types bankml reads into float32, encoding float32 into the types it writes, and
the conversion rule of a derived file, with its pin (`OUT.FORK.json`, recording the input's sha256).
Must not know: the engine (the derived file is checked by the guard like any other), HTTP.

The rule: every tensor with two or more dimensions (the matrices and the token embedding) is decoded to float32
and encoded in TYPE; one-dimensional tensors (norm weights, biases) are copied as they are, and so is a matrix that
is already of TYPE. The metadata is copied in order, with `general.file_type` set to TYPE's llama_ftype. The
tensor table keeps the input's order and alignment.

Decoding and encoding follow ggml-base b11192 (ggml/src/ggml-quants.c), which is what llama-quantize uses:
- decoding (`dequantize_row_*`, built without FMA): F16 widened exactly; Q8_0 fl(q * h(d)); Q4_1
  fl(fl(q * h(d)) + h(m)); Q4_0 fl((q - 8) * h(d)); BF16 widened exactly.
- encoding (`quantize_row_*_ref`, as `ggml_quantize_chunk` without an importance matrix):
  F16: round to nearest even. Q8_0 per block of 32: amax = max |x|, d = fl(amax / 127), id = d ? fl(1 / d) : 0,
  q = roundf(fl(x * id)) (half away from zero), stored f16(d). Q4_0 per block: m = the first element of largest
  magnitude, d = fl(m / -8), id = d ? fl(1 / d) : 0, q = min(15, trunc(fl(fl(x * id) + 8.5))), stored f16(d),
  nibbles low = elements 0..15, high = 16..31.
Every step is float32 arithmetic in numpy, which rounds as C does (no contraction, no fast-math).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..about import __version__
from ._progress import Progress, ProgressArg
from ..errors import BankmlError
from .gguf import GGMLType, GGUFFile, ValueType, header_kvs, row_bytes, type_name, write_gguf
from .verify import make_pin, pin_path_beside, sha256_file, write_pin

#: the types a derived file may be written in -> llama_ftype (include/llama.h) for general.file_type
OUTPUT_TYPES: dict[str, int] = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 7}

F32, F16 = np.dtype("<f4"), np.dtype("<f2")


class QuantizeError(BankmlError):
    """A file or tensor the converter cannot re-encode (unknown type, rows not a multiple of the block)."""


# --- decoding ---------------------------------------------------------------------------------------------------

def _blocks(raw: np.ndarray, n_rows: int, n_per_row: int, block_bytes: int) -> np.ndarray:
    return np.ascontiguousarray(raw).reshape(n_rows * (n_per_row // 32), block_bytes)


def _scale(blocks: np.ndarray, at: int = 0) -> np.ndarray:
    return blocks[:, at:at + 2].copy().view(F16).astype(F32)  # exact widening, shape (n_blocks, 1)


def dequantize(gtype: int, raw: np.ndarray, n_rows: int, n_per_row: int) -> np.ndarray:
    """float32[n_rows, n_per_row] from the raw bytes (uint8) of n_rows rows of type `gtype`."""
    gtype = GGMLType(gtype)
    raw = np.asarray(raw, dtype=np.uint8)
    if gtype == GGMLType.F32:
        return raw.view(F32).reshape(n_rows, n_per_row).astype(np.float32)
    if gtype == GGMLType.F16:
        return raw.view(F16).reshape(n_rows, n_per_row).astype(np.float32)
    if gtype == GGMLType.BF16:
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(n_rows, n_per_row)
    if n_per_row % 32:
        raise QuantizeError(f"{n_per_row} elements per row is not a multiple of 32")
    with np.errstate(all="ignore"):  # inf and NaN scales decode as ggml decodes them
        return _dequantize_blocks(gtype, raw, n_rows, n_per_row)


def _dequantize_blocks(gtype: GGMLType, raw: np.ndarray, n_rows: int, n_per_row: int) -> np.ndarray:
    if gtype == GGMLType.Q8_0:
        b = _blocks(raw, n_rows, n_per_row, 34)
        x = b[:, 2:].view(np.int8).astype(np.float32) * _scale(b)
    elif gtype in (GGMLType.Q4_0, GGMLType.Q4_1):
        bb = 18 if gtype == GGMLType.Q4_0 else 20
        b = _blocks(raw, n_rows, n_per_row, bb)
        qs = b[:, bb - 16:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32)
        if gtype == GGMLType.Q4_0:
            x = (q - np.float32(8)) * _scale(b)
        else:
            x = q * _scale(b) + _scale(b, 2)
    else:
        raise QuantizeError(f"tensors of type {type_name(gtype)} cannot be decoded by the converter yet "
                            f"(it reads {', '.join(DECODABLE)})")
    return x.reshape(n_rows, n_per_row)


DECODABLE = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1")


# --- encoding ---------------------------------------------------------------------------------------------------

def _f16_bits(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # beyond the half range: inf, as ggml's conversion gives
        return x.astype(F16).view(np.uint8)  # numpy rounds float32 -> float16 to nearest even, as ggml does


def _round_half_away(x: np.ndarray) -> np.ndarray:
    # roundf: x + copysign(0.5, x) is exact in float64, then truncate
    x64 = x.astype(np.float64)
    return np.trunc(x64 + np.copysign(0.5, x64))


def quantize(type_name_: str, x: np.ndarray) -> np.ndarray:
    """The bytes (uint8[n_rows, row_bytes]) of the float32 rows `x` encoded as `type_name_` (OUTPUT_TYPES)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    n_rows, n = x.shape
    if type_name_ == "F32":
        return x.view(np.uint8)
    if type_name_ == "F16":
        return _f16_bits(x).reshape(n_rows, n * 2)
    if n % 32:
        raise QuantizeError(f"{n} elements per row is not a multiple of 32")
    blk = x.reshape(-1, 32)
    with np.errstate(all="ignore"):
        if type_name_ == "Q8_0":
            d = (np.abs(blk).max(axis=1) / np.float32(127)).astype(np.float32)
            inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
            q = _round_half_away(blk * inv[:, None]).astype(np.int8)
            out = np.concatenate([_f16_bits(d).reshape(-1, 2), q.view(np.uint8)], axis=1)
        elif type_name_ == "Q4_0":
            first_max = np.argmax(np.abs(blk), axis=1)       # the first element of largest magnitude
            m = blk[np.arange(len(blk)), first_max]
            d = (m / np.float32(-8)).astype(np.float32)
            inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
            v = (blk * inv[:, None]).astype(np.float32) + np.float32(8.5)
            q = np.minimum(np.trunc(v).astype(np.int8), 15).astype(np.uint8)
            qs = q[:, :16] | (q[:, 16:] << 4)
            out = np.concatenate([_f16_bits(d).reshape(-1, 2), qs], axis=1)
        else:
            raise QuantizeError(f"cannot write type {type_name_!r}; the converter writes {', '.join(OUTPUT_TYPES)}")
    return out.reshape(n_rows, row_bytes(GGMLType[type_name_], n))


# --- files ------------------------------------------------------------------------------------------------------

def _plan(f: GGUFFile, out_type: str):
    target = GGMLType[out_type]
    kvs = header_kvs(f.header)
    ftype = ("general.file_type", ValueType.UINT32, OUTPUT_TYPES[out_type], None)
    kvs = [ftype if k[0] == "general.file_type" else k for k in kvs]
    if not any(k[0] == "general.file_type" for k in kvs):
        kvs.append(ftype)
    tensors = []
    for ti in f.tensors.values():
        if len(ti.shape) < 2 or ti.type == target:
            tensors.append((ti.name, ti.shape, ti.type, (lambda name=ti.name: f.tensor_bytes(name))))
            continue
        n_per_row = ti.shape[0]
        n_rows = ti.n_elements // n_per_row if n_per_row else 0
        if n_per_row % 32 and out_type not in ("F32", "F16"):
            raise QuantizeError(f"tensor {ti.name!r}: {n_per_row} elements per row cannot be written as {out_type}")

        def encode(ti=ti, n_rows=n_rows, n_per_row=n_per_row):
            x = dequantize(ti.type, f.tensor_bytes(ti.name), n_rows, n_per_row)
            return quantize(out_type, x)
        tensors.append((ti.name, ti.shape, target, encode))
    return kvs, tensors


def convert(src: str | os.PathLike, dst: str | os.PathLike, out_type: str, *,
            provenance: dict | None = None, progress: ProgressArg = None) -> Path:
    """Write `dst`, the derived file of `src` in `out_type`, atomically, and its pin `dst.FORK.json` beside it.
    `provenance` is merged into the pin's provenance (e.g. the model's name)."""
    out_type = out_type.upper()
    src, dst = check_paths(src, dst, out_type, QuantizeError)
    src_sha = sha256_file(src, progress)
    with GGUFFile(src) as f:
        kvs, tensors = _plan(f, out_type)
        with Progress(len(tensors), f"writing {dst.name}", progress) as bar:
            def step(data):
                def run():
                    b = data() if callable(data) else data
                    bar.update(1)
                    return b
                return run
            prov = {"model": f"{src.stem} re-encoded as {out_type}",
                    "derived_from": {"path": src.name, "bytes": os.path.getsize(src), "sha256": src_sha},
                    "converter": f"bankml.quantize (bankml {__version__})", "type": out_type,
                    "how": f"bankml quantize {src.name} {dst.name} {out_type}: tensors of two or more dimensions "
                           f"decoded to float32 and encoded as {out_type} (ggml's reference rules), others copied"}
            prov.update(provenance or {})
            write_derived(dst, kvs, [(n, s, t, step(d)) for n, s, t, d in tensors], f.header.alignment, prov)
    return dst


def check_paths(src, dst, out_type: str | None, error: type) -> tuple[Path, Path]:
    """(src, dst) as paths, or `error` when out_type (None: none) cannot be written or dst would overwrite src."""
    if out_type is not None and out_type not in OUTPUT_TYPES:
        raise error(f"cannot write type {out_type!r}; the converter writes {', '.join(OUTPUT_TYPES)}")
    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise error("the output would overwrite the input")
    return src, dst


def write_derived(dst: Path, kvs, tensors, alignment: int, provenance: dict, prefix: str = ".quantize-") -> None:
    """Write a derived GGUF file (write_gguf's kvs and tensors) to a temporary name beside `dst` (`prefix`...), rename it to `dst`
    (mode as a new file's), then its pin `dst.FORK.json` with `provenance`."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".gguf", dir=dst.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            write_gguf(out, kvs, tensors, alignment=alignment)
            out.flush()
            os.fsync(out.fileno())
        digest = sha256_file(tmp, False)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # mkstemp makes the file 0600; an output file gets the usual mode
        os.replace(tmp, dst)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    write_pin(pin_path_beside(dst), make_pin([{"path": dst.name, "bytes": dst.stat().st_size, "sha256": digest}],
                                             provenance))


# --- the `bankml quantize` subcommand ---------------------------------------------------------------------------

def add_parser(subparsers) -> None:
    p = subparsers.add_parser("quantize", help="write a derived GGUF file with its matrices re-encoded as TYPE",
                              description="Write OUT: the GGUF file IN with every tensor of two or more dimensions "
                                          "re-encoded as TYPE (deterministic: the same bytes every run), and its "
                                          "pin OUT.FORK.json recording IN's sha256.")
    p.add_argument("input", metavar="IN")
    p.add_argument("output", metavar="OUT")
    p.add_argument("type", metavar="TYPE", type=str.upper, choices=list(OUTPUT_TYPES),
                   help=", ".join(OUTPUT_TYPES))
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        out = convert(args.input, args.output, args.type, progress=None)
    except OSError as e:
        print(f"bankml: {e.filename or args.input}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"{out} ({out.stat().st_size} bytes), pin {pin_path_beside(out)}")
    return 0
