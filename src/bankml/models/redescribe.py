"""Derived test files of another architecture: a llama GGUF file's weights re-described as a graph bankml runs
(today: `qwen3`), deterministically (the same bytes on every run and machine), with the pin `OUT.FORK.json`.

Owns: the re-description rule (which keys are renamed, which tensors are added and the rule their values follow).
Must not know: the engine (the derived file goes through the guard like any other), HTTP.
Mirrors: what llama.cpp b11192's loader reads for the target (src/models/qwen3.cpp load_arch_hparams /
load_arch_tensors, src/llama-arch.cpp tensor names); re-encoding the matrices is bankml.models.quantize's.

The rule for `qwen3` (llama -> qwen3; the graphs differ by the per-head Q/K RMS norms and NEOX RoPE):
- metadata copied in order; `general.architecture` becomes "qwen3" and every `llama.*` key becomes `qwen3.*`
  (the same hyper-parameters); the tokenizer keys (`tokenizer.*`: vocabulary, pre-tokenizer, chat template) are
  the source's, which llama-vocab reads whatever the architecture;
- tensors in the source's order (matrices re-encoded as TYPE by bankml.models.quantize's rule when TYPE is given,
  else copied), and after each layer's `blk.{i}.attn_k.weight` two F32 vectors of head_dim values:
  `blk.{i}.attn_q_norm.weight[j] = (24 + (5j + 3i) mod 17) / 16` and
  `blk.{i}.attn_k_norm.weight[j] = (20 + (7j + 11i) mod 13) / 16` (exact in float32; from 1.25 to 2.5: every
  element differs from 1, so a graph that skipped or mis-indexed the norms would show).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..about import __version__
from ._progress import ProgressArg
from ..errors import BankmlError
from .gguf import GGMLType, GGUFFile, header_kvs
from .quantize import LLAMA_QUANTIZE_RULE, _plan, check_paths, write_derived
from .verify import sha256_file

#: the architectures a llama file can be re-described as
TARGETS = ("qwen3",)


class RedescribeError(BankmlError):
    """A source file the rule does not apply to (not llama, no head size) or a target it does not know."""


def norm_weights(layer: int, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(attn_q_norm, attn_k_norm) of one layer by the rule in this module's docstring: float32[head_dim] each."""
    j = np.arange(head_dim, dtype=np.int64)
    q = (24 + (5 * j + 3 * layer) % 17) / 16
    k = (20 + (7 * j + 11 * layer) % 13) / 16
    return q.astype(np.float32), k.astype(np.float32)


def _plan_qwen3(f: GGUFFile, out_type: str | None):
    h = f.header
    if h.architecture != "llama":
        raise RedescribeError(f"the source is {h.architecture!r}; only a llama file is re-described as qwen3")
    n_embd, n_head = h.arch_key("embedding_length"), h.arch_key("attention.head_count")
    head_dim = h.arch_key("attention.key_length") or (n_embd // n_head if n_embd and n_head else None)
    if not head_dim:
        raise RedescribeError("the source has no head size (embedding_length / head_count)")
    if out_type is None:
        kvs = header_kvs(h)
        tensors = [(ti.name, ti.shape, ti.type, (lambda name=ti.name: f.tensor_bytes(name)))
                   for ti in f.tensors.values()]
    else:
        kvs, tensors = _plan(f, out_type)
    renamed = []
    for key, vtype, value, etype in kvs:
        if key == "general.architecture":
            value = "qwen3"
        elif key.startswith("llama."):
            key = "qwen3." + key[len("llama."):]
        renamed.append((key, vtype, value, etype))
    out = []
    for t in tensors:
        out.append(t)
        name = t[0]
        if name.startswith("blk.") and name.endswith(".attn_k.weight"):
            layer = int(name.split(".")[1])
            qn, kn = norm_weights(layer, int(head_dim))
            out.append((f"blk.{layer}.attn_q_norm.weight", (int(head_dim),), GGMLType.F32, qn.tobytes()))
            out.append((f"blk.{layer}.attn_k_norm.weight", (int(head_dim),), GGMLType.F32, kn.tobytes()))
    return renamed, out


def convert(src: str | os.PathLike, dst: str | os.PathLike, arch: str = "qwen3", out_type: str | None = None, *,
            provenance: dict | None = None, progress: ProgressArg = None) -> Path:
    """Write `dst`, `src` re-described as `arch` (matrices re-encoded as `out_type`, or copied when None),
    atomically, and its pin `dst.FORK.json` beside it."""
    if arch not in TARGETS:
        raise RedescribeError(f"cannot re-describe a file as {arch!r}; targets: {', '.join(TARGETS)}")
    out_type = None if out_type is None else out_type.upper()
    if out_type in LLAMA_QUANTIZE_RULE:
        raise RedescribeError(f"{out_type} follows llama-quantize's rule: re-describe first, then "
                              f"`bankml quantize` the re-described file")
    src, dst = check_paths(src, dst, out_type, RedescribeError)
    src_sha = sha256_file(src, progress)
    with GGUFFile(src) as f:
        kvs, tensors = _plan_qwen3(f, out_type)
        kept = "copied" if out_type is None else f"re-encoded as {out_type}"
        prov = {"model": f"{src.stem} re-described as {arch}",
                "derived_from": {"path": src.name, "bytes": os.path.getsize(src), "sha256": src_sha},
                "converter": f"bankml.redescribe (bankml {__version__})", "arch": arch, "type": out_type,
                "how": f"general.architecture {arch}, llama.* keys renamed {arch}.*, tensors {kept}, per-layer "
                       "attn_q_norm / attn_k_norm F32 by the rule of bankml.models.redescribe"}
        prov.update(provenance or {})
        write_derived(dst, kvs, tensors, f.header.alignment, prov, prefix=".redescribe-")
    return dst
