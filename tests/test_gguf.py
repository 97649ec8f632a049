"""bankml.models.gguf: the reader agrees with the `gguf` PyPI package on the real files, refuses every malformed file
with a reason, and survives a fuzzer mutating real headers."""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np
import pytest

import gguf as gguf_pypi
from bankml.models import gguf
from bankml.errors import GGUFError, GGUFTruncated
from bankml.models.gguf import GGMLType, ValueType
from gguf_writer import from_header, gguf as write_gguf, nbytes, u64

V = ValueType
F32, Q4_0, Q4_1, Q8_0 = GGMLType.F32, GGMLType.Q4_0, GGMLType.Q4_1, GGMLType.Q8_0

SCALARS = [
    ("u8", V.UINT8, 255), ("i8", V.INT8, -128), ("u16", V.UINT16, 65535), ("i16", V.INT16, -32768),
    ("u32", V.UINT32, 2**32 - 1), ("i32", V.INT32, -2**31), ("f32", V.FLOAT32, 0.25), ("b", V.BOOL, True),
    ("s", V.STRING, "héllo"), ("u64", V.UINT64, 2**64 - 1), ("i64", V.INT64, -2**63), ("f64", V.FLOAT64, 1e300),
]


def parse(b: bytes, **kw) -> gguf.GGUFHeader:
    return gguf.parse_header(b, len(b), **kw)


def small(**kw) -> bytes:
    # one metadata key and two tensors: the base most refusal tests alter
    return write_gguf([("general.architecture", V.STRING, "llama")],
                      [("a", (32, 2), Q8_0), ("b", (3,), F32)], **kw)


