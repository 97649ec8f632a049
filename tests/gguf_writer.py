"""A tiny GGUF writer for the tests: small synthetic files, well-formed or deliberately broken.

Values are given with their GGUF type: `(ValueType.UINT32, 7)`, `(ValueType.STRING, "x")`, and arrays as
`(ValueType.ARRAY, (element_type, [items]))`, where an array of arrays nests the same way:
`(ValueType.ARRAY, (ValueType.ARRAY, [(ValueType.UINT8, [1, 2]), ...]))`.
Every count and offset can be overridden, so the tests can write the lies a corrupt file tells.
"""

from __future__ import annotations

import struct

import numpy as np

from bankml.models.gguf import TYPE_LAYOUT, GGMLType, GGUFHeader, ValueType, encode_value


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
    """The bytes of one value of type `vtype` (without its type tag); an array is (element type, items)."""
    if vtype == ValueType.ARRAY:
        etype, items = v
        return encode_value(vtype, items, etype)
    return encode_value(vtype, v)


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
        body = ((np.arange(running, dtype=np.uint64) * 7 + 3) & 0xFF).astype(np.uint8).tobytes()
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


TINY_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tiny_llama(*, n_embd: int = 64, n_head: int = 4, n_head_kv: int = 2, n_ff: int = 128, n_layer: int = 2,
               types: dict | None = None, kvs: dict | None = None, drop: tuple = (), extra_tensors=(),
               shapes: dict | None = None, **kw) -> bytes:
    """A small llama-architecture GGUF file that bankml's guard plays (F32 weights, a 'gpt2' tokenizer with
    pre 'smollm' and a chat template). `types` / `shapes` override a tensor's type or shape by name, `kvs`
    adds or replaces metadata (key -> (vtype, value)), `drop` removes metadata keys or tensors by name."""
    V = ValueType
    tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "a", "b", "ab", "\u0120", "\u0120a"]
    meta = {
        "general.architecture": (V.STRING, "llama"),
        "general.name": (V.STRING, "tiny"),
        "llama.context_length": (V.UINT32, 256),
        "llama.embedding_length": (V.UINT32, n_embd),
        "llama.block_count": (V.UINT32, n_layer),
        "llama.feed_forward_length": (V.UINT32, n_ff),
        "llama.attention.head_count": (V.UINT32, n_head),
        "llama.attention.head_count_kv": (V.UINT32, n_head_kv),
        "llama.rope.freq_base": (V.FLOAT32, 10000.0),
        "llama.attention.layer_norm_rms_epsilon": (V.FLOAT32, 1e-5),
        "llama.rope.dimension_count": (V.UINT32, n_embd // n_head),
        "tokenizer.ggml.model": (V.STRING, "gpt2"),
        "tokenizer.ggml.pre": (V.STRING, "smollm"),
        "tokenizer.ggml.tokens": (V.ARRAY, (V.STRING, tokens)),
        "tokenizer.ggml.token_type": (V.ARRAY, (V.INT32, [3, 3, 3, 1, 1, 1, 1, 1])),
        "tokenizer.ggml.merges": (V.ARRAY, (V.STRING, ["a b", "\u0120 a"])),
        "tokenizer.ggml.bos_token_id": (V.UINT32, 1),
        "tokenizer.ggml.eos_token_id": (V.UINT32, 2),
        "tokenizer.chat_template": (V.STRING, TINY_TEMPLATE),
    }
    meta.update(kvs or {})
    head = n_embd // n_head
    ts = [("token_embd.weight", (n_embd, len(tokens))), ("output_norm.weight", (n_embd,))]
    for i in range(n_layer):
        ts += [(f"blk.{i}.attn_norm.weight", (n_embd,)), (f"blk.{i}.attn_q.weight", (n_embd, head * n_head)),
               (f"blk.{i}.attn_k.weight", (n_embd, head * n_head_kv)),
               (f"blk.{i}.attn_v.weight", (n_embd, head * n_head_kv)),
               (f"blk.{i}.attn_output.weight", (head * n_head, n_embd)), (f"blk.{i}.ffn_norm.weight", (n_embd,)),
               (f"blk.{i}.ffn_gate.weight", (n_embd, n_ff)), (f"blk.{i}.ffn_down.weight", (n_ff, n_embd)),
               (f"blk.{i}.ffn_up.weight", (n_embd, n_ff))]
    ts += list(extra_tensors)
    types, shapes = types or {}, shapes or {}
    tensors = [(n, shapes.get(n, s), types.get(n, GGMLType.F32)) for n, s in ts if n not in drop]
    return gguf([(k, vt, v) for k, (vt, v) in meta.items() if k not in drop], tensors, **kw)


# --- seeded mutations, shared by testing/record_gguf.py and tests/test_gguf.py --------------------------------

INTERESTING_U64 = [0, 1, 2, 3, 12, 31, 32, 63, 64, 255, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**62,
                   2**63 - 1, 2**63, 2**64 - 1]
INTERESTING_U32 = [0, 1, 4, 9, 13, 43, 64, 65, 2**31, 2**32 - 1]


def mutate(base: bytes, seed: int) -> bytes:
    """One to three seeded mutations of `base` (bit flips, bytes, interesting u32/u64 values, cuts, deletions,
    insertions), most near the front where counts, keys and types are. The same seed gives the same bytes."""
    import random

    rng = random.Random(seed)
    b = bytearray(base)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["flip", "byte", "u64", "u32", "cut", "delete", "insert"])
        i = min(int(rng.random() ** 3 * len(b)), max(len(b) - 1, 0))
        if kind == "flip" and b:
            b[i] ^= 1 << rng.randrange(8)
        elif kind == "byte" and b:
            b[i] = rng.randrange(256)
        elif kind == "u64":
            b[i:i + 8] = struct.pack("<Q", rng.choice(INTERESTING_U64))
        elif kind == "u32":
            b[i:i + 4] = struct.pack("<I", rng.choice(INTERESTING_U32))
        elif kind == "cut":
            del b[int(rng.random() * len(b)):]
        elif kind == "delete":
            del b[i:i + rng.randint(1, 16)]
        elif kind == "insert":
            b[i:i] = bytes([rng.randrange(256)]) * rng.randint(1, 16)
    return bytes(b)


