"""Synthetic test models of shapes SmolLM2 does not have (head size 128 and 256, GQA 1 / 4 / 8, untied output, wide
and deep ones), written deterministically (the same bytes on every run and machine) with the pin `OUT.FORK.json`.

Owns: the shapes (SHAPES) and the rule that fills their tensors. Must not know: the engine (a synthetic file goes
through the guard like any other), HTTP. The files are test inputs whose logits the oracle (libllama b11192)
records; they are never committed: tests and recorders make them when missing and check the records' sha256.

The rule:
- metadata: `general.architecture` (llama or qwen3), `general.name` "bankml synthetic <shape>", the shape's
  hyper-parameters under `<arch>.*` (context 8192, RoPE base 100000, RMS epsilon 1e-5, as SmolLM2), then every
  `tokenizer.*` key of the vocabulary source (SmolLM2-135M-Instruct: its vocabulary, merges, pre-tokenizer, special
  tokens and chat template), so the tokenizer, template and server paths are the real ones;
- tensors: token_embd, output_norm, output (when untied), then each layer's in SmolLM2's file order (qwen3's
  attn_k_norm / attn_q_norm after attn_k); matrices encoded as TYPE by bankml.models.quantize's encoders, vectors
  F32;
- values: element i of tensor NAME is u = (splitmix64(s + i) >> 40) / 2^23 - 1, a float32 in [-1, 1) with 24 bits,
  s the first 8 bytes (little-endian) of sha256(NAME); matrices multiplied by float32(1 / sqrt(n_in)), the
  token embedding unscaled, norm weights 1 + u / 4; qwen3's per-head Q/K norms by
  bankml.models.redescribe's rule.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..about import __version__
from ._progress import ProgressArg
from ..errors import BankmlError
from .gguf import GGMLType, GGUFFile, ValueType, header_kvs
from .quantize import check_paths, quantize, write_derived
from .redescribe import norm_weights
from .verify import sha256_file


class SynthError(BankmlError):
    """An unknown shape or type, or a vocabulary source without a tokenizer."""


@dataclass(frozen=True)
class Shape:
    arch: str
    n_embd: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_layer: int
    tied: bool

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


#: name -> shape. The "1b" one has about 1.2 billion parameters (24 layers of 2048, GQA 4, head size 128).
SHAPES: dict[str, Shape] = {
    "llama-h128-gqa4-untied": Shape("llama", 1024, 8, 2, 2816, 4, tied=False),
    "llama-h256-gqa1": Shape("llama", 1024, 4, 4, 2048, 3, tied=True),
    "llama-h64-gqa8-untied": Shape("llama", 1024, 16, 2, 2048, 3, tied=False),
    "qwen3-h128-gqa4": Shape("qwen3", 1024, 8, 2, 2816, 4, tied=True),
    "llama-1b": Shape("llama", 2048, 16, 4, 5632, 24, tied=False),
}
#: the matrix types a synthetic file may be written in (bankml.models.quantize's encoders)
TYPES = ("F32", "F16", "Q8_0", "Q4_1", "Q4_0")
_FTYPE = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7}
_M1, _M2, _GOLD = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def values(name: str, n: int) -> np.ndarray:
    """float32[n]: the rule's u for tensor `name` (module docstring)."""
    seed = np.uint64(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "little"))
    with np.errstate(over="ignore"):
        z = (seed + np.arange(1, n + 1, dtype=np.uint64) * _GOLD)
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) / float(1 << 23) - 1.0   # exact: 24 bits
    return u.astype(np.float32)


def _tensors(shape: Shape) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, ggml shape, kind) in the loader's order; kind: emb, norm, matrix, qk_norm."""
    e, hd = shape.n_embd, shape.head_dim
    out = [("token_embd.weight", (e, 0), "emb"), ("output_norm.weight", (e,), "norm")]
    if not shape.tied:
        out.append(("output.weight", (e, 0), "matrix"))
    for i in range(shape.n_layer):
        b = f"blk.{i}."
        layer = [(b + "attn_norm.weight", (e,), "norm"),
                 (b + "ffn_down.weight", (shape.n_ff, e), "matrix"),
                 (b + "ffn_gate.weight", (e, shape.n_ff), "matrix"),
                 (b + "ffn_up.weight", (e, shape.n_ff), "matrix"),
                 (b + "ffn_norm.weight", (e,), "norm"),
                 (b + "attn_k.weight", (e, hd * shape.n_head_kv), "matrix")]
        if shape.arch == "qwen3":
            layer += [(b + "attn_k_norm.weight", (hd,), "qk_norm"), (b + "attn_q_norm.weight", (hd,), "qk_norm")]
        layer += [(b + "attn_output.weight", (e, e), "matrix"),
                  (b + "attn_q.weight", (e, hd * shape.n_head), "matrix"),
                  (b + "attn_v.weight", (e, hd * shape.n_head_kv), "matrix")]
        out += layer
    return out


