"""Watch the oracle's libllama multiply (testing/kquant_trace_shim.c): per ubatch, for chosen layers and the output
head, the inputs and results of the MUL_MAT nodes with quantized weights (with the weight's buffer: CPU_REPACK
when the loader repacked it) and of the GEGLU nodes. Developer tool for testing/record_kquants.py.

    with Trace(model_path("gemma3"), n_ctx=4096, n_threads=2, layers=[0, 5], head=True) as T:
        T.decode(tokens, pos=0)
        for r in T.records():   # dicts: kind 'mul_mat' (name, wtype, k, m, n, buffer, x, out) or 'geglu' (x, g, out)
            ...
"""

from __future__ import annotations

import ctypes as C
from pathlib import Path

import numpy as np

from testing.ggml_kquant_ops import build_shim
from testing.oracle import oracle_bin_dir


class _Rec(C.Structure):
    _fields_ = [("kind", C.c_int), ("layer", C.c_int), ("graph", C.c_int), ("wtype", C.c_int), ("k", C.c_int),
                ("m", C.c_int), ("n", C.c_int), ("name", C.c_char * 64), ("buffer", C.c_char * 32),
                ("x", C.POINTER(C.c_float)), ("g", C.POINTER(C.c_float)), ("out", C.POINTER(C.c_float))]


_lib = None


def _load():
    global _lib
    if _lib is None:
        bindir = oracle_bin_dir()
        out = build_shim("kquant_trace_shim.c", "libkquant_trace_shim.so", ["llama", "ggml-base"],
                         includes=("include", "ggml/include"))
        C.CDLL(str(bindir / "libllama.so"), mode=C.RTLD_GLOBAL)
        lib = C.CDLL(str(out))
        P = C.c_void_p
        lib.trace_open.restype = P
        lib.trace_open.argtypes = [C.c_char_p, C.c_int, C.c_int, C.c_int, C.c_int, C.c_uint64, C.c_int]
        lib.trace_close.argtypes = [P]
        lib.trace_reset.argtypes = [P]
        lib.trace_decode.argtypes = [P, C.POINTER(C.c_int), C.c_int, C.c_int]
        lib.trace_decode.restype = C.c_int
        lib.trace_n_recs.argtypes = [P]
        lib.trace_n_recs.restype = C.c_int
        lib.trace_rec.argtypes = [P, C.c_int]
        lib.trace_rec.restype = C.POINTER(_Rec)
        _lib = lib
    return _lib


def _arr(ptr, shape):
    n = int(np.prod(shape))
    return np.ctypeslib.as_array(ptr, shape=(n,)).reshape(shape).copy()


class Trace:
    def __init__(self, model: Path, *, n_ctx=4096, n_batch=2048, n_ubatch=512, n_threads=2, layers=(0,), head=True,
                 quiet=True):
        self.L = _load()
        mask = 0
        for il in layers:
            mask |= 1 << il
        if head:
            mask |= 1 << 63
        self.h = self.L.trace_open(str(model).encode(), n_ctx, n_batch, n_ubatch, n_threads, mask, int(quiet))
        if not self.h:
            raise RuntimeError(f"libllama could not open {model}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.h:
            self.L.trace_close(self.h)
            self.h = None

    def decode(self, tokens, pos: int) -> None:
        t = np.ascontiguousarray(tokens, dtype=np.int32)
        rc = self.L.trace_decode(self.h, t.ctypes.data_as(C.POINTER(C.c_int)), len(t), pos)
        if rc:
            raise RuntimeError(f"llama_decode returned {rc}")

    def reset(self) -> None:
        self.L.trace_reset(self.h)

    def records(self):
        for i in range(self.L.trace_n_recs(self.h)):
            r = self.L.trace_rec(self.h, i).contents
            if r.kind == 0:
                yield dict(kind="mul_mat", layer=r.layer, graph=r.graph, name=r.name.decode(), wtype=r.wtype, k=r.k,
                           m=r.m, n=r.n, buffer=r.buffer.decode(), x=_arr(r.x, (r.n, r.k)),
                           out=_arr(r.out, (r.n, r.m)))
            else:
                yield dict(kind="geglu", layer=r.layer, graph=r.graph, x=_arr(r.x, (r.n, r.k)),
                           g=_arr(r.g, (r.n, r.k)), out=_arr(r.out, (r.n, r.k)))