# --- agreement with the gguf PyPI package on the real files ---------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("which", ["smollm2", "gemma3"])
def test_real_files_match_gguf_pypi(which, request):
    path = request.getfixturevalue(f"{which}_path")
    ref = gguf_pypi.GGUFReader(path)
    with gguf.GGUFFile(path) as f:
        h = f.header
        fields = {k: v for k, v in ref.fields.items() if not k.startswith("GGUF.")}
        assert list(h.metadata) == list(fields)
        for key, field in fields.items():
            ours = h.metadata[key]
            theirs = field.contents()
            assert int(h.value_types[key]) == int(field.types[0]), key
            if isinstance(ours, np.ndarray):
                assert int(h.array_types[key]) == int(field.types[-1]), key
                assert ours.tolist() == theirs, key
            else:
                assert ours == theirs, key
        assert h.version == ref.fields["GGUF.version"].contents()
        assert h.alignment == ref.alignment
        assert h.data_offset == ref.data_offset
        assert [t.name for t in ref.tensors] == list(h.tensors)
        for t in ref.tensors:
            ti = h.tensors[t.name]
            assert ti.shape == tuple(int(d) for d in t.shape), t.name
            assert int(ti.type) == int(t.tensor_type), t.name
            assert ti.nbytes == t.n_bytes and ti.n_elements == t.n_elements, t.name
            assert ti.data_offset == t.data_offset, t.name
        # the data: byte-identical views for a sample of tensors
        for t in ref.tensors[:: max(1, len(ref.tensors) // 12)]:
            ours = f.tensor_bytes(t.name)
            assert not ours.flags.writeable
            assert np.array_equal(ours, np.asarray(t.data).reshape(-1).view(np.uint8)), t.name
        # the file ends where llama.cpp's layout says it does
        assert h.data_offset + h.data_size == f.size


def test_type_layout_matches_gguf_pypi():
    # every type both tables know has the same block size and block bytes, but Q8_1: gguf 0.19 on PyPI still
    # has its old 40-byte block (two f32), ggml b11192's block_q8_1 holds two f16 (2 + 2 + 32 = 36 bytes)
    both = [t for t in GGMLType if t.name in gguf_pypi.GGMLQuantizationType.__members__ and t != GGMLType.Q8_1]
    assert len(both) >= 30
    for t in both:
        ref = gguf_pypi.GGML_QUANT_SIZES[gguf_pypi.GGMLQuantizationType[t.name]]
        assert gguf.TYPE_LAYOUT[t] == tuple(ref), t.name
        assert int(gguf_pypi.GGMLQuantizationType[t.name]) == int(t), t.name


# --- well-formed synthetic files ------------------------------------------------------------------------------

@pytest.mark.parametrize("version", [2, 3])
def test_every_scalar_type_round_trips(version):
    h = parse(write_gguf(SCALARS, version=version))
    assert h.version == version
    for key, vtype, v in SCALARS:
        assert h.value_types[key] == vtype
        if vtype == V.FLOAT32:
            assert h.metadata[key] == struct.unpack("<f", struct.pack("<f", v))[0]
        else:
            assert h.metadata[key] == v
    assert h.tensors == {} and h.data_offset == h.header_size


def test_arrays_of_every_type():
    kvs = [(f"arr.{k}", V.ARRAY, (t, [v, v])) for k, t, v in SCALARS]
    kvs.append(("arr.nested", V.ARRAY, (V.ARRAY, [(V.UINT8, [1, 2]), (V.STRING, ["x"])])))
    kvs.append(("arr.empty", V.ARRAY, (V.INT32, [])))
    h = parse(write_gguf(kvs))
    for k, t, v in SCALARS:
        got = h.metadata[f"arr.{k}"]
        assert h.array_types[f"arr.{k}"] == t
        if t == V.STRING:
            assert got == [v, v]
        else:
            assert isinstance(got, np.ndarray) and not got.flags.writeable
            expect = struct.unpack("<f", struct.pack("<f", v))[0] if t == V.FLOAT32 else v
            assert got.tolist() == [expect, expect]
    nested = h.metadata["arr.nested"]
    assert nested[0].tolist() == [1, 2] and nested[1] == ["x"]
    assert h.array_types["arr.nested"] == V.ARRAY
    assert h.metadata["arr.empty"].shape == (0,)


def test_invalid_utf8_is_kept_as_surrogate_escapes():
    h = parse(write_gguf([("k", V.STRING, b"a\xffb")]))
    assert h.metadata["k"].encode("utf-8", "surrogateescape") == b"a\xffb"


def test_tensor_table_and_views(tmp_path):
    data = write_gguf([("general.alignment", V.UINT32, 64)],
                      [("w", (32, 3), Q8_0), ("v", (5, 2), F32), ("z", (0,), F32)], alignment=64)
    p = tmp_path / "t.gguf"
    p.write_bytes(data)
    with gguf.GGUFFile(p) as f:
        h = f.header
        assert h.alignment == 64 and h.data_offset % 64 == 0
        w, v, z = h.tensors["w"], h.tensors["v"], h.tensors["z"]
        assert (w.shape, w.type, w.offset, w.nbytes) == ((32, 3), Q8_0, 0, 3 * 34)
        assert (v.offset, v.nbytes, v.n_elements) == (128, 40, 10)
        assert z.nbytes == 0
        assert h.data_offset + h.data_size == len(data)
        wt = f.tensor("w")
        assert wt.shape == (3, 34) and wt.dtype == np.uint8 and not wt.flags.writeable
        vt = f.tensor("v")
        assert vt.shape == (2, 5) and vt.dtype == np.float32
        raw = np.frombuffer(data, np.uint8, 40, h.data_offset + 128)
        assert np.array_equal(vt.view(np.uint8).reshape(-1), raw)
        assert f.tensor_bytes("z").shape == (0,)
    assert gguf.read_header_file(p, limit=200).tensors.keys() == h.tensors.keys()


# --- every refusal ---------------------------------------------------------------------------------------------

def test_bad_magic():
    with pytest.raises(GGUFError, match="bad magic b'GGML'"):
        parse(small(magic=b"GGML"))


@pytest.mark.parametrize("version, match", [
    (1, "version 1 is no longer supported"), (0, r"unknown GGUF version 0;"), (4, "unknown GGUF version 4"),
    (0x03000000, "byte-swapped")])
def test_unknown_version(version, match):
    with pytest.raises(GGUFError, match=match):
        parse(small(version=version))


def test_truncated_header_at_every_byte():
    # a prefix of a header is always "truncated", with the file size known or not, never another error
    full = small()
    h = parse(full)
    for n in range(h.header_size):
        with pytest.raises(GGUFTruncated):
            gguf.parse_header(full[:n], n)
        with pytest.raises(GGUFTruncated):
            gguf.parse_header(full[:n], None)


def test_truncated_data():
    full = small()
    end = parse(full).data_end  # the last tensor's end; the padding after it is not needed
    parse(full[:end])
    with pytest.raises(GGUFTruncated, match=f"tensor 'b' data ends at byte {end}, past the end of the file"):
        parse(full[:end - 1])
    h = parse(full[:end - 1], check_data=False)
    with pytest.raises(GGUFTruncated, match="past the end"):
        gguf.check_data_fits(h, end - 1)
    # a file cut inside the padding before the data
    head = parse(full).header_size
    with pytest.raises(GGUFTruncated, match="inside the padding"):
        parse(full[:head + 1])


def test_empty_file(tmp_path):
    p = tmp_path / "e.gguf"
    p.write_bytes(b"")
    with pytest.raises(GGUFTruncated, match="empty"):
        gguf.GGUFFile(p)
    with pytest.raises(GGUFTruncated, match="empty"):
        gguf.read_header_file(p)


@pytest.mark.parametrize("field, value, exc, match", [
    ("n_kv", 1000, GGUFTruncated, "1000 metadata entries .* runs past the end of the file"),
    ("n_tensors", 1000, GGUFTruncated, "a table of 1000 tensors .* runs past the end"),
    ("n_kv", 2**60, GGUFError, "cannot be right"),
    ("n_tensors", 2**62, GGUFError, "cannot be right"),
    ("n_kv", -1, GGUFError, "metadata count -1 is negative"),
    ("n_tensors", -5, GGUFError, "tensor count -5 is negative"),
])
def test_counts_past_the_end(field, value, exc, match):
    with pytest.raises(exc, match=match):
        parse(small(**{field: value}))


def test_lengths_past_the_end():
    # a string length that fits no file, one that fits a bigger file, and an array length likewise
    with pytest.raises(GGUFError, match="gguf.cpp refuses strings over"):
        parse(write_gguf(n_kv=1, raw_kvs=u64(2**31) + b"key" + bytes(16)))
    with pytest.raises(GGUFTruncated, match="metadata key 0 .*runs past the end of the file"):
        parse(write_gguf(n_kv=1, raw_kvs=u64(500) + b"key" + bytes(16)))
    def array_of(n):  # an array of uint32 that claims n elements and holds one
        return u64(1) + b"a" + struct.pack("<ii", V.ARRAY, V.UINT32) + u64(n) + struct.pack("<I", 5)

    assert parse(write_gguf(n_kv=1, raw_kvs=array_of(1))).metadata["a"].tolist() == [5]
    with pytest.raises(GGUFError, match="refuses more than"):
        parse(write_gguf(n_kv=1, raw_kvs=array_of(2**31)))
    lie = array_of(2**20)
    with pytest.raises(GGUFTruncated, match="array of 1048576 elements .* runs past the end"):
        parse(write_gguf(n_kv=1, raw_kvs=lie))


def test_64_bit_overflow():
    with pytest.raises(GGUFError, match="2\\^63 elements or more"):
        parse(write_gguf(tensors=[("t", (2**62, 4), F32, 0)], data=False))
    with pytest.raises(GGUFError, match="size in bytes overflows 64 bits"):
        parse(write_gguf(tensors=[("t", (2**61, 2), GGMLType.F64, 0)], data=False))
    with pytest.raises(GGUFError, match="offset plus size overflows 64 bits"):
        parse(write_gguf(tensors=[("t", (64,), F32, 2**64 - 32)], data=False))


def test_unknown_value_type():
    with pytest.raises(GGUFError, match="'k' has unknown value type 13"):
        parse(write_gguf(n_kv=1, raw_kvs=u64(1) + b"k" + struct.pack("<i", 13) + bytes(8)))
    with pytest.raises(GGUFError, match="element type has unknown value type 99"):
        parse(write_gguf(n_kv=1, raw_kvs=u64(1) + b"k" + struct.pack("<ii", 9, 99) + u64(0)))


@pytest.mark.parametrize("t", [4, 5, 31, 36, 43, 1000, -1])
def test_unknown_tensor_type(t):
    with pytest.raises(GGUFError, match=f"tensor 'x' has unknown ggml type {t}"):
        parse(write_gguf(tensors=[("x", (32,), t, 0)], data=False))


def _nested(depth: int):
    v = (V.UINT8, [7])
    for _ in range(depth - 1):
        v = (V.ARRAY, [v])
    return v


def test_nesting_deeper_than_64():
    h = parse(write_gguf([("deep", V.ARRAY, _nested(64))]))
    x = h.metadata["deep"]
    for _ in range(63):
        x = x[0]
    assert x.tolist() == [7]
    with pytest.raises(GGUFError, match="arrays nested deeper than 64"):
        parse(write_gguf([("deep", V.ARRAY, _nested(65))]))


def test_duplicate_tensor_names():
    with pytest.raises(GGUFError, match="duplicate tensor name 'a'"):
        parse(write_gguf(tensors=[("a", (4,), F32), ("a", (4,), F32)]))


def test_duplicate_and_empty_keys():
    with pytest.raises(GGUFError, match="duplicate metadata key 'k'"):
        parse(write_gguf([("k", V.UINT8, 1), ("k", V.UINT8, 2)]))
    with pytest.raises(GGUFError, match="metadata key 0 is empty"):
        parse(write_gguf([("", V.UINT8, 1)]))


def test_misaligned_offset():
    with pytest.raises(GGUFError, match="tensor 'b' offset 36 is not a multiple of the alignment 32"):
        parse(write_gguf(tensors=[("a", (4,), F32, 0), ("b", (4,), F32, 36)]))


@pytest.mark.parametrize("vtype, value, match", [
    (V.UINT32, 0, "alignment 0 is not a power of 2"), (V.UINT32, 48, "alignment 48 is not a power of 2"),
    (V.UINT64, 32, "must be a uint32, not uint64"), (V.STRING, "32", "must be a uint32, not string")])
def test_bad_alignment(vtype, value, match):
    with pytest.raises(GGUFError, match=match):
        parse(write_gguf([("general.alignment", vtype, value)]))


@pytest.mark.parametrize("tensor, match", [
    (("t", (1, 1, 1, 1, 1), F32, 0), "has 5 dimensions; at most 4"),
    (("t", (-3,), F32, 0), "dimension 0 is negative"),
    (("t", (33,), Q4_0, 0), "33 elements per row, not a multiple of its block size 32"),
    (("x" * 64, (1,), F32, 0), "64 bytes long; ggml allows at most 63"),
])
def test_bad_tensor_info(tensor, match):
    with pytest.raises(GGUFError, match=match):
        parse(write_gguf(tensors=[tensor], data=False))


# --- fuzzing: mutated real headers -----------------------------------------------------------------------------

FUZZ_EXAMPLES = 10_000


@pytest.fixture(scope="module")
def fuzz_bases(smollm2_path, gemma3_path):
    # compact copies of the real headers (every key, arrays cut to 12 items; the whole SmolLM2 tensor table,
    # Gemma's first 40 entries) and the real files' first 4 KiB
    bases = []
    for p, max_tensors in ((smollm2_path, None), (gemma3_path, 40)):
        h = gguf.read_header_file(p)
        bases.append(from_header(h, max_items=12, max_tensors=max_tensors))
        with open(p, "rb") as fh:
            bases.append(fh.read(4096))
    gguf.parse_header(bases[0], None)  # the compact copies are themselves well-formed
    gguf.parse_header(bases[2], None)
    return bases


_INTERESTING_U64 = [0, 1, 2, 3, 12, 31, 32, 63, 64, 255, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**62,
                    2**63 - 1, 2**63, 2**64 - 1]


@pytest.mark.slow
def test_fuzz_mutated_real_headers(fuzz_bases):
    hypothesis = pytest.importorskip("hypothesis")
    st = hypothesis.strategies
    from hypothesis import HealthCheck, given, settings

    mutation = st.one_of(
        st.tuples(st.just("flip"), st.floats(0, 1), st.integers(0, 7)),
        st.tuples(st.just("byte"), st.floats(0, 1), st.integers(0, 255)),
        st.tuples(st.just("u64"), st.floats(0, 1), st.sampled_from(_INTERESTING_U64)),
        st.tuples(st.just("u32"), st.floats(0, 1), st.sampled_from([0, 1, 4, 9, 13, 43, 64, 65, 2**31, 2**32 - 1])),
        st.tuples(st.just("cut"), st.floats(0, 1), st.just(0)),
        st.tuples(st.just("delete"), st.floats(0, 1), st.integers(1, 16)),
        st.tuples(st.just("insert"), st.floats(0, 1), st.integers(1, 16)),
    )
    # most positions near the front, where the counts, keys and types are
    front = st.floats(0, 1).map(lambda x: x ** 3)
    runs = {"n": 0, "parsed": 0, "refused": 0}

    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(base=st.integers(0, len(fuzz_bases) - 1), muts=st.lists(mutation, min_size=1, max_size=4),
           where=front, known_size=st.booleans())
    def run(base, muts, where, known_size):
        b = bytearray(fuzz_bases[base])
        for kind, pos, arg in muts:
            i = min(int((pos * where if kind != "cut" else pos) * len(b)), max(len(b) - 1, 0))
            if kind == "flip" and b:
                b[i] ^= 1 << arg
            elif kind == "byte" and b:
                b[i] = arg
            elif kind == "u64":
                b[i:i + 8] = struct.pack("<Q", arg)
            elif kind == "u32":
                b[i:i + 4] = struct.pack("<I", arg)
            elif kind == "cut":
                del b[i:]
            elif kind == "delete":
                del b[i:i + arg]
            elif kind == "insert":
                b[i:i] = bytes([(i * 31 + arg) & 0xFF]) * arg
        runs["n"] += 1
        try:
            h = gguf.parse_header(bytes(b), len(b) if known_size else None)
        except GGUFError as e:
            runs["refused"] += 1
            assert e.reason
            return
        runs["parsed"] += 1
        # what parses is self-consistent
        assert h.version in (2, 3)
        assert h.data_offset >= h.header_size and h.data_offset % h.alignment == 0 or not h.tensors
        for t in h.tensors.values():
            assert t.nbytes == nbytes(t.shape, t.type) and t.offset % h.alignment == 0
            if known_size:
                assert t.data_offset + t.nbytes <= len(b)

    run()
    assert runs["n"] >= FUZZ_EXAMPLES, runs
    assert runs["parsed"] > 0 and runs["refused"] > 0, runs


# --- the oracle: what llama.cpp's gguf.cpp accepts ---------------------------------------------------------------

def _accepted_like_gguf_cpp(data: bytes) -> bool:
    # gguf.cpp reading a header (no_alloc, no ggml context): the reader, then what bankml.models.verify knows gguf.cpp
    # refuses beyond it (arrays of arrays, data not laid out contiguously), the data section's start within
    # the bytes, and tensor names compared only up to a NUL byte (ggml keeps names as C strings)
    from bankml.models.verify import gguf_cpp_refusals

    try:
        h = gguf.parse_header(data, len(data), check_data=False)
    except GGUFError:
        return False
    if gguf_cpp_refusals(h) or (h.tensors and h.data_offset > len(data)):
        return False
    cut = [n.split("\0")[0] for n in h.tensors]
    return len(set(cut)) == len(cut)


@pytest.mark.oracle
@pytest.mark.slow
def test_accepts_exactly_what_gguf_cpp_accepts(smollm2_path, gemma3_path, oracle_dir):
    from gguf_writer import oracle_cases

    rec = json.loads((oracle_dir / "gguf" / "gguf_cpp_verdicts.json").read_text())["cases"]
    cases = oracle_cases([gguf.read_header_file(p) for p in (smollm2_path, gemma3_path)])
    assert [name for name, _ in cases] == [r["case"] for r in rec]
    disagree = []
    for (name, data), r in zip(cases, rec):
        assert hashlib.sha256(data).hexdigest()[:16] == r["sha256"], name  # the same bytes as recorded
        if _accepted_like_gguf_cpp(data) != r["accepted"]:
            disagree.append((name, r["accepted"]))
    assert disagree == []
    assert 30 < sum(r["accepted"] for r in rec) < len(rec) - 30
