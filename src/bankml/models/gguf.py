"""GGUF reader: header, metadata, tensor table, and tensor data as read-only views over one mmap.

Owns: the GGUF container format (v2 and v3, little-endian), the ggml tensor type table (block size and
bytes per block for every type of llama.cpp b11192's ggml.h), and the refusal of malformed files.
Knows nothing of models, tokenizers or kernels: `bankml.models.verify` decides whether the engine can run a file.

The reader mirrors what ggml/src/gguf.cpp accepts, and is stricter where a check costs nothing: every count
and length is compared with the bytes that remain before anything is allocated, so no header can ask for a
huge allocation; every failure is a `GGUFError` (or `GGUFTruncated` when more bytes would help) with a reason
and a byte offset. Arrays of arrays are read (to a depth of 64); `bankml.models.verify` refuses them because
llama.cpp does.

Values: integers and floats come back as Python numbers, booleans as bool, strings as str (decoded UTF-8;
invalid bytes are kept as surrogate escapes, so `s.encode("utf-8", "surrogateescape")` gives the bytes back),
arrays of numbers as read-only numpy arrays of the stored dtype, arrays of strings or arrays as lists.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, BinaryIO

import numpy as np

from ..errors import GGUFError, GGUFTruncated, ModelFileChanged
from . import _mapguard

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
MAX_NESTING = 64
MAX_DIMS = 4
MAX_NAME = 64  # ggml's GGML_MAX_NAME: a tensor name is at most 63 bytes
U64_MAX = (1 << 64) - 1
I64_MAX = (1 << 63) - 1
MAX_STRING_BYTES = 1 << 30    # gguf.cpp's GGUF_MAX_STRING_LENGTH
MAX_ARRAY_ELEMENTS = 1 << 30  # gguf.cpp's GGUF_MAX_ARRAY_ELEMENTS


class ValueType(IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# fixed-size value types: (struct format, numpy dtype)
_SCALAR = {
    ValueType.UINT8: ("<B", np.uint8),
    ValueType.INT8: ("<b", np.int8),
    ValueType.UINT16: ("<H", np.uint16),
    ValueType.INT16: ("<h", np.int16),
    ValueType.UINT32: ("<I", np.uint32),
    ValueType.INT32: ("<i", np.int32),
    ValueType.FLOAT32: ("<f", np.float32),
    ValueType.BOOL: ("<b", np.bool_),
    ValueType.UINT64: ("<Q", np.uint64),
    ValueType.INT64: ("<q", np.int64),
    ValueType.FLOAT64: ("<d", np.float64),
}


class GGMLType(IntEnum):
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ2_XXS = 16
    IQ2_XS = 17
    IQ3_XXS = 18
    IQ1_S = 19
    IQ4_NL = 20
    IQ3_S = 21
    IQ2_S = 22
    IQ4_XS = 23
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    IQ1_M = 29
    BF16 = 30
    TQ1_0 = 34
    TQ2_0 = 35
    MXFP4 = 39
    NVFP4 = 40
    Q1_0 = 41
    Q2_0 = 42


# (elements per block, bytes per block), as ggml.c's type_traits of b11192
TYPE_LAYOUT: dict[GGMLType, tuple[int, int]] = {
    GGMLType.F32: (1, 4), GGMLType.F16: (1, 2), GGMLType.BF16: (1, 2), GGMLType.F64: (1, 8),
    GGMLType.I8: (1, 1), GGMLType.I16: (1, 2), GGMLType.I32: (1, 4), GGMLType.I64: (1, 8),
    GGMLType.Q1_0: (128, 18), GGMLType.Q2_0: (64, 18),
    GGMLType.Q4_0: (32, 18), GGMLType.Q4_1: (32, 20), GGMLType.Q5_0: (32, 22), GGMLType.Q5_1: (32, 24),
    GGMLType.Q8_0: (32, 34), GGMLType.Q8_1: (32, 36), GGMLType.MXFP4: (32, 17), GGMLType.NVFP4: (64, 36),
    GGMLType.IQ4_NL: (32, 18),
    GGMLType.Q2_K: (256, 84), GGMLType.Q3_K: (256, 110), GGMLType.Q4_K: (256, 144),
    GGMLType.Q5_K: (256, 176), GGMLType.Q6_K: (256, 210), GGMLType.Q8_K: (256, 292),
    GGMLType.IQ2_XXS: (256, 66), GGMLType.IQ2_XS: (256, 74), GGMLType.IQ3_XXS: (256, 98),
    GGMLType.IQ3_S: (256, 110), GGMLType.IQ2_S: (256, 82), GGMLType.IQ1_S: (256, 50),
    GGMLType.IQ1_M: (256, 56), GGMLType.IQ4_XS: (256, 136), GGMLType.TQ1_0: (256, 54),
    GGMLType.TQ2_0: (256, 66),
}

# numpy dtypes for the types whose elements are plain numbers
_TENSOR_DTYPE = {
    GGMLType.F32: np.float32, GGMLType.F16: np.float16, GGMLType.F64: np.float64,
    GGMLType.I8: np.int8, GGMLType.I16: np.int16, GGMLType.I32: np.int32, GGMLType.I64: np.int64,
    GGMLType.BF16: np.uint16,
}


def type_name(t: int) -> str:
    try:
        return GGMLType(t).name
    except ValueError:
        return f"type {t}"


def row_bytes(t: GGMLType, n: int) -> int:
    """Bytes of one row of `n` elements of type `t` (n must be a multiple of the block size)."""
    blck, size = TYPE_LAYOUT[t]
    return (n // blck) * size


@dataclass(frozen=True)
class TensorInfo:
    """One entry of the tensor table. `shape` is ggml's order (ne0 = elements per row first)."""

    name: str
    shape: tuple[int, ...]
    type: GGMLType
    offset: int        # relative to the data section, as stored
    nbytes: int
    data_offset: int   # absolute position in the file

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class _Cursor:
    """Reads little-endian values from a bytes-like object.

    `file_size` is the size of the whole file, or None when `buf` is a prefix of unknown length (a download
    under way). A read past the end of the bytes means the file is cut short (GGUFTruncated), and so does a
    declared length that would fit in a longer file but not in this one; a length that no GGUF file can have
    (past gguf.cpp's limits, or past ABSURD bytes) means the header is corrupt (GGUFError).
    """

    __slots__ = ("buf", "pos", "end", "file_size")

    # a declared length past this many bytes is taken as corruption, not as truncation
    ABSURD = 1 << 40

    def __init__(self, buf, file_size: int | None):
        self.buf = memoryview(buf).cast("B")
        self.pos = 0
        self.end = len(self.buf)
        self.file_size = file_size

    def remaining_in_file(self) -> int | None:
        return None if self.file_size is None else self.file_size - self.pos

    def check_fits(self, n: int, what: str, at: int) -> None:
        """A declared length of `n` bytes must be plausible and fit in the rest of the file."""
        if n > self.ABSURD:
            raise GGUFError(f"{what} ({n} bytes) cannot be right: no GGUF header is that large", at)
        rest = self.remaining_in_file()
        if rest is not None and n > rest:
            raise GGUFTruncated(f"{what} ({n} bytes) runs past the end of the file ({rest} bytes remain)", at)

    def need(self, n: int, what: str) -> None:
        if n > self.end - self.pos:
            if self.file_size is not None and self.end >= self.file_size:
                raise GGUFTruncated(f"the file ends inside the header ({what})", self.pos)
            raise GGUFTruncated(f"the header continues past the {self.end} bytes read ({what})", self.pos)

    def unpack(self, fmt: str, size: int, what: str):
        self.need(size, what)
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += size
        return v

    def u32(self, what: str) -> int:
        return self.unpack("<I", 4, what)

    def i32(self, what: str) -> int:
        return self.unpack("<i", 4, what)

    def u64(self, what: str) -> int:
        return self.unpack("<Q", 8, what)

    def i64(self, what: str) -> int:
        return self.unpack("<q", 8, what)

    def raw_string(self, what: str) -> bytes:
        at = self.pos
        n = self.u64(what + " length")
        if n > MAX_STRING_BYTES:
            raise GGUFError(f"{what} is {n} bytes long; gguf.cpp refuses strings over {MAX_STRING_BYTES}", at)
        self.check_fits(n, what, at)
        self.need(n, what)
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b

    def string(self, what: str) -> str:
        return self.raw_string(what).decode("utf-8", "surrogateescape")


