"""Record what llama.cpp b11192's gguf.cpp accepts: for each case of tests/gguf_writer.oracle_cases (hand-made
malformations and 600 seeded mutations of the two real headers), whether gguf_init_from_buffer (header only,
no_alloc, no ggml context) returns a context. Writes tests/oracle/gguf/gguf_cpp_verdicts.json, which
tests/test_gguf.py replays against bankml.models.gguf + bankml.models.verify.gguf_cpp_refusals.

    python testing/record_gguf.py
"""

from __future__ import annotations

import ctypes as C
import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from bankml.models.gguf import read_header_file  # noqa: E402
from gguf_writer import oracle_cases  # noqa: E402
from testing.oracle import model_path, oracle_bin_dir  # noqa: E402

OUT = REPO / "tests" / "oracle" / "gguf" / "gguf_cpp_verdicts.json"


class InitParams(C.Structure):
    _fields_ = [("no_alloc", C.c_bool), ("ctx", C.c_void_p)]


def main() -> None:
    lib = C.CDLL(str(oracle_bin_dir() / "libggml-base.so"))
    lib.gguf_init_from_buffer.restype = C.c_void_p
    lib.gguf_init_from_buffer.argtypes = [C.c_void_p, C.c_size_t, InitParams]
    lib.gguf_free.argtypes = [C.c_void_p]
    # silence gguf.cpp's error log: every refused case logs why
    log_cb = C.CFUNCTYPE(None, C.c_int, C.c_char_p, C.c_void_p)(lambda level, text, user: None)
    lib.ggml_log_set.argtypes = [C.c_void_p, C.c_void_p]
    lib.ggml_log_set(C.cast(log_cb, C.c_void_p), None)

    headers = [read_header_file(model_path(m)) for m in ("smollm2", "gemma3")]
    records = []
    for name, data in oracle_cases(headers):
        buf = C.create_string_buffer(data, len(data))
        ctx = lib.gguf_init_from_buffer(buf, len(data), InitParams(True, None))
        if ctx:
            lib.gguf_free(ctx)
        records.append({"case": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()[:16],
                        "accepted": bool(ctx)})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"oracle": "llama.cpp b11192 ggml/src/gguf.cpp gguf_init_from_buffer(no_alloc)",
                               "cases": records}, indent=0) + "\n")
    n_ok = sum(r["accepted"] for r in records)
    print(f"{len(records)} cases, {n_ok} accepted, {len(records) - n_ok} refused -> {OUT}")


if __name__ == "__main__":
    main()
