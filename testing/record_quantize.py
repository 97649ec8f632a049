"""Record what ggml-base b11192 (the oracle build's libggml-base.so) makes of the converter's inputs:
`ggml_quantize_chunk` (the reference encoders llama-quantize uses) on tests/quantize_cases.encode_cases, the
type traits' `to_float` on tests/quantize_cases.decode_cases, and the whole derived files: each 2-D tensor of
SmolLM2-135M-Instruct Q4_1 decoded by `to_float` and encoded by `ggml_quantize_chunk`, hashed (and the sha256 of
the whole file bankml's container writer makes of those bytes). Writes tests/oracle/quantize/ggml.json, replayed
by tests/test_quantize.py.

And what the oracle's llama-quantize b11192 writes for the Bonsai types (`llama-quantize --allow-requantize IN OUT
Q1_0|Q2_0 1`, with `--tensor-type` overrides where the case has them) on SmolLM2-135M-Instruct Q4_1 and on its
qwen3 re-description (and SmolLM2's F16 file): the output's size, sha256 and tensor types, or its refusal (exit
status and error line).

    python testing/record_quantize.py                      # everything
    python testing/record_quantize.py KEY ...              # only these llama-quantize cases (e.g. f16-q2_k-overrides),
                                                           # re-run into the existing record
    python testing/record_quantize.py encode               # only the encoders, re-run into the existing record
    python testing/record_quantize.py decode               # only the decoders, re-run into the existing record
"""

from __future__ import annotations

import ctypes as C
import hashlib
import io
import json
import subprocess
import sys
import tempfile
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


def llama_quantize(src: Path, out_type: str, tensor_types: list[str]) -> dict:
    """Run the oracle's llama-quantize on `src` (one thread) and describe what it wrote, or its refusal."""
    exe = oracle_bin_dir() / "llama-quantize"
    with tempfile.TemporaryDirectory(prefix="record-quantize-") as tmp:
        out = Path(tmp) / "out.gguf"
        args = [str(exe), "--allow-requantize"]
        for tt in tensor_types:
            args += ["--tensor-type", tt]
        r = subprocess.run(args + [str(src), str(out), out_type, "1"], capture_output=True, text=True)
        if r.returncode != 0:
            err = [ln for ln in (r.stdout + r.stderr).splitlines() if "failed to quantize:" in ln]
            return {"returncode": r.returncode, "error": err[0].split("failed to quantize: ")[1] if err else None}
        with GGUFFile(out) as f:
            types = {n: GGMLType(ti.type).name for n, ti in f.tensors.items()}
        return {"returncode": 0, "bytes": out.stat().st_size, "sha256": qz.sha256_file(out, False),
                "tensor_types": types}


def llama_quantize_cases(sources: dict[str, Path], only=None) -> dict:
    out = {}
    for src_key, tname, tts in cases.LLAMA_QUANTIZE_CASES:
        key = cases.llama_quantize_key(src_key, tname, tts)
        if only is not None and key not in only:
            continue
        src = sources[src_key]
        out[key] = {"source": src.name, "source_sha256": qz.sha256_file(src, False), "type": tname,
                    "tensor_types": list(tts), **llama_quantize(src, tname, list(tts))}
        print(key, out[key].get("sha256") or out[key]["error"])
    return out


def llama_quantize_sources() -> dict[str, Path]:
    from testing.record_forward import MODELS, derived
    from testing.record_forward import synth
    return {"smollm2": model_path("smollm2"), "f16": model_path(MODELS["f16"]), "qwen3": derived("qwen3"),
            "synth": synth(*cases.TQ_SYNTH)}


def record_encode(g: Ggml) -> dict:
    """ggml_quantize_chunk of every encode case in every ENCODE_TYPES type, and of the BF16-only cases in BF16."""
    out = {name: {t: sha(g.encode(t, x)) for t in cases.ENCODE_TYPES} for name, x in cases.encode_cases().items()}
    out.update({name: {"BF16": sha(g.encode("BF16", x))} for name, x in cases.bf16_encode_cases().items()})
    return out


def record_decode(g: Ggml) -> dict:
    """to_float of every decode case."""
    out = {}
    for name, (tname, raw, rows) in cases.decode_cases().items():
        out[name] = {"type": tname, "sha256": sha(g.decode(tname, raw, rows * cases.N_PER_ROW).tobytes())}
    return out


def main(argv: list[str]) -> None:
    if argv in (["encode"], ["decode"]):  # only the encoders / decoders, re-run into the existing record
        rec = json.loads(OUT.read_text())
        rec[argv[0]] = (record_encode if argv == ["encode"] else record_decode)(Ggml())
        OUT.write_text(json.dumps(rec, indent=1) + "\n")
        print(f"updated {OUT}: {argv[0]}")
        return
    if argv:  # only these llama-quantize cases, re-run into the existing record
        rec = json.loads(OUT.read_text())
        unknown = set(argv) - {cases.llama_quantize_key(*c) for c in cases.LLAMA_QUANTIZE_CASES}
        if unknown:
            raise SystemExit(f"not a llama-quantize case: {sorted(unknown)}")
        rec["llama_quantize"].update(llama_quantize_cases(llama_quantize_sources(), set(argv)))
        rec["llama_quantize"] = {cases.llama_quantize_key(*c): rec["llama_quantize"][cases.llama_quantize_key(*c)]
                                 for c in cases.LLAMA_QUANTIZE_CASES}
        OUT.write_text(json.dumps(rec, indent=1) + "\n")
        print(f"updated {OUT}: {', '.join(argv)}")
        return
    g = Ggml()
    rec = {"oracle": "ggml-base b11192 (libggml-base.so of the oracle build)", "encode": {}, "decode": {},
           "files": {}}
    rec["encode"] = record_encode(g)
    rec["decode"] = record_decode(g)
    src = model_path("smollm2")
    for t in ("F16", "Q8_0"):
        rec["files"][f"smollm2-135m-instruct-{t.lower()}"] = derived_file(g, src, t)
        print(t, rec["files"][f"smollm2-135m-instruct-{t.lower()}"]["sha256"])
    rec["llama_quantize"] = llama_quantize_cases(llama_quantize_sources())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    tmp = OUT.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(rec, indent=1) + "\n")
    tmp.replace(OUT)
    print(f"wrote {OUT}: {len(rec['encode'])} encode cases x {len(cases.ENCODE_TYPES)} types, "
          f"{len(rec['decode'])} decode cases, {len(rec['files'])} files, "
          f"{len(rec['llama_quantize'])} llama-quantize runs")


if __name__ == "__main__":
    main(sys.argv[1:])
