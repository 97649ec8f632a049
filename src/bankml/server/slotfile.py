"""Slot files: llama-server b11192's sequence-state file, byte for byte, and bankml's checksum trailer after it.

    geom = Geometry.of(cache, n_stream=1, stream=0, seq_id=0)  # the KV layout of the slot's cache
    data, n_written = encode(tokens, cache.save(), geom)      # the file's bytes; n_written: llama-server's count
    f = parse(data, geom)             # SlotFile(tokens, state, n_read, checked), or it raises SlotFileError

Owns: the layout llama_state_seq_save_file writes (src/llama-context.cpp:3326, b11192) and the structural checks
its reader makes (llama-context.cpp:3272, src/llama-kv-cache.cpp:2125 state_read .. 2640 state_read_data), the
token list server_tokens::serialize packs into it (tools/server/server-common.cpp:570), and bankml's trailer.
Must not know: HTTP, slots, the engine (a Geometry is four numbers and a type id).

The layout (all little-endian):

    u32 magic 'ggsq' (0x67677371), u32 version 3, u32 n_packed, i32 packed[n_packed]
        packed: -1 (LLAMA_TOKEN_NULL, the marker), 1 (the tokens-state version), u32 n, i32 tokens[n],
                u32 0 (no media), padded to whole i32 (an older file: the plain token list)
    u32 n_stream, then per stream: u32 cell_count, and when it is not 0:
        cell_count x (i32 pos, u32 n_seq_id == 1, i32 seq_id)
        u32 v_trans (0: V rows, as with flash attention), u32 n_layer
        n_layer x (i32 K type, u64 K row bytes, K rows[cell_count]); n_layer x (i32 V type, u64 V row bytes, V rows)
    bankml's trailer (48 bytes): b"BKMLSUM1", u64 the bytes before it, sha256 of those bytes

llama-server reads what the state says and ignores anything after it (llama-context.cpp:3311-3320: the state is
read up to where it ends, file.tell() is the answer), so a file with the trailer restores there unchanged, and
n_read / n_written are the bytes before the trailer, llama-server's numbers. The trailer sits where the state
ends, not wherever the file ends: bankml refuses bytes after the state unless they are a trailer whose sha256
matches (a file llama-server wrote has no such bytes, and passes on its structure alone).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

import numpy as np

MAGIC = 0x67677371            # LLAMA_FILE_MAGIC_GGSQ (include/llama.h:43)
VERSION = 3                   # LLAMA_STATE_SEQ_VERSION (include/llama.h:49)
TOKEN_NULL = -1               # LLAMA_TOKEN_NULL: server_tokens' format marker
TOKENS_STATE_VERSION = 1      # SERVER_TOKENS_STATE_VERSION (server-common.cpp:286)
TRAILER_TAG = b"BKMLSUM1"
TRAILER_SIZE = len(TRAILER_TAG) + 8 + 32


class SlotFileError(ValueError):
    """A file that is not a slot state this cache can take; the message names what is wrong."""


@dataclass(frozen=True)
class Geometry:
    """What a slot file of a cache must match: the layer count, the ggml type of K and V (F16 1, Q8_0 8), the row
    bytes of one cell's K and V in one layer, the stream count llama-server's cache has (1 unified, else one per
    slot) and the slot's stream and sequence id (what llama-server writes as the cells' seq_id)."""
    n_layer: int
    ggml_type: int
    k_row: int
    v_row: int
    n_ctx: int
    n_stream: int = 1
    stream: int = 0
    seq_id: int = 0

    @classmethod
    def of(cls, cache, n_stream: int = 1, stream: int = 0, seq_id: int = 0) -> "Geometry":
        n_layer, ggml_type, k_row, v_row = cache.layout()
        return cls(n_layer, ggml_type, k_row, v_row, cache.n_ctx, n_stream, stream, seq_id)


@dataclass
class SlotFile:
    tokens: list[int]
    state: bytes              # the cache's save() layout: per layer, K rows then V rows of cells 0 .. n-1
    n_read: int               # llama-server's n_read: the bytes before the trailer
    checked: bool             # a trailer was there and its sha256 matched


def _packed(tokens: list[int]) -> np.ndarray:
    """server_tokens::serialize of a text-only prompt."""
    n = len(tokens)
    out = np.empty(n + 4, dtype="<i4")
    out[0], out[1], out[2] = TOKEN_NULL, TOKENS_STATE_VERSION, n
    out[3:3 + n] = tokens
    out[3 + n] = 0
    return out


class State(bytes):
    """A parsed file's K and V rows (per layer, K rows then V rows, in the file's cell order); `positions` the
    position of each cell when they are not 0 .. n-1 in order (what KVCache.restore reads)."""
    positions: tuple | None = None


def encode(tokens: list[int], state: bytes, geom: Geometry) -> tuple[bytes, int]:
    """The file of a slot holding `tokens` and the cells of `state` (KVCache.save(): the used cells in cell order,
    at `state.positions`, or 0 .. n-1 when it has none), with the trailer; and llama-server's n_written (the
    length without the trailer)."""
    rk, rv, nl = geom.k_row, geom.v_row, geom.n_layer
    per = rk + rv
    if len(state) % (nl * per):
        raise ValueError(f"{len(state)} bytes are not a state of this geometry")
    n = len(state) // (nl * per)
    packed = _packed(tokens)
    parts = [struct.pack("<III", MAGIC, VERSION, packed.size), packed.tobytes(), struct.pack("<I", geom.n_stream)]
    view = memoryview(state)
    for s in range(geom.n_stream):
        cells = n if s == geom.stream else 0
        parts.append(struct.pack("<I", cells))
        if cells == 0:
            continue
        meta = np.empty((n, 3), dtype="<i4")
        positions = getattr(state, "positions", None)     # after a context shift, cell != position
        meta[:, 0] = np.arange(n) if positions is None else positions
        meta[:, 1] = 1
        meta[:, 2] = geom.seq_id
        parts += [meta.tobytes(), struct.pack("<II", 0, nl)]
        for lay in range(nl):
            base = lay * n * per
            parts += [struct.pack("<iQ", geom.ggml_type, rk), view[base:base + n * rk]]
        for lay in range(nl):
            base = lay * n * per + n * rk
            parts += [struct.pack("<iQ", geom.ggml_type, rv), view[base:base + n * rv]]
    body = b"".join(parts)
    return body + trailer(body), len(body)


def max_size(geom: Geometry) -> int:
    """The largest file parse() can accept for this geometry (every cell of the slot, its tokens, the trailer): a
    larger file is refused from its size, before it is read."""
    n, nl = geom.n_ctx, geom.n_layer
    return (12 + 4 * (n + 4) + 4 + 4 * geom.n_stream + 12 * n + 8 + 24 * nl + n * nl * (geom.k_row + geom.v_row)
            + TRAILER_SIZE)


def trailer(body: bytes) -> bytes:
    return TRAILER_TAG + struct.pack("<Q", len(body)) + hashlib.sha256(body).digest()


class _Reader:
    """Reads in order, never past the end: a read that would is a SlotFileError naming the part."""

    def __init__(self, data: bytes, end: int):
        self.mv = memoryview(data)
        self.end = end
        self.pos = 0

    def take(self, n: int, what: str) -> memoryview:
        if n < 0 or n > self.end - self.pos:
            raise SlotFileError(f"invalid slot save file: the file ends inside the {what} (byte {self.pos}: "
                                f"{n} bytes needed, {self.end - self.pos} left)")
        out = self.mv[self.pos:self.pos + n]
        self.pos += n
        return out

    def u32(self, what: str) -> int:
        return struct.unpack("<I", self.take(4, what))[0]

    def i32(self, what: str) -> int:
        return struct.unpack("<i", self.take(4, what))[0]

    def u64(self, what: str) -> int:
        return struct.unpack("<Q", self.take(8, what))[0]


def _has_trailer(data: bytes) -> bool:
    """The file ends in a trailer that says it covers every byte before it (its sha256 still to be checked)."""
    if len(data) < TRAILER_SIZE:
        return False
    t = data[-TRAILER_SIZE:]
    return t[:8] == TRAILER_TAG and struct.unpack("<Q", t[8:16])[0] == len(data) - TRAILER_SIZE


def _tokens(packed: np.ndarray) -> list[int]:
    """server_tokens::deserialize (server-common.cpp:592) of a text-only prompt; llama-server's own messages."""
    if packed.size == 0 or packed[0] != TOKEN_NULL:
        return packed.tolist()                     # a plain token list, as older versions wrote
    if packed.size < 2 or int(packed[1]) != TOKENS_STATE_VERSION:
        raise SlotFileError("Unsupported server tokens state version")
    words = packed.view("<u4")
    if packed.size < 3:
        raise SlotFileError("invalid slot save file: the token list has no length")
    n = int(words[2])
    if n > packed.size - 3:
        raise SlotFileError(f"invalid slot save file: the token list says {n} tokens, the file holds at most "
                            f"{packed.size - 3}")
    if 3 + n >= packed.size:
        raise SlotFileError("invalid slot save file: the token list has no media count")
    if int(words[3 + n]) != 0:
        raise SlotFileError("Cannot restore media tokens without an mmproj")
    if packed.size - (4 + n) > 0 and packed[4 + n:].any():
        raise SlotFileError(f"invalid slot save file: {packed.size - (4 + n)} words after the token list")
    return packed[3:3 + n].tolist()