def _plan(shape_name: str, src: GGUFFile, out_type: str):
    shape = SHAPES[shape_name]
    arch = shape.arch
    tok = [kv for kv in header_kvs(src.header) if kv[0].startswith("tokenizer.")]
    if not any(k[0] == "tokenizer.ggml.tokens" for k in tok):
        raise SynthError("the vocabulary source has no tokenizer.ggml.tokens")
    n_vocab = next(len(k[2]) for k in tok if k[0] == "tokenizer.ggml.tokens")
    U32, F32v, S = ValueType.UINT32, ValueType.FLOAT32, ValueType.STRING
    kvs = [("general.architecture", S, arch, None), ("general.type", S, "model", None),
           ("general.name", S, f"bankml synthetic {shape_name}", None),
           (f"{arch}.block_count", U32, shape.n_layer, None), (f"{arch}.context_length", U32, 8192, None),
           (f"{arch}.embedding_length", U32, shape.n_embd, None),
           (f"{arch}.feed_forward_length", U32, shape.n_ff, None),
           (f"{arch}.attention.head_count", U32, shape.n_head, None),
           (f"{arch}.attention.head_count_kv", U32, shape.n_head_kv, None),
           (f"{arch}.rope.freq_base", F32v, 100000.0, None),
           (f"{arch}.attention.layer_norm_rms_epsilon", F32v, 1e-5, None),
           ("general.file_type", U32, _FTYPE[out_type], None), (f"{arch}.vocab_size", U32, n_vocab, None),
           (f"{arch}.rope.dimension_count", U32, shape.head_dim, None)]
    kvs += tok + [("general.quantization_version", U32, 2, None)]
    tensors = []
    for name, gshape, kind in _tensors(shape):
        if gshape[-1] == 0:
            gshape = (gshape[0], n_vocab)
        n = int(np.prod(gshape))
        if kind in ("norm", "qk_norm"):
            if kind == "qk_norm":
                layer = int(name.split(".")[1])
                qn, kn = norm_weights(layer, shape.head_dim)
                data = (qn if "attn_q_norm" in name else kn).tobytes()
            else:
                data = (np.float32(1) + values(name, n) / np.float32(4)).astype(np.float32).tobytes()
            tensors.append((name, gshape, GGMLType.F32, data))
            continue

        def encode(name=name, gshape=gshape, kind=kind, n=n):
            x = values(name, n).reshape(gshape[1], gshape[0])
            if kind == "matrix":
                x = (x * np.float32(1 / np.sqrt(gshape[0]))).astype(np.float32)
            return quantize(out_type, x)
        tensors.append((name, gshape, GGMLType[out_type], encode))
    return kvs, tensors


def write(dst: str | os.PathLike, shape_name: str, vocab_src: str | os.PathLike, out_type: str = "Q8_0", *,
          provenance: dict | None = None, progress: ProgressArg = None) -> Path:
    """Write `dst`, the synthetic model of `shape_name` with `vocab_src`'s tokenizer, matrices in `out_type`,
    atomically, and its pin `dst.FORK.json`."""
    if shape_name not in SHAPES:
        raise SynthError(f"unknown shape {shape_name!r}; shapes: {', '.join(SHAPES)}")
    out_type = out_type.upper()
    if out_type not in TYPES:
        raise SynthError(f"synthetic files are written in {', '.join(TYPES)}, not {out_type!r}")
    src, dst = check_paths(vocab_src, dst, out_type, SynthError)
    with GGUFFile(src) as f:
        kvs, tensors = _plan(shape_name, f, out_type)
        n_params = sum(int(np.prod(t[1])) for t in tensors)
        prov = {"model": f"bankml synthetic {shape_name}", "shape": SHAPES[shape_name].__dict__ | {"name": shape_name},
                "parameters": n_params, "type": out_type, "converter": f"bankml.synth (bankml {__version__})",
                "vocabulary_from": {"path": src.name, "bytes": os.path.getsize(src), "sha256": sha256_file(src, progress)},
                "how": "values by the rule of bankml.models.synth; tokenizer.* keys copied from the vocabulary source"}
        prov.update(provenance or {})
        write_derived(dst, kvs, tensors, 32, prov, prefix=".synth-")
    return dst


def derived_path(models_dir: str | os.PathLike, shape_name: str, out_type: str) -> Path:
    """Where the tests and recorders keep a synthetic file: `<models>/derived/synth-<shape>-<type>.gguf`."""
    return Path(models_dir) / "derived" / f"synth-{shape_name}-{out_type.lower()}.gguf"


def ensure(models_dir: str | os.PathLike, shape_name: str, out_type: str, vocab_src: str | os.PathLike) -> Path:
    """derived_path's file, written first when missing (deterministic: a record's sha256 checks it)."""
    dst = derived_path(models_dir, shape_name, out_type)
    if not dst.exists():
        write(dst, shape_name, vocab_src, out_type, progress=False)
    return dst