def _value_type(cur: _Cursor, what: str) -> ValueType:
    at = cur.pos
    t = cur.i32(what)
    try:
        return ValueType(t)
    except ValueError:
        raise GGUFError(f"{what} has unknown value type {t}", at) from None


def _read_strings(cur: _Cursor, n: int, what: str) -> list[str]:
    """`n` length-prefixed strings (the body of an array of strings; tokenizer vocabularies are large, so this
    loop avoids the per-element bookkeeping of _read_value)."""
    out = []
    buf, unpack = cur.buf, struct.unpack_from
    for i in range(n):
        if cur.end - cur.pos < 8:
            cur.need(8, f"{what}[{i}] length")
        k = unpack("<Q", buf, cur.pos)[0]
        if k > MAX_STRING_BYTES or k > cur.end - cur.pos - 8:
            cur.raw_string(f"{what}[{i}]")  # raises with the precise reason
        start = cur.pos + 8
        out.append(str(buf[start:start + k], "utf-8", "surrogateescape"))
        cur.pos = start + k
    return out


def _read_value(cur: _Cursor, vtype: ValueType, what: str, depth: int) -> Any:
    if vtype == ValueType.STRING:
        return cur.string(what)
    if vtype == ValueType.ARRAY:
        if depth >= MAX_NESTING:
            raise GGUFError(f"{what}: arrays nested deeper than {MAX_NESTING}", cur.pos)
        etype = _value_type(cur, what + " element type")
        at = cur.pos
        n = cur.u64(what + " array length")
        if n > MAX_ARRAY_ELEMENTS:
            raise GGUFError(f"{what}: array of {n} elements; gguf.cpp refuses more than {MAX_ARRAY_ELEMENTS}", at)
        # the smallest an element can be: 8 bytes for a string's length, 12 for an array's type and length
        min_size = {ValueType.STRING: 8, ValueType.ARRAY: 12}.get(etype) or struct.calcsize(_SCALAR[etype][0])
        cur.check_fits(n * min_size, f"{what}: array of {n} elements", at)
        if etype in _SCALAR:
            fmt, dtype = _SCALAR[etype]
            size = struct.calcsize(fmt)
            cur.need(n * size, what)
            if dtype is np.bool_:
                arr = np.frombuffer(cur.buf, dtype=np.uint8, count=n, offset=cur.pos) != 0
            else:
                arr = np.frombuffer(cur.buf, dtype=np.dtype(dtype).newbyteorder("<"), count=n,
                                    offset=cur.pos).astype(dtype, copy=True)
            arr.flags.writeable = False
            cur.pos += n * size
            return arr
        if etype == ValueType.STRING:
            return _read_strings(cur, n, what)
        return [_read_value(cur, etype, f"{what}[{i}]", depth + 1) for i in range(n)]
    fmt, _ = _SCALAR[vtype]
    v = cur.unpack(fmt, struct.calcsize(fmt), what)
    return bool(v) if vtype == ValueType.BOOL else v