def parse(data: bytes, geom: Geometry) -> SlotFile:
    """The tokens and the cells of a slot file, every part checked before anything is returned (the caller loads
    nothing from a file this refuses). Raises SlotFileError."""
    checked = _has_trailer(data)
    end = len(data)
    if checked:
        end -= TRAILER_SIZE
        if hashlib.sha256(memoryview(data)[:end]).digest() != data[-32:]:
            raise SlotFileError("invalid slot save file: checksum mismatch (the sha256 bankml wrote after the "
                                "state does not match the file's bytes)")
    r = _Reader(data, end)
    if end < 8:
        raise SlotFileError(f"invalid slot save file: {end} bytes, too short for a header")
    magic, version = r.u32("header"), r.u32("header")
    if magic != MAGIC or version != VERSION:           # llama-context.cpp:3280
        raise SlotFileError(f"invalid slot save file: unknown (magic, version): {magic:08x}, {version:08x}")
    n_packed = r.u32("token count")
    n_max = (end - r.pos) // 4                          # llama-context.cpp:3291
    if n_packed > n_max:
        raise SlotFileError(f"invalid slot save file: token count {n_packed} exceeds the file size ({n_max})")
    packed = np.frombuffer(r.take(4 * n_packed, "tokens"), dtype="<i4")

    n_stream = r.u32("stream count")
    if n_stream != geom.n_stream:                       # llama-kv-cache.cpp:2155
        raise SlotFileError(f"invalid slot save file: n_stream mismatch ({n_stream}, this server has "
                            f"{geom.n_stream})")
    state = b""
    n_cells = 0
    seen = False
    rk, rv, nl = geom.k_row, geom.v_row, geom.n_layer
    for s in range(n_stream):
        cells = r.u32(f"cell count of stream {s}")
        if cells == 0:
            continue
        if seen:
            raise SlotFileError("invalid slot save file: cells in more than one stream")
        seen = True
        if cells > geom.n_ctx:
            raise SlotFileError(f"invalid slot save file: not enough cells in kv cache ({cells} > {geom.n_ctx})")
        meta = np.frombuffer(r.take(12 * cells, "cell list"), dtype="<i4").reshape(cells, 3)
        if (meta[:, 1] != 1).any():                     # llama-kv-cache.cpp:2365
            raise SlotFileError("invalid slot save file: invalid seq_id-agnostic kv cell")
        pos = meta[:, 0]
        order = np.argsort(pos, kind="stable")
        if not np.array_equal(pos[order], np.arange(cells)):
            raise SlotFileError(f"invalid slot save file: the cells' positions are not 0 .. {cells - 1}")
        v_trans, n_layer = r.u32("layer header"), r.u32("layer header")
        if n_layer != nl:                               # llama-kv-cache.cpp:2543
            raise SlotFileError(f"invalid slot save file: mismatched layer count ({n_layer} instead of {nl})")
        if v_trans != 0:                                # llama-kv-cache.cpp:2553
            raise SlotFileError("invalid slot save file: incompatible V transposition")
        rows = {}
        for part, row in (("K", rk), ("V", rv)):
            for lay in range(nl):
                what = f"{part} rows of layer {lay}"
                t = r.i32(what)
                if t != geom.ggml_type:
                    raise SlotFileError(f"invalid slot save file: mismatched {part} type ({geom.ggml_type} != {t}, "
                                        f"layer {lay})")
                size = r.u64(what)
                if size != row:
                    raise SlotFileError(f"invalid slot save file: mismatched {part} row size ({row} != {size}, "
                                        f"layer {lay})")
                rows[part, lay] = r.take(cells * row, what)
        # the cells stay in the file's order (state_read_meta puts them in cells 0 .. n-1 in that order, at their
        # positions): a state whose positions are not 0 .. n-1 in order says so in `positions`
        out = []
        for lay in range(nl):
            for part, row in (("K", rk), ("V", rv)):
                out.append(rows[part, lay])
        state = State(b"".join(out))
        if not bool((order == np.arange(cells)).all()):
            state.positions = tuple(int(p) for p in pos)
        n_cells = cells
    if r.pos != end:
        raise SlotFileError(f"invalid slot save file: {end - r.pos} bytes after the slot state are not a "
                            "bankml checksum")
    tokens = _tokens(packed)
    if len(tokens) != n_cells:
        raise SlotFileError(f"invalid slot save file: {len(tokens)} tokens but {n_cells} KV cells")
    return SlotFile(tokens, state, end, checked)
