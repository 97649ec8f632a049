"""`bankml quantize IN OUT TYPE`: derived GGUF files, re-encoded deterministically (same bytes every run).

Owns: decoding tensor data of the types bankml reads into float32, encoding float32 into the types it writes, and
the conversion rule of a derived file, with its pin (`OUT.FORK.json`, recording the input's sha256).
Must not know: the engine (the derived file is checked by the guard like any other), HTTP.

The rule: every tensor with two or more dimensions (the matrices and the token embedding) is decoded to float32
and encoded in TYPE; one-dimensional tensors (norm weights, biases) are copied as they are, and so is a matrix that
is already of TYPE. The metadata is copied in order, with `general.file_type` set to TYPE's llama_ftype. The
tensor table keeps the input's order and alignment.

Decoding and encoding follow ggml-base b11192 (ggml/src/ggml-quants.c), which is what llama-quantize uses:
- decoding (`dequantize_row_*`, built without FMA): F16 widened exactly; Q8_0 fl(q * h(d)); Q4_1
  fl(fl(q * h(d)) + h(m)); Q4_0 fl((q - 8) * h(d)); BF16 widened exactly.
- encoding (`quantize_row_*_ref`, as `ggml_quantize_chunk` without an importance matrix):
  F16: round to nearest even. BF16 (ggml_fp32_to_bf16_row_ref): the float's top 16 bits rounded to nearest even
  on the bits (add 0x7fff plus the lowest kept bit, keep the top half); a NaN keeps its top half with the quiet
  bit 0x40 set; subnormals kept (no flush). Q8_0 per block of 32: amax = max |x|, d = fl(amax / 127), id = d ? fl(1 / d) : 0,
  q = roundf(fl(x * id)) (half away from zero), stored f16(d). Q4_0 per block: m = the first element of largest
  magnitude, d = fl(m / -8), id = d ? fl(1 / d) : 0, q = min(15, trunc(fl(fl(x * id) + 8.5))), stored f16(d),
  nibbles low = elements 0..15, high = 16..31.
  Q1_0 per block of 128: s = |x0| + |x1| + ... + |x127| summed in that order, d = fl(s / 128), stored f16(d),
  bit j = (x_j >= 0), eight elements a byte, element 0 in the lowest bit. Q2_0 per block of 64: d = max |x|
  (NaN ignored), id = d > 0 ? fl(1 / d) : 0, q = clamp(roundf(fl(x * id)) + 1, 0, 3) (an integer conversion of
  inf or NaN gives INT_MIN on x86, so 0), stored f16(d), four elements a byte, element 0 in the lowest two bits.
  TQ1_0 / TQ2_0 per block of 256: d = max |x|, id = d ? fl(1 / d) : 0, trit = lroundf(fl(x * id)) + 1 (0, 1, 2;
  inf or NaN: 1), stored f16(d) after the codes; TQ2_0 four 2-bit codes a byte (byte 32j + m: elements
  128j + 32s + m in bits 2s), TQ1_0 five trits a byte in base 3, the first most significant, stored as
  ceil(v * 256 / 243) (bytes 0..31: elements m + 32s; 32..47: 160 + m + 16s; four qh bytes: 240 + j + 4s, times 3).
- decoding Q1_0: bit ? h(d) : -h(d); Q2_0: fl((q - 1) * h(d)); IQ4_NL: fl(h(d) * K[q]) with K the sixteen
  non-linear levels (IQ4_LEVELS); IQ4_XS: fl(fl(h(d) * (ls - 32)) * K[q]) with each block of 32's 6-bit scale ls.
Every step is float32 arithmetic in numpy, which rounds as C does (no contraction, no fast-math).

Q1_0 and Q2_0 (the Bonsai types), TQ1_0 and TQ2_0 (the ternary types), BF16, the K mixes and IQ4_NL / IQ4_XS are
written by llama-quantize's rule instead, so that the file is the one `llama-quantize --allow-requantize IN OUT TYPE` b11192
writes (src/llama-quant.cpp):
- the tensors in the loader's order: those outside a layer first, then layer by layer (the number after `blk.`),
  by name (bytes) within each group; every tensor's data padded to 32 bytes;
- the metadata copied in order, then `general.quantization_version` (u32 2) and `general.file_type` (u32 the
  llama_ftype: Q1_0 40, Q2_0 41, TQ1_0 36, TQ2_0 37, BF16 32) removed and appended, in that order;
- which tensors are re-encoded: two or more dimensions, a name ending in `weight`, not `_norm.weight` (and the
  names llama-quantize never quantizes: see `_llama_quantizes`); the others are copied;
- the type of a re-encoded tensor: BF16 for every one of a BF16 file (not a quantized type: llama-quantize applies
  no mix, no `--tensor-type` override and no shape fallback then); else a `--tensor-type PATTERN=TYPE` override (the first whose pattern is found in
  the name), else the output matrix (or the token embedding when the file has no `output.weight`, tied) is Q8_0
  when its row is not a multiple of TYPE's block and Q6_K otherwise; an untied token embedding is Q4_K for Q2_0,
  TQ1_0 and TQ2_0 and TYPE for Q1_0; every other matrix TYPE. Then the shape fallback: a row not a multiple of the
  block turns Q2_0, TQ1_0 and TQ2_0 into Q4_0, Q6_K into Q8_0, Q4_K into Q5_0, IQ4_XS into IQ4_NL, and a
  32-block type whose row is not a multiple of 32 into F16;
  Q1_0 (block 128) has no fallback and llama-quantize stops ("no tensor type fallback is defined for type
  q1_0"), as this converter does;
- a tensor whose chosen type is its own type is copied, bytes unchanged (no decode and re-encode);
- the input is refused where llama-quantize would not write that file: an architecture other than llama and
  qwen3 (their tensor categories are the ones followed here), experts, a `general.alignment` other than 32; and
  where this converter has no encoder for the chosen type (Q6_K, Q4_K, Q5_0 today), it says so by name.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..about import __version__
from ._progress import Progress, ProgressArg
from ..errors import BankmlError
from .gguf import TYPE_LAYOUT, GGMLType, GGUFFile, ValueType, header_kvs, row_bytes, type_name, write_gguf
from .verify import make_pin, pin_path_beside, sha256_file, write_pin

#: the types a derived file may be written in -> llama_ftype (include/llama.h) for general.file_type
OUTPUT_TYPES: dict[str, int] = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q5_0": 8, "Q5_1": 9,
                                "Q2_K": 10, "Q3_K_S": 11, "Q3_K_M": 12, "Q3_K_L": 13, "Q4_K_S": 14, "Q4_K_M": 15,
                                "Q5_K_S": 16, "Q5_K_M": 17, "Q6_K": 18, "Q2_K_S": 21, "BF16": 32, "Q1_0": 40,
                                "Q2_0": 41, "IQ4_NL": 25, "IQ4_XS": 30}
OUTPUT_TYPES.update({"TQ1_0": 36, "TQ2_0": 37})  # the ternary types (llama_ftype MOSTLY_TQ1_0 / TQ2_0)
#: the types written by llama-quantize's rule (tensor order, per-tensor type choice, metadata), not bankml's
LLAMA_QUANTIZE_RULE = ("Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S",
                       "Q5_K_M", "Q6_K", "Q2_K_S", "Q1_0", "Q2_0", "BF16", "IQ4_NL", "IQ4_XS")
LLAMA_QUANTIZE_RULE += ("TQ1_0", "TQ2_0")
#: the tensor types `quantize` encodes (the K types and Q4_1 / Q5_x in C: src/kernels/encode.c)
ENCODABLE = ("F32", "F16", "BF16", "Q4_0", "Q8_0", "Q1_0", "Q2_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K",
             "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS")
ENCODABLE += ("TQ1_0", "TQ2_0")
_C_ENCODED = ("Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS")

F32, F16 = np.dtype("<f4"), np.dtype("<f2")


class QuantizeError(BankmlError):
    """A file or tensor the converter cannot re-encode (unknown type, rows not a multiple of the block)."""


# --- decoding ---------------------------------------------------------------------------------------------------

def _blocks(raw: np.ndarray, n_rows: int, n_per_row: int, block_bytes: int, blck: int = 32) -> np.ndarray:
    return np.ascontiguousarray(raw).reshape(n_rows * (n_per_row // blck), block_bytes)


def _scale(blocks: np.ndarray, at: int = 0) -> np.ndarray:
    return blocks[:, at:at + 2].copy().view(F16).astype(F32)  # exact widening, shape (n_blocks, 1)


def dequantize(gtype: int, raw: np.ndarray, n_rows: int, n_per_row: int) -> np.ndarray:
    """float32[n_rows, n_per_row] from the raw bytes (uint8) of n_rows rows of type `gtype`."""
    gtype = GGMLType(gtype)
    raw = np.asarray(raw, dtype=np.uint8)
    if gtype == GGMLType.F32:
        return raw.view(F32).reshape(n_rows, n_per_row).astype(np.float32)
    if gtype == GGMLType.F16:
        return raw.view(F16).reshape(n_rows, n_per_row).astype(np.float32)
    if gtype == GGMLType.BF16:
        return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32).reshape(n_rows, n_per_row)
    blck = TYPE_LAYOUT[gtype][0] if gtype in TYPE_LAYOUT else 32
    if n_per_row % blck:
        raise QuantizeError(f"{n_per_row} elements per row is not a multiple of {blck}")
    with np.errstate(all="ignore"):  # inf and NaN scales decode as ggml decodes them
        return _dequantize_blocks(gtype, raw, n_rows, n_per_row)


def _dequantize_blocks(gtype: GGMLType, raw: np.ndarray, n_rows: int, n_per_row: int) -> np.ndarray:
    if gtype == GGMLType.Q8_0:
        b = _blocks(raw, n_rows, n_per_row, 34)
        x = b[:, 2:].view(np.int8).astype(np.float32) * _scale(b)
    elif gtype in (GGMLType.Q4_0, GGMLType.Q4_1):
        bb = 18 if gtype == GGMLType.Q4_0 else 20
        b = _blocks(raw, n_rows, n_per_row, bb)
        qs = b[:, bb - 16:]
        q = np.concatenate([qs & 0x0F, qs >> 4], axis=1).astype(np.float32)
        if gtype == GGMLType.Q4_0:
            x = (q - np.float32(8)) * _scale(b)
        else:
            x = q * _scale(b) + _scale(b, 2)
    elif gtype == GGMLType.Q1_0:
        b = _blocks(raw, n_rows, n_per_row, 18, 128)
        d = _scale(b)
        bits = np.unpackbits(b[:, 2:], axis=1, bitorder="little").astype(bool)
        x = np.where(bits, d, -d)
    elif gtype == GGMLType.Q2_0:
        b = _blocks(raw, n_rows, n_per_row, 18, 64)
        qs = b[:, 2:]
        q = np.stack([(qs >> s) & 3 for s in (0, 2, 4, 6)], axis=2).reshape(len(b), 64)
        x = (q.astype(np.float32) - np.float32(1)) * _scale(b)
    elif gtype == GGMLType.IQ4_NL:
        b = _blocks(raw, n_rows, n_per_row, 18)
        x = _scale(b) * _iq4_levels(b[:, 2:])
    elif gtype == GGMLType.IQ4_XS:
        b = _blocks(raw, n_rows, n_per_row, 136, 256)
        sh = b[:, 2:4].copy().view("<u2").astype(np.int32)                        # (n_blocks, 1)
        sl = np.stack([b[:, 4:8] & 15, b[:, 4:8] >> 4], axis=2).reshape(len(b), 8).astype(np.int32)
        ls = sl | (((sh >> (2 * np.arange(8))) & 3) << 4)                          # (n_blocks, 8)
        dl = (_scale(b) * (ls - 32).astype(np.float32)).astype(np.float32)
        lv = _iq4_levels(b[:, 8:].reshape(len(b) * 8, 16)).reshape(len(b), 8, 32)
        x = dl[:, :, None] * lv
    else:
        raise QuantizeError(f"tensors of type {type_name(gtype)} cannot be decoded by the converter yet "
                            f"(it reads {', '.join(DECODABLE)})")
    return x.reshape(n_rows, n_per_row)


DECODABLE = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q1_0", "Q2_0", "IQ4_NL", "IQ4_XS")
#: the sixteen IQ4_NL / IQ4_XS levels (ggml-common.h kvalues_iq4nl)
IQ4_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float32)


def _iq4_levels(qs: np.ndarray) -> np.ndarray:
    """The 32 levels of each row of 16 nibble bytes: low nibbles are elements 0..15, high ones 16..31."""
    return IQ4_LEVELS[np.concatenate([qs & 0x0F, qs >> 4], axis=1)]


# --- encoding ---------------------------------------------------------------------------------------------------

def _f16_bits(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # beyond the half range: inf, as ggml's conversion gives
        return x.astype(F16).view(np.uint8)  # numpy rounds float32 -> float16 to nearest even, as ggml does


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + (0x7FFF + ((u >> 16) & 1))) >> 16
    quiet_nan = (u >> 16) | 0x40
    bits = np.where((u & 0x7FFFFFFF) > 0x7F800000, quiet_nan, rounded).astype(np.uint16)
    return bits.view(np.uint8)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    # roundf: x + copysign(0.5, x) is exact in float64, then truncate
    x64 = x.astype(np.float64)
    return np.trunc(x64 + np.copysign(0.5, x64))


def quantize(type_name_: str, x: np.ndarray) -> np.ndarray:
    """The bytes (uint8[n_rows, row_bytes]) of the float32 rows `x` encoded as `type_name_` (OUTPUT_TYPES)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    n_rows, n = x.shape
    if type_name_ == "F32":
        return x.view(np.uint8)
    if type_name_ == "F16":
        return _f16_bits(x).reshape(n_rows, n * 2)
    if type_name_ == "BF16":
        return _bf16_bits(x).reshape(n_rows, n * 2)
    if type_name_ not in ENCODABLE:
        raise QuantizeError(f"cannot write type {type_name_!r}; the converter writes {', '.join(ENCODABLE)}")
    blck = TYPE_LAYOUT[GGMLType[type_name_]][0]
    if n % blck:
        raise QuantizeError(f"{n} elements per row is not a multiple of {blck}")
    if type_name_ in _C_ENCODED:
        from . import _encode
        return _encode.encode(int(GGMLType[type_name_]), x)
    if type_name_ in ("TQ1_0", "TQ2_0"):
        with np.errstate(all="ignore"):
            out = _quantize_tq(type_name_, x.reshape(-1, 256))
        return out.reshape(n_rows, row_bytes(GGMLType[type_name_], n))
    if type_name_ in ("Q1_0", "Q2_0"):
        with np.errstate(all="ignore"):
            out = _quantize_q1_0(x.reshape(-1, 128)) if type_name_ == "Q1_0" else _quantize_q2_0(x.reshape(-1, 64))
        return out.reshape(n_rows, row_bytes(GGMLType[type_name_], n))
    blk = x.reshape(-1, 32)
    with np.errstate(all="ignore"):
        if type_name_ == "Q8_0":
            d = (np.abs(blk).max(axis=1) / np.float32(127)).astype(np.float32)
            inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
            q = _round_half_away(blk * inv[:, None]).astype(np.int8)
            out = np.concatenate([_f16_bits(d).reshape(-1, 2), q.view(np.uint8)], axis=1)
        elif type_name_ == "Q4_0":
            first_max = np.argmax(np.abs(blk), axis=1)       # the first element of largest magnitude
            m = blk[np.arange(len(blk)), first_max]
            d = (m / np.float32(-8)).astype(np.float32)
            inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
            v = (blk * inv[:, None]).astype(np.float32) + np.float32(8.5)
            q = np.minimum(np.trunc(v).astype(np.int8), 15).astype(np.uint8)
            qs = q[:, :16] | (q[:, 16:] << 4)
            out = np.concatenate([_f16_bits(d).reshape(-1, 2), qs], axis=1)
        else:
            raise QuantizeError(f"cannot write type {type_name_!r}; the converter writes {', '.join(OUTPUT_TYPES)}")
    return out.reshape(n_rows, row_bytes(GGMLType[type_name_], n))


