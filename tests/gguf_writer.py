"""A tiny GGUF writer for the tests: small synthetic files, well-formed or deliberately broken.

Values are given with their GGUF type: `(ValueType.UINT32, 7)`, `(ValueType.STRING, "x")`, and arrays as
`(ValueType.ARRAY, (element_type, [items]))`, where an array of arrays nests the same way:
`(ValueType.ARRAY, (ValueType.ARRAY, [(ValueType.UINT8, [1, 2]), ...]))`.
Every count and offset can be overridden, so the tests can write the lies a corrupt file tells.
"""

from __future__ import annotations

import struct

import numpy as np

from bankml.gguf import _SCALAR, TYPE_LAYOUT, GGMLType, GGUFHeader, ValueType


def u32(v: int) -> bytes:
    return struct.pack("<I", v)


def i32(v: int) -> bytes:
    return struct.pack("<i", v)


def u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def string(s: str | bytes) -> bytes:
    b = s.encode("utf-8", "surrogateescape") if isinstance(s, str) else s
    return u64(len(b)) + b


def value(vtype: int, v) -> bytes:
    """The bytes of one value of type `vtype` (without its type tag)."""
    if vtype == ValueType.STRING:
        return string(v)
    if vtype == ValueType.ARRAY:
        etype, items = v
        return i32(etype) + u64(len(items)) + b"".join(value(etype, x) for x in items)
    fmt = _SCALAR[ValueType(vtype)][0]
    return struct.pack(fmt, int(v) if vtype == ValueType.BOOL else v)


def kv(key: str | bytes, vtype: int, v) -> bytes:
    return string(key) + i32(vtype) + value(vtype, v)


def tensor_info(name: str | bytes, shape, ggml_type: int, offset: int, n_dims: int | None = None) -> bytes:
    dims = len(shape) if n_dims is None else n_dims
    return string(name) + u32(dims) + b"".join(struct.pack("<q", d) for d in shape) + i32(ggml_type) + u64(offset)


def nbytes(shape, ggml_type: GGMLType) -> int:
    blck, size = TYPE_LAYOUT.get(ggml_type, (1, 1))  # an unknown type (a test's lie) counts as one byte
    n = 1
    for d in shape:
        n *= d
    return n // blck * size


def pad(n: int, alignment: int) -> int:
    return n + (-n) % alignment


def gguf(kvs=(), tensors=(), *, version: int = 3, alignment: int = 32, magic: bytes = b"GGUF",
         n_kv: int | None = None, n_tensors: int | None = None, data: bool | bytes = True,
         raw_kvs: bytes = b"") -> bytes:
    """A GGUF file.

    kvs: (key, vtype, value) triples. tensors: (name, shape, ggml_type) or (name, shape, ggml_type, offset);
    offsets left out are laid out contiguously, each padded to `alignment` (as llama.cpp writes them).
    data: True appends the data section (deterministic bytes), False stops after the header, bytes appends
    those bytes. raw_kvs: bytes appended after the metadata entries (n_kv must then count them).
    """
    out = [magic, u32(version)]
    out.append(struct.pack("<q", len(tensors) if n_tensors is None else n_tensors))
    out.append(struct.pack("<q", len(kvs) if n_kv is None else n_kv))
    out += [kv(*t) for t in kvs]
    out.append(raw_kvs)
    running = 0
    for t in tensors:
        name, shape, gtype = t[:3]
        offset = t[3] if len(t) > 3 else running
        out.append(tensor_info(name, shape, gtype, offset))
        running = pad(offset + nbytes(shape, gtype), alignment)
    head = b"".join(out)
    if data is False:
        return head
    if data is True:
        body = bytes((i * 7 + 3) & 0xFF for i in range(running))
    else:
        body = data
    if tensors:
        head += b"\0" * ((-len(head)) % alignment)
    return head + body


def from_header(h: GGUFHeader, max_items: int | None = None, max_tensors: int | None = None) -> bytes:
    """Write `h` back out as a header (no tensor data), arrays cut to `max_items` elements and the tensor table
    to `max_tensors` entries: a compact copy of a real file's header for fuzzing."""
    kvs = []
    for key, v in h.metadata.items():
        vtype = h.value_types[key]
        if vtype == ValueType.ARRAY:
            etype = h.array_types[key]
            items = v.tolist() if isinstance(v, np.ndarray) else list(v)
            if max_items is not None:
                items = items[:max_items]
            kvs.append((key, vtype, (etype, items)))
        else:
            kvs.append((key, vtype, v))
    ts = list(h.tensors.values())[:max_tensors]
    return gguf(kvs, [(t.name, t.shape, t.type, t.offset) for t in ts], version=h.version,
                alignment=h.alignment, data=False)