@dataclass
class GGUFHeader:
    """Everything before the tensor data: what the guard reads."""

    version: int
    metadata: dict[str, Any]
    value_types: dict[str, ValueType]   # the stored type of each key
    array_types: dict[str, ValueType]   # the element type of each array key
    tensors: dict[str, TensorInfo]      # in file order
    alignment: int
    data_offset: int                    # where the tensor data section starts
    data_size: int                      # bytes the tensor table declares, padded
    file_size: int | None = None        # the whole file's size, when it was known to the parser
    header_size: int = 0                # bytes of header before the padding that precedes the data

    @property
    def data_end(self) -> int:
        """Where the last tensor's data ends (0 when there are no tensors)."""
        return max((t.data_offset + t.nbytes for t in self.tensors.values()), default=0)

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)

    @property
    def architecture(self) -> str | None:
        return self.metadata.get("general.architecture")

    def arch_key(self, suffix: str, default: Any = None) -> Any:
        """`{architecture}.{suffix}`, e.g. arch_key('block_count')."""
        return self.metadata.get(f"{self.architecture}.{suffix}", default)


def parse_header(buf, file_size: int | None = None, *, check_data: bool = True) -> GGUFHeader:
    """Parse a GGUF header from `buf` (bytes, mmap or memoryview holding the file, or its first bytes).

    `file_size`: the size of the whole file (then declared lengths are checked against it, and tensor data past
    it raises GGUFTruncated), or None when the total is unknown (then only the header is checked, and a header
    that runs past `buf` raises GGUFTruncated: more bytes are needed). `check_data=False` skips the check that
    the tensor data fits in the file (the guard makes it itself, to report it next to its other reasons).
    """
    cur = _Cursor(buf, file_size)
    try:
        return _parse(cur, check_data)
    finally:
        try:
            cur.buf.release()
        except BufferError:  # an array view of a failed read is still alive in the traceback
            pass