def _quantize_q1_0(blk: np.ndarray) -> np.ndarray:
    s = np.zeros(len(blk), np.float32)
    a = np.abs(blk)
    for j in range(blk.shape[1]):         # the sum in element order, in float32, as the C loop adds
        s += a[:, j]
    d = (s / np.float32(128)).astype(np.float32)
    qs = np.packbits(blk >= 0, axis=1, bitorder="little")
    return np.concatenate([_f16_bits(d).reshape(-1, 2), qs], axis=1)


def _quantize_q2_0(blk: np.ndarray) -> np.ndarray:
    d = np.fmax.reduce(np.abs(blk), axis=1, initial=np.float32(0)).astype(np.float32)  # NaN never wins
    inv = np.where(d > 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = _round_half_away((blk * inv[:, None]).astype(np.float32))
    q = np.where(np.isfinite(v), v, -2.0 ** 31)          # cvttss2si of inf / NaN: INT_MIN
    q = np.clip(q + 1, 0, 3).astype(np.uint8).reshape(len(blk), 16, 4)
    qs = q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6)
    return np.concatenate([_f16_bits(d).reshape(-1, 2), qs], axis=1)


def _quantize_tq(type_name_: str, blk: np.ndarray) -> np.ndarray:
    # quantize_row_tq1_0_ref / tq2_0_ref: d = max |x|, id = d ? fl(1 / d) : 0, trit = lroundf(fl(x * id)) + 1
    d = np.abs(blk).max(axis=1)
    inv = np.where(d != 0, np.float32(1) / d, np.float32(0)).astype(np.float32)
    v = _round_half_away((blk * inv[:, None]).astype(np.float32))
    t = np.where(np.isfinite(v), v + 1, 1).astype(np.int64)  # lroundf of inf / NaN: LONG_MIN, + 1 -> int 1
    dh = _f16_bits(d.astype(np.float32)).reshape(-1, 2)
    if type_name_ == "TQ2_0":
        # byte 32h + m holds elements 128h + 32s + m (s = 0..3) in bits 2s, 2s + 1
        q = (t & 3).reshape(len(blk), 2, 4, 32)
        qs = (q[:, :, 0] | q[:, :, 1] << 2 | q[:, :, 2] << 4 | q[:, :, 3] << 6).reshape(len(blk), 64)
        return np.concatenate([qs.astype(np.uint8), dh], axis=1)
    # TQ1_0: five trits a byte in base 3, the first most significant, stored as ceil(v * 256 / 243); bytes 0..31
    # take elements m + 32s, bytes 32..47 elements 160 + m + 16s, qh[j] elements 240 + j + 4s (and a 0 trit last)
    def pack(g):  # g: int [blocks, digits, bytes] -> uint8 [blocks, bytes]
        v = np.zeros((g.shape[0], g.shape[2]), np.int64)
        for s in range(g.shape[1]):
            v = (v * 3 + g[:, s]) & 0xFF
        return ((v * 256 + 242) // 243).astype(np.uint8)
    qs0 = pack(t[:, :160].reshape(-1, 5, 32))
    qs1 = pack(t[:, 160:240].reshape(-1, 5, 16))
    qh = pack(np.concatenate([t[:, 240:].reshape(-1, 4, 4), np.zeros((len(blk), 1, 4), np.int64)], axis=1))
    return np.concatenate([qs0, qs1, qh, dh], axis=1)


# --- files ------------------------------------------------------------------------------------------------------

def _plan(f: GGUFFile, out_type: str, tensor_types: list[tuple[str, str]] | None = None):
    """(kvs, tensors) for write_gguf: the rule of the module docstring for `out_type`."""
    if out_type in LLAMA_QUANTIZE_RULE:
        return _plan_llama_quantize(f, out_type, tensor_types or [])
    if tensor_types:
        raise QuantizeError(f"--tensor-type applies to {', '.join(LLAMA_QUANTIZE_RULE)} (llama-quantize's rule)")
    target = GGMLType[out_type]
    kvs = header_kvs(f.header)
    ftype = ("general.file_type", ValueType.UINT32, OUTPUT_TYPES[out_type], None)
    kvs = [ftype if k[0] == "general.file_type" else k for k in kvs]
    if not any(k[0] == "general.file_type" for k in kvs):
        kvs.append(ftype)
    tensors = []
    for ti in f.tensors.values():
        if len(ti.shape) < 2 or ti.type == target:
            tensors.append((ti.name, ti.shape, ti.type, (lambda name=ti.name: f.tensor_bytes(name))))
            continue
        n_per_row = ti.shape[0]
        n_rows = ti.n_elements // n_per_row if n_per_row else 0
        if n_per_row % 32 and out_type not in ("F32", "F16"):
            raise QuantizeError(f"tensor {ti.name!r}: {n_per_row} elements per row cannot be written as {out_type}")

        def encode(ti=ti, n_rows=n_rows, n_per_row=n_per_row):
            x = dequantize(ti.type, f.tensor_bytes(ti.name), n_rows, n_per_row)
            return quantize(out_type, x)
        tensors.append((ti.name, ti.shape, target, encode))
    return kvs, tensors


#: substrings of the names llama-quantize never re-encodes (src/llama-quant.cpp tensor_allows_quantization)
_NEVER = ("_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel",
          "per_layer_model_proj", "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight",
          "indexer.q_proj.weight", "time_mix_", "attn_rel_b.weight", ".position_embd", "sam.pos_embd", "sam.neck.",
          "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger", "a.rvq.codebook", "mm.a.code_embd")
_NEVER_EXACT = ("position_embd.weight", "token_types.weight")
#: llama-quantize's fallback when a row is not a multiple of the chosen type's block (tensor_type_fallback)
_FALLBACK = {"Q2_0": "Q4_0", "Q2_K": "Q4_0", "Q3_K": "Q4_0", "TQ1_0": "Q4_0", "TQ2_0": "Q4_0", "Q4_K": "Q5_0",
             "Q5_K": "Q5_1", "Q6_K": "Q8_0", "IQ4_XS": "IQ4_NL"}
_RULE_ARCHS = ("llama", "qwen3")


def _llama_quantizes(ti) -> bool:
    name = ti.name
    if len(ti.shape) < 2 or not name.endswith("weight") or name in _NEVER_EXACT:
        return False
    return not any(s in name for s in _NEVER)


def _shape_fallback(name: str, n_per_row: int, t: str) -> str:
    blck = TYPE_LAYOUT[GGMLType[t]][0]
    if n_per_row % blck == 0:
        return t
    if t in _FALLBACK:
        t = _FALLBACK[t]
    elif blck > 32:
        raise QuantizeError(f"tensor {name!r}: {n_per_row} elements per row are not a multiple of {blck} "
                            f"(required for {t.lower()}); llama-quantize b11192 stops there: no tensor type "
                            f"fallback is defined for type {t.lower()}")
    return t if n_per_row % TYPE_LAYOUT[GGMLType[t]][0] == 0 else "F16"


#: llama-quantize's default tensor type of each file type it writes here (llama_ftype_get_default_type)
_DEFAULT_TYPE = {"Q4_1": "Q4_1", "Q5_0": "Q5_0", "Q5_1": "Q5_1", "Q2_K": "Q2_K", "Q2_K_S": "Q2_K", "Q3_K_S": "Q3_K",
                 "Q3_K_M": "Q3_K", "Q3_K_L": "Q3_K", "Q4_K_S": "Q4_K", "Q4_K_M": "Q4_K", "Q5_K_S": "Q5_K",
                 "Q5_K_M": "Q5_K", "Q6_K": "Q6_K", "Q1_0": "Q1_0", "Q2_0": "Q2_0", "BF16": "BF16",
                 "IQ4_NL": "IQ4_NL", "IQ4_XS": "IQ4_XS"}
_DEFAULT_TYPE.update({"TQ1_0": "TQ1_0", "TQ2_0": "TQ2_0"})
#: the file types whose tensors are not quantized (ggml_is_quantized false): no override, mix or fallback
_PLAIN = ("BF16",)


def _category(name: str) -> str:
    """llama-quant.cpp's tensor category: exact names first, then the first substring that matches."""
    if name == "output.weight":
        return "output"
    if name in ("token_embd.weight", "per_layer_token_embd.weight"):
        return "token_embd"
    for key, cat in (("attn_qkv.weight", "attn_v"), ("attn_kv_b.weight", "attn_v"), ("attn_v.weight", "attn_v"),
                     ("attn_k.weight", "attn_k"), ("attn_q.weight", "attn_q"),
                     ("attn_output.weight", "attn_output"), ("ffn_up", "ffn_up"), ("ffn_gate", "ffn_gate"),
                     ("ffn_down", "ffn_down")):
        if key in name:
            return cat
    return "other"


def _more_bits(i: int, n: int) -> bool:
    # the layers a mix gives more bits: the first and last eighth, and every third one between
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


class LlamaQuantizeRule:
    """The type llama-quantize b11192 gives each tensor it re-encodes (llama_tensor_get_type and its _impl) for a
    file type of LLAMA_QUANTIZE_RULE, on a model without experts. Stateful as there: the attn_v and ffn_* counters
    advance with each tensor asked about, so `choose` must be called in the loader's tensor order."""

    def __init__(self, out_type: str, *, tied: bool, n_layer: int = 0, n_gqa: int = 1, n_attn_v: int = 0,
                 tensor_types: list[tuple[str, str]] | None = None):
        self.ftype, self.tied, self.n_layer, self.n_gqa, self.n_attn_v = out_type, tied, n_layer, n_gqa, n_attn_v
        self.tensor_types = tensor_types or []
        self.i_attn_v = self.i_ffn_down = 0

    def choose(self, name: str, n_per_row: int) -> str:
        if self.ftype in _PLAIN:
            return _DEFAULT_TYPE[self.ftype]
        for pattern, ttype in self.tensor_types:
            if re.search(pattern, name):
                return _shape_fallback(name, n_per_row, ttype.upper())
        return _shape_fallback(name, n_per_row, self._mix(name, n_per_row, _DEFAULT_TYPE[self.ftype]))

    def _mix(self, name: str, n_per_row: int, t: str) -> str:
        f, cat = self.ftype, _category(name)
        if cat == "output" or (self.tied and cat == "token_embd"):
            if n_per_row % TYPE_LAYOUT[GGMLType[t]][0]:
                return "Q8_0"
            return t if t == "Q8_0" else "Q6_K"
        if cat == "token_embd":
            return "Q4_K" if f in ("Q2_0", "TQ1_0", "TQ2_0") else t
        if cat == "attn_v":
            i, n = self.i_attn_v, self.n_attn_v
            self.i_attn_v += 1
            if f == "Q2_K":
                return "Q4_K" if self.n_gqa >= 4 else "Q3_K"
            if f == "Q2_K_S" and self.n_gqa >= 4:
                return "Q4_K"
            if f == "Q3_K_M":
                return "Q5_K" if i < 2 else "Q4_K"
            if f == "Q3_K_L":
                return "Q5_K"
            if f in ("Q4_K_M", "Q5_K_M") and _more_bits(i, n):
                return "Q6_K"
            if f == "Q4_K_S" and i < 4:
                return "Q5_K"
            if f in ("IQ4_NL", "IQ4_XS") and self.n_gqa >= 4:
                return "Q5_K"
            return t
        if cat == "ffn_down":
            i, n = self.i_ffn_down, self.n_layer
            self.i_ffn_down += 1
            if f == "Q2_K":
                return "Q3_K"
            if f == "Q2_K_S":
                return "Q4_K" if i < n // 8 else t
            if f == "Q3_K_M":
                return "Q5_K" if i < n // 16 else "Q4_K"
            if f == "Q3_K_L":
                return "Q5_K"
            if f in ("Q4_K_M", "Q5_K_M"):
                return "Q6_K" if _more_bits(i, n) else t
            if f in ("Q4_K_S", "IQ4_NL", "IQ4_XS") and i < n // 8:  # the IQ4 rule: no importance matrix
                return "Q5_K"
            return t
        if cat == "attn_output":
            return {"Q2_K": "Q3_K", "Q3_K_M": "Q4_K", "Q3_K_L": "Q5_K"}.get(f, t)
        return t


def llama_quantize_type(name: str, n_per_row: int, out_type: str, tied: bool,
                        tensor_types: list[tuple[str, str]]) -> str:
    """The type llama-quantize b11192 gives one tensor for the file type `out_type`, with the layer counters at
    their start (the first attn_v and ffn_down of the file); LlamaQuantizeRule follows a whole file."""
    return LlamaQuantizeRule(out_type, tied=tied, tensor_types=tensor_types).choose(name, n_per_row)


def _layer_key(name: str):
    m = re.match(r"blk\.([+-]?\d+)", name)
    return (int(m.group(1)) if m else -1, name.encode())


def _plan_llama_quantize(f: GGUFFile, out_type: str, tensor_types: list[tuple[str, str]]):
    h = f.header
    if h.architecture not in _RULE_ARCHS:
        raise QuantizeError(f"{out_type} files are written by llama-quantize's rule for {', '.join(_RULE_ARCHS)}; "
                            f"this file is {h.architecture!r}")
    if (h.arch_key("expert_count") or 0) > 1:
        raise QuantizeError("models with experts are not written by this converter")
    if h.metadata.get("general.alignment", 32) != 32:
        raise QuantizeError("llama-quantize lays its output out at 32 bytes; this file sets general.alignment "
                            f"{h.metadata['general.alignment']}")
    tensor_types = [(pattern, ttype.upper()) for pattern, ttype in tensor_types]
    for _, ttype in tensor_types:
        if ttype not in GGMLType.__members__:
            raise QuantizeError(f"--tensor-type: unknown type {ttype!r}")
    skip = ("general.quantization_version", "general.file_type")
    kvs = [k for k in header_kvs(h) if k[0] not in skip]
    kvs += [("general.quantization_version", ValueType.UINT32, 2, None),
            ("general.file_type", ValueType.UINT32, OUTPUT_TYPES[out_type], None)]
    if out_type == "Q2_K_S":
        # llama-quantize stops here without an importance matrix (tensor_requires_imatrix), and so does bankml
        raise QuantizeError("this quantization requires an imatrix! (Q2_K_S's Q2_K matrices need an importance "
                            "matrix, which bankml quantize does not read)")
    order = sorted(f.tensors.values(), key=lambda ti: _layer_key(ti.name))
    heads, heads_kv = h.arch_key("attention.head_count"), h.arch_key("attention.head_count_kv")
    heads = heads[0] if isinstance(heads, (list, tuple)) else heads
    heads_kv = heads if heads_kv is None else heads_kv[0] if isinstance(heads_kv, (list, tuple)) else heads_kv
    rule = LlamaQuantizeRule(out_type, tied="output.weight" not in f.tensors,
                             n_layer=int(h.arch_key("block_count") or 0),
                             n_gqa=(int(heads) // int(heads_kv)) if heads and heads_kv else 0,
                             n_attn_v=sum(_category(ti.name) == "attn_v" for ti in order),
                             tensor_types=tensor_types)
    tensors = []
    for ti in order:
        copy = (ti.name, ti.shape, ti.type, (lambda name=ti.name: f.tensor_bytes(name)))
        if not _llama_quantizes(ti):
            tensors.append(copy)
            continue
        n_per_row = ti.shape[0]
        t = rule.choose(ti.name, n_per_row)
        if GGMLType[t] == ti.type:
            tensors.append(copy)
            continue
        if t not in ENCODABLE:
            raise QuantizeError(f"tensor {ti.name!r}: llama-quantize writes it as {t}, which this converter does "
                                f"not encode (it writes {', '.join(ENCODABLE)})")
        if type_name(ti.type) not in DECODABLE:
            raise QuantizeError(f"tensor {ti.name!r}: type {type_name(ti.type)} cannot be decoded by the "
                                f"converter yet (it reads {', '.join(DECODABLE)})")
        n_rows = ti.n_elements // n_per_row

        def encode(ti=ti, n_rows=n_rows, n_per_row=n_per_row, t=t):
            return quantize(t, dequantize(ti.type, f.tensor_bytes(ti.name), n_rows, n_per_row))
        tensors.append((ti.name, ti.shape, GGMLType[t], encode))
    return kvs, tensors


def convert(src: str | os.PathLike, dst: str | os.PathLike, out_type: str, *,
            provenance: dict | None = None, progress: ProgressArg = None,
            tensor_types: list[tuple[str, str]] | None = None) -> Path:
    """Write `dst`, the derived file of `src` in `out_type`, atomically, and its pin `dst.FORK.json` beside it.
    `provenance` is merged into the pin's provenance (e.g. the model's name). `tensor_types`: llama-quantize's
    `--tensor-type PATTERN=TYPE` overrides, in order (Q1_0 and Q2_0 only)."""
    out_type = out_type.upper()
    src, dst = check_paths(src, dst, out_type, QuantizeError)
    tensor_types = [(pat.lower(), t.upper()) for pat, t in tensor_types or []]
    src_sha = sha256_file(src, progress)
    with GGUFFile(src) as f:
        kvs, tensors = _plan(f, out_type, tensor_types)
        with Progress(len(tensors), f"writing {dst.name}", progress) as bar:
            def step(data):
                def run():
                    b = data() if callable(data) else data
                    bar.update(1)
                    return b
                return run
            prov = {"model": f"{src.stem} re-encoded as {out_type}",
                    "derived_from": {"path": src.name, "bytes": os.path.getsize(src), "sha256": src_sha},
                    "converter": f"bankml.quantize (bankml {__version__})", "type": out_type,
                    "how": f"bankml quantize {src.name} {dst.name} {out_type}: tensors of two or more dimensions "
                           f"decoded to float32 and encoded as {out_type} (ggml's reference rules), others copied"}
            if out_type in LLAMA_QUANTIZE_RULE:
                prov["how"] = (f"bankml quantize {src.name} {dst.name} {out_type}: llama-quantize b11192's rule "
                               f"(tensor order, per-tensor types, metadata) with ggml's reference encoders")
                if tensor_types:
                    prov["tensor_types"] = [f"{p}={t}" for p, t in tensor_types]
            prov.update(provenance or {})
            align = 32 if out_type in LLAMA_QUANTIZE_RULE else f.header.alignment
            write_derived(dst, kvs, [(n, s, t, step(d)) for n, s, t, d in tensors], align, prov)
    return dst


def check_paths(src, dst, out_type: str | None, error: type) -> tuple[Path, Path]:
    """(src, dst) as paths, or `error` when out_type (None: none) cannot be written or dst would overwrite src."""
    if out_type is not None and out_type not in OUTPUT_TYPES:
        raise error(f"cannot write type {out_type!r}; the converter writes {', '.join(OUTPUT_TYPES)}")
    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        raise error("the output would overwrite the input")
    return src, dst


def write_derived(dst: Path, kvs, tensors, alignment: int, provenance: dict, prefix: str = ".quantize-") -> None:
    """Write a derived GGUF file (write_gguf's kvs and tensors) to a temporary name beside `dst` (`prefix`...), rename it to `dst`
    (mode as a new file's), then its pin `dst.FORK.json` with `provenance`."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".gguf", dir=dst.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            write_gguf(out, kvs, tensors, alignment=alignment)
            out.flush()
            os.fsync(out.fileno())
        digest = sha256_file(tmp, False)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # mkstemp makes the file 0600; an output file gets the usual mode
        os.replace(tmp, dst)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    write_pin(pin_path_beside(dst), make_pin([{"path": dst.name, "bytes": dst.stat().st_size, "sha256": digest}],
                                             provenance))


# --- the `bankml quantize` subcommand ---------------------------------------------------------------------------

def add_parser(subparsers) -> None:
    p = subparsers.add_parser("quantize", help="write a derived GGUF file with its matrices re-encoded as TYPE",
                              description="Write OUT: the GGUF file IN with every tensor of two or more dimensions "
                                          "re-encoded as TYPE (deterministic: the same bytes every run), and its "
                                          "pin OUT.FORK.json recording IN's sha256.")
    p.add_argument("input", metavar="IN")
    p.add_argument("output", metavar="OUT")
    p.add_argument("type", metavar="TYPE", type=str.upper, choices=list(OUTPUT_TYPES),
                   help=", ".join(OUTPUT_TYPES))
    p.add_argument("--tensor-type", action="append", default=[], metavar="PATTERN=TYPE", type=_tensor_type,
                   help="as llama-quantize's: tensors whose name contains a match of PATTERN (a regular "
                        "expression) are written as TYPE (the types written by llama-quantize's rule only)")
    p.set_defaults(func=_run)


def _tensor_type(arg: str) -> tuple[str, str]:
    pattern, sep, ttype = arg.partition("=")
    if not sep or not pattern or not ttype:
        raise argparse.ArgumentTypeError(f"malformed tensor type {arg!r} (PATTERN=TYPE)")
    if ttype.upper() not in GGMLType.__members__:
        raise argparse.ArgumentTypeError(f"invalid ggml type {ttype!r}")
    return pattern, ttype


def _run(args: argparse.Namespace) -> int:
    try:
        out = convert(args.input, args.output, args.type, progress=None, tensor_types=args.tensor_type)
    except OSError as e:
        print(f"bankml: {e.filename or args.input}: {e.strerror or e}", file=sys.stderr)
        return 1
    print(f"{out} ({out.stat().st_size} bytes), pin {pin_path_beside(out)}")
    return 0
