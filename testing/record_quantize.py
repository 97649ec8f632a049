"""Record what ggml-base b11192 (the oracle build's libggml-base.so) makes of the converter's inputs:
`ggml_quantize_chunk` (the reference encoders llama-quantize uses) on tests/quantize_cases.encode_cases, the
type traits' `to_float` on tests/quantize_cases.decode_cases, and the whole derived files: each 2-D tensor of
SmolLM2-135M-Instruct Q4_1 decoded by `to_float` and encoded by `ggml_quantize_chunk`, hashed (and the sha256 of
the whole file bankml's container writer makes of those bytes). Writes tests/oracle/quantize/ggml.json, replayed
by tests/test_quantize.py.

    python testing/record_quantize.py
"""

from __future__ import annotations

import ctypes as C
import hashlib
import io
import json
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

import quantize_cases as cases  # noqa: E402
from bankml.models import quantize as qz  # noqa: E402
from bankml.models.gguf import GGMLType, GGUFFile, write_gguf  # noqa: E402
from testing.oracle import model_path, oracle_bin_dir  # noqa: E402

OUT = REPO / "tests" / "oracle" / "quantize" / "ggml.json"


class TypeTraits(C.Structure):
    _fields_ = [("type_name", C.c_char_p), ("blck_size", C.c_int64), ("blck_size_interleave", C.c_int64),
                ("type_size", C.c_size_t), ("is_quantized", C.c_bool), ("to_float", C.c_void_p),
                ("from_float_ref", C.c_void_p)]


TO_FLOAT = C.CFUNCTYPE(None, C.c_void_p, C.POINTER(C.c_float), C.c_int64)


class Ggml:
    def __init__(self):
        lib = self.lib = C.CDLL(str(oracle_bin_dir() / "libggml-base.so"))
        lib.ggml_quantize_chunk.restype = C.c_size_t
        lib.ggml_quantize_chunk.argtypes = [C.c_int, C.c_void_p, C.c_void_p, C.c_int64, C.c_int64, C.c_int64,
                                            C.c_void_p]
        lib.ggml_row_size.restype = C.c_size_t
        lib.ggml_row_size.argtypes = [C.c_int, C.c_int64]
        lib.ggml_get_type_traits.restype = C.POINTER(TypeTraits)
        lib.ggml_get_type_traits.argtypes = [C.c_int]

    def encode(self, tname: str, x: np.ndarray) -> bytes:
        x = np.ascontiguousarray(x, dtype=np.float32)
        rows, n = x.shape
        t = GGMLType[tname]
        out = np.zeros(rows * self.lib.ggml_row_size(t, n), np.uint8)
        self.lib.ggml_quantize_chunk(t, x.ctypes.data, out.ctypes.data, 0, rows, n, None)
        return out.tobytes()

    def decode(self, tname: str, raw: np.ndarray, n: int) -> np.ndarray:
        raw = np.ascontiguousarray(raw, dtype=np.uint8)
        tr = self.lib.ggml_get_type_traits(GGMLType[tname]).contents
        fn = TO_FLOAT(tr.to_float)
        y = np.zeros(n, np.float32)
        fn(raw.ctypes.data, y.ctypes.data_as(C.POINTER(C.c_float)), n)
        return y


def sha(b) -> str:
    return hashlib.sha256(bytes(b)).hexdigest()


def derived_file(g: Ggml, src: Path, out_type: str) -> dict:
    """The derived file made with ggml's decoders and encoders and bankml's container writer."""
    with GGUFFile(src) as f:
        kvs, plan = qz._plan(f, out_type)
        tensors, per_tensor = [], {}
        for (name, shape, gtype, data), ti in zip(plan, f.tensors.values()):
            if gtype != ti.type:
                n = ti.n_elements
                x = g.decode(GGMLType(ti.type).name, f.tensor_bytes(name), n).reshape(-1, shape[0])
                b = g.encode(out_type, x)
                per_tensor[name] = sha(b)
                tensors.append((name, shape, gtype, b))
            else:
                tensors.append((name, shape, gtype, bytes(f.tensor_bytes(name))))
        buf = io.BytesIO()
        write_gguf(buf, kvs, tensors, alignment=f.header.alignment)
    return {"source_sha256": qz.sha256_file(src, False), "type": out_type, "bytes": buf.tell(),
            "sha256": sha(buf.getbuffer()), "tensors": per_tensor}


def main() -> None:
    g = Ggml()
    rec = {"oracle": "ggml-base b11192 (libggml-base.so of the oracle build)", "encode": {}, "decode": {},
           "files": {}}
    for name, x in cases.encode_cases().items():
        rec["encode"][name] = {t: sha(g.encode(t, x)) for t in cases.ENCODE_TYPES}
    for name, (tname, raw, rows) in cases.decode_cases().items():
        y = g.decode(tname, raw, rows * cases.N_PER_ROW)
        rec["decode"][name] = {"type": tname, "sha256": sha(y.tobytes())}
    src = model_path("smollm2")
    for t in ("F16", "Q8_0"):
        rec["files"][f"smollm2-135m-instruct-{t.lower()}"] = derived_file(g, src, t)
        print(t, rec["files"][f"smollm2-135m-instruct-{t.lower()}"]["sha256"])
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(rec, indent=1) + "\n")
    print(f"wrote {OUT}: {len(rec['encode'])} encode cases x {len(cases.ENCODE_TYPES)} types, "
          f"{len(rec['decode'])} decode cases, {len(rec['files'])} files")


if __name__ == "__main__":
    main()