def oracle_cases(real_headers: list[GGUFHeader]) -> list[tuple[str, bytes]]:
    """The files whose gguf.cpp verdict (accepted or refused by gguf_init_from_buffer) is recorded in
    tests/oracle/gguf/: hand-made malformations, and seeded mutations of compact copies of the real headers
    (padded to the data section, which gguf.cpp does not read when asked for the header only)."""
    V, T = ValueType, GGMLType
    good = [("general.architecture", V.STRING, "llama"), ("a.u32", V.UINT32, 7)]
    two = [("a", (32, 2), T.Q8_0), ("b", (3,), T.F32)]
    cases = [
        ("well-formed", gguf(good, two)),
        ("v2", gguf(good, two, version=2)),
        ("no tensors", gguf(good)),
        ("empty tensor name", gguf(good, [("", (4,), T.F32)])),
        ("zero-size tensor", gguf(good, [("z", (0, 3), T.F32), ("b", (3,), T.F32)])),
        ("bad magic", gguf(good, two, magic=b"GGML")),
        ("version 0", gguf(good, two, version=0)),
        ("version 1", gguf(good, two, version=1)),
        ("version 4", gguf(good, two, version=4)),
        ("byte-swapped version", gguf(good, two, version=0x03000000)),
        ("negative kv count", gguf(good, two, n_kv=-1)),
        ("kv count too large", gguf(good, two, n_kv=1000)),
        ("tensor count too large", gguf(good, two, n_tensors=1000)),
        ("empty key", gguf([("", V.UINT8, 1)])),
        ("duplicate key", gguf([("k", V.UINT8, 1), ("k", V.UINT8, 2)])),
        ("unknown value type", gguf(n_kv=1, raw_kvs=u64(1) + b"k" + i32(13) + bytes(8))),
        ("array of arrays", gguf([("n", V.ARRAY, (V.ARRAY, [(V.UINT8, [1])]))])),
        ("string over 1 GiB", gguf(n_kv=1, raw_kvs=u64(2**30 + 1) + b"k" + bytes(16))),
        ("array over 2^30 elements", gguf(n_kv=1, raw_kvs=u64(1) + b"a" + i32(9) + i32(0) + u64(2**30 + 1)
                                          + bytes(16))),
        ("alignment 64", gguf([("general.alignment", V.UINT32, 64)], two, alignment=64)),
        ("alignment 48", gguf([("general.alignment", V.UINT32, 48)], two, alignment=48)),
        ("alignment 0", gguf([("general.alignment", V.UINT32, 0)], two)),
        ("alignment uint64", gguf([("general.alignment", V.UINT64, 32)], two)),
        ("duplicate tensor", gguf(good, [("a", (4,), T.F32), ("a", (4,), T.F32)])),
        ("name of 63 bytes", gguf(good, [("x" * 63, (4,), T.F32)])),
        ("name of 64 bytes", gguf(good, [("x" * 64, (4,), T.F32)])),
        ("5 dimensions", gguf(good, [("t", (1, 1, 1, 1, 1), T.F32, 0)], data=False)),
        ("negative dimension", gguf(good, [("t", (-3,), T.F32, 0)], data=False)),
        ("2^63 elements", gguf(good, [("t", (2**62, 4), T.F32, 0)], data=False)),
        ("bytes overflow", gguf(good, [("t", (2**61, 2), T.F64, 0)], data=False)),
        ("row not a block multiple", gguf(good, [("t", (33,), T.Q4_0, 0)], data=False)),
        ("removed type 4", gguf(good, [("t", (32,), 4, 0)], data=False)),
        ("type 43", gguf(good, [("t", (32,), 43, 0)], data=False)),
        ("misaligned offset", gguf(good, [("a", (4,), T.F32, 0), ("b", (4,), T.F32, 36)])),
        ("gap between tensors", gguf(good, [("a", (4,), T.F32, 0), ("b", (4,), T.F32, 64)])),
        ("tensors out of order", gguf(good, [("a", (8,), T.F32, 32), ("b", (8,), T.F32, 0)])),
        ("offset overflow", gguf(good, [("t", (64,), T.F32, 2**64 - 32)], data=False)),
        ("header only, data start past the end", gguf(good, two, data=False)),
    ]
    for k, h in enumerate(real_headers):
        base = from_header(h, max_items=12, max_tensors=40)
        base += b"\0" * ((-len(base)) % h.alignment)
        cases.append((f"real header {k}", base))
        for seed in range(300):
            cases.append((f"real header {k} mutation {seed}", mutate(base, seed)))
    return cases