def _parse(cur: _Cursor, check_data: bool) -> GGUFHeader:
    cur.need(4, "magic")
    magic = bytes(cur.buf[0:4])
    if magic != GGUF_MAGIC:
        raise GGUFError(f"bad magic {magic!r}: not a GGUF file (expected b'GGUF')", 0)
    cur.pos = 4
    version = cur.u32("version")
    if version == 1:
        raise GGUFError("GGUF version 1 is no longer supported (llama.cpp reads versions 2 and 3)", 4)
    if version not in (2, 3):
        hint = " (byte-swapped: a big-endian file?)" if version and version & 0xFFFF == 0 else ""
        raise GGUFError(f"unknown GGUF version {version}{hint}; versions 2 and 3 are read", 4)
    at = cur.pos
    n_tensors = cur.i64("tensor count")
    if n_tensors < 0:
        raise GGUFError(f"tensor count {n_tensors} is negative", at)
    cur.check_fits(n_tensors * 24, f"a table of {n_tensors} tensors", at)
    at = cur.pos
    n_kv = cur.i64("metadata count")
    if n_kv < 0:
        raise GGUFError(f"metadata count {n_kv} is negative", at)
    cur.check_fits(n_kv * 12, f"{n_kv} metadata entries", at)

    metadata: dict[str, Any] = {}
    value_types: dict[str, ValueType] = {}
    array_types: dict[str, ValueType] = {}
    for i in range(n_kv):
        at = cur.pos
        key = cur.string(f"metadata key {i}")
        if not key:
            raise GGUFError(f"metadata key {i} is empty", at)
        if key in metadata:
            raise GGUFError(f"duplicate metadata key {key!r}", at)
        vtype = _value_type(cur, f"metadata {key!r}")
        if vtype == ValueType.ARRAY:
            save = cur.pos
            array_types[key] = _value_type(cur, f"metadata {key!r} element type")
            cur.pos = save
        metadata[key] = _read_value(cur, vtype, f"metadata {key!r}", 0)
        value_types[key] = vtype

    alignment = DEFAULT_ALIGNMENT
    if "general.alignment" in metadata:
        if value_types["general.alignment"] != ValueType.UINT32:
            raise GGUFError("general.alignment must be a uint32, not "
                            f"{value_types['general.alignment'].name.lower()}")
        alignment = metadata["general.alignment"]
        if alignment == 0 or alignment & (alignment - 1):
            raise GGUFError(f"general.alignment {alignment} is not a power of 2")

    tensors: dict[str, TensorInfo] = {}
    for i in range(n_tensors):
        at = cur.pos
        name = cur.string(f"tensor {i} name")
        name_bytes = len(name.encode("utf-8", "surrogateescape"))
        if name_bytes >= MAX_NAME:
            raise GGUFError(f"tensor {i} name is {name_bytes} bytes long; ggml allows at most {MAX_NAME - 1}", at)
        if name in tensors:
            raise GGUFError(f"duplicate tensor name {name!r}", at)
        at = cur.pos
        n_dims = cur.u32(f"tensor {name!r} dimension count")
        if n_dims > MAX_DIMS:
            raise GGUFError(f"tensor {name!r} has {n_dims} dimensions; at most {MAX_DIMS}", at)
        shape = []
        for j in range(n_dims):
            at = cur.pos
            d = cur.i64(f"tensor {name!r} dimension {j}")
            if d < 0:
                raise GGUFError(f"tensor {name!r} dimension {j} is negative ({d})", at)
            shape.append(d)
        n_el = 1
        for d in shape:
            n_el *= d
        # gguf.cpp's test: each partial product of ne0..ne3 must stay below INT64_MAX
        ne = shape + [1] * (MAX_DIMS - len(shape))
        if n_el > 0 and (I64_MAX // ne[1] <= ne[0] or I64_MAX // ne[2] <= ne[0] * ne[1]
                         or I64_MAX // ne[3] <= ne[0] * ne[1] * ne[2]):
            raise GGUFError(f"tensor {name!r} shape {tuple(shape)} has 2^63 elements or more", at)
        at = cur.pos
        t = cur.i32(f"tensor {name!r} type")
        try:
            gtype = GGMLType(t)
        except ValueError:
            raise GGUFError(f"tensor {name!r} has unknown ggml type {t}", at) from None
        blck, tsize = TYPE_LAYOUT[gtype]
        ne0 = shape[0] if shape else 1
        if ne0 % blck:
            raise GGUFError(f"tensor {name!r} of type {gtype.name} has {ne0} elements per row, not a multiple "
                            f"of its block size {blck}", at)
        nbytes = (n_el // blck) * tsize
        if nbytes > U64_MAX:
            raise GGUFError(f"tensor {name!r} size in bytes overflows 64 bits", at)
        at = cur.pos
        offset = cur.u64(f"tensor {name!r} offset")
        if offset % alignment:
            raise GGUFError(f"tensor {name!r} offset {offset} is not a multiple of the alignment {alignment}", at)
        tensors[name] = TensorInfo(name, tuple(shape), gtype, offset, nbytes, -1)

    header_end = cur.pos
    data_offset = header_end + (-header_end) % alignment if n_tensors else header_end
    data_size = 0
    for name, ti in tensors.items():
        end = ti.offset + ti.nbytes
        if end > U64_MAX:
            raise GGUFError(f"tensor {name!r}: offset plus size overflows 64 bits")
        data_size = max(data_size, end + (-end) % alignment)
        tensors[name] = TensorInfo(ti.name, ti.shape, ti.type, ti.offset, ti.nbytes, data_offset + ti.offset)
    header = GGUFHeader(version, metadata, value_types, array_types, tensors, alignment, data_offset, data_size,
                        cur.file_size, header_end)
    if check_data and cur.file_size is not None:
        check_data_fits(header, cur.file_size)
    return header


def check_data_fits(header: GGUFHeader, file_size: int) -> None:
    """Raise GGUFTruncated when the tensor data the header declares runs past `file_size` bytes."""
    if header.tensors and header.data_offset > file_size:
        raise GGUFTruncated(f"the file ends at byte {file_size}, inside the padding before the tensor data "
                            f"(which starts at byte {header.data_offset})")
    for name, ti in header.tensors.items():
        if ti.data_offset + ti.nbytes > file_size:
            raise GGUFTruncated(f"tensor {name!r} data ends at byte {ti.data_offset + ti.nbytes}, past the "
                                f"end of the file ({file_size} bytes)")


class GGUFFile:
    """A GGUF file opened with one read-only mmap. Tensor views stay valid until `close()`.

    >>> f = GGUFFile(path); emb = f.tensor_bytes("token_embd.weight"); f.close()
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self._fh: BinaryIO = open(self.path, "rb")
        try:
            size = os.fstat(self._fh.fileno()).st_size
            if size == 0:
                raise GGUFTruncated("the file is empty", 0)
            self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        except BaseException:
            self._fh.close()
            raise
        self.size = size
        # a read past the end of a file cut under the map faults (SIGBUS): the guard turns it into zeros and a
        # flag that check_mapping() reports
        self._guard = _mapguard.watch(self._mm, self.path)
        try:
            self.header = parse_header(self._mm, size)
        except BaseException:
            self.close()
            raise

    # convenience pass-throughs
    @property
    def metadata(self) -> dict[str, Any]:
        return self.header.metadata

    @property
    def tensors(self) -> dict[str, TensorInfo]:
        return self.header.tensors

    def tensor_bytes(self, name: str) -> np.ndarray:
        """The raw bytes of a tensor as a read-only uint8 view over the mmap."""
        ti = self.header.tensors[name]
        if ti.nbytes == 0:
            empty = np.empty(0, dtype=np.uint8)
            empty.flags.writeable = False
            return empty
        return np.frombuffer(self._mm, dtype=np.uint8, count=ti.nbytes, offset=ti.data_offset)

    def tensor(self, name: str) -> np.ndarray:
        """A read-only view shaped as numpy expects (reversed ggml shape). Quantized types come back as
        uint8 rows of their blocks: shape (..., row_bytes)."""
        ti = self.header.tensors[name]
        raw = self.tensor_bytes(name)
        shape = tuple(reversed(ti.shape)) or (1,)
        dt = _TENSOR_DTYPE.get(ti.type)
        if dt is not None:
            return raw.view(dt).reshape(shape)
        return raw.reshape(shape[:-1] + (row_bytes(ti.type, ti.shape[0]),))

    def buffer(self) -> mmap.mmap:
        """The mmap itself (read-only), for compiled code that takes pointers into it."""
        return self._mm

    def check_mapping(self) -> None:
        """Raise ModelFileChanged when a read of the map faulted since it was opened (the file was cut under it:
        the guard answered that read, and every later one, with zeros). What was computed from the map since then
        is garbage; the caller throws it away. A file rewritten in place without a fault is not seen here: its
        identity (bankml.server.residency) refuses it before the next request."""
        if self._fh is None:
            return
        hit = _mapguard.damaged(self._guard)
        if hit >= 0:
            raise ModelFileChanged(self.path, f"a read at offset {hit} went past its end: it was cut")

    def close(self) -> None:
        mm = getattr(self, "_mm", None)
        if mm is not None:
            try:
                mm.close()
                _mapguard.unwatch(self._guard)
            except BufferError:
                # numpy views still point into the map; it is unmapped when they are gone (and stays watched:
                # a read through those views may still fault)
                pass
            self._mm = None
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "GGUFFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_header_file(path: str | os.PathLike, limit: int | None = None) -> GGUFHeader:
    """Parse only the header of a file on disk, reading at most `limit` bytes (default: the whole file via
    mmap). Raises GGUFTruncated when the header or the declared data runs past the end of the file."""
    path = os.fspath(path)
    size = os.path.getsize(path)
    if size == 0:
        raise GGUFTruncated("the file is empty", 0)
    with open(path, "rb") as fh:
        if limit is not None and limit < size:
            return parse_header(fh.read(limit), size)
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            return parse_header(mm, size)
        finally:
            try:
                mm.close()
            except BufferError:  # a traceback still holds the cursor's view; the map goes with it
                pass


# --- writing ---------------------------------------------------------------------------------------------------
# What `bankml quantize` needs: a well-formed GGUF v3 file, laid out as gguf.cpp lays one out (metadata in the
# given order, tensor data in table order, every tensor padded to the alignment). The tests' own writer
# (tests/gguf_writer.py) can also write lies; this one cannot.

def encode_value(vtype: int, v: Any, etype: int | None = None) -> bytes:
    """The bytes of one metadata value of type `vtype` (without its type tag). Arrays take `etype`, the type of
    their elements, and a sequence, a numpy array, or (for nested arrays) a list of (etype, items) pairs."""
    vtype = ValueType(vtype)
    if vtype == ValueType.STRING:
        b = v.encode("utf-8", "surrogateescape") if isinstance(v, str) else bytes(v)
        return struct.pack("<Q", len(b)) + b
    if vtype == ValueType.ARRAY:
        etype = ValueType(etype)
        head = struct.pack("<iQ", etype, len(v))
        if etype in _SCALAR and etype != ValueType.BOOL:
            return head + np.asarray(v, dtype=np.dtype(_SCALAR[etype][1]).newbyteorder("<")).tobytes()
        if etype == ValueType.ARRAY:
            return head + b"".join(encode_value(etype, items, sub) for sub, items in v)
        return head + b"".join(encode_value(etype, x) for x in v)
    fmt = _SCALAR[vtype][0]
    return struct.pack(fmt, int(v) if vtype == ValueType.BOOL else v)


def header_kvs(h: GGUFHeader) -> list[tuple[str, int, Any, int | None]]:
    """The metadata of a parsed header as (key, value type, value, element type) entries, in file order, ready
    for `write_gguf` (nested arrays are refused: nothing bankml reads has them)."""
    out = []
    for key, v in h.metadata.items():
        vtype = h.value_types[key]
        etype = h.array_types.get(key) if vtype == ValueType.ARRAY else None
        if etype == ValueType.ARRAY:
            raise GGUFError(f"metadata {key!r} is an array of arrays; the writer does not copy those")
        out.append((key, vtype, v, etype))
    return out


def write_gguf(fh: BinaryIO, kvs, tensors, *, alignment: int = DEFAULT_ALIGNMENT) -> int:
    """Write a GGUF v3 file to the binary file `fh`; returns the bytes written.

    kvs: (key, value type, value, element type or None) entries, in order (`general.alignment` must agree with
    `alignment` if present). tensors: (name, shape in ggml order, GGMLType, data) entries in order, where data
    is a bytes-like object or a callable returning one (called once, when that tensor is written, so that a
    converter holds one tensor at a time)."""
    if alignment <= 0 or alignment & (alignment - 1):
        raise ValueError(f"alignment {alignment} is not a power of 2")
    parts = [GGUF_MAGIC, struct.pack("<IQQ", 3, len(tensors), len(kvs))]
    for key, vtype, v, etype in kvs:
        parts.append(encode_value(ValueType.STRING, key) + struct.pack("<i", vtype) + encode_value(vtype, v, etype))
    offset = 0
    sizes = []
    for name, shape, gtype, _ in tensors:
        gtype = GGMLType(gtype)
        n = 1
        for d in shape:
            n *= d
        blck, tsize = TYPE_LAYOUT[gtype]
        if shape and shape[0] % blck:
            raise ValueError(f"tensor {name!r}: {shape[0]} elements per row is not a multiple of {blck}")
        size = n // blck * tsize
        parts.append(encode_value(ValueType.STRING, name) + struct.pack("<I", len(shape))
                     + b"".join(struct.pack("<q", d) for d in shape) + struct.pack("<iQ", gtype, offset))
        sizes.append(size)
        offset += size + (-size) % alignment
    head = b"".join(parts)
    if tensors:
        head += b"\0" * ((-len(head)) % alignment)
    fh.write(head)
    written = len(head)
    for (name, _, _, data), size in zip(tensors, sizes):
        buf = memoryview(data() if callable(data) else data).cast("B")
        if buf.nbytes != size:
            raise ValueError(f"tensor {name!r}: {buf.nbytes} bytes of data, its shape and type need {size}")
        fh.write(buf)
        pad = (-size) % alignment
        fh.write(b"\0" * pad)
        written += size + pad
    return written
