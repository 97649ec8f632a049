"""Inputs of the weight-kernel oracle cases (tests/test_kernels_kquants.py and testing/record_kquants.py), rebuilt
from each case's parameters so the records hold only parameters and hashes.

A MUL_MAT case is a dict: wtype (ggml id), k, m, n, weights ({"tensor": name, "rows": [r0, r1]}: rows of a
Gemma 3 270M Q4_K_M matrix; {"smollm2": name, "rows": [r0, r1]}: rows of a SmolLM2-135M Q4_1 matrix encoded as
Q4_0 by bankml's converter (bankml.models.quantize, ggml's reference encoder: the derived Q4_0 test file's weights);
with "as": "Q1_0" / "Q2_0", encoded as that type instead; or {"seed": s}: seeded random blocks of wtype), act ({"seed": s, "kind": ...,
"scale": x}), repack (whether llama-server repacks such a weight: the oracle computed it in CPU_REPACK),
nth (the oracle's thread count). `input_sha256` in a record pins the inputs (weights and activations): a drift
of the random streams or of the model file shows as such, not as a kernel mismatch.
"""

from __future__ import annotations

import hashlib

import numpy as np

Q4_0, Q5_0, Q8_0, Q4_K, Q6_K, Q1_0, Q2_0 = 2, 6, 8, 12, 14, 41, 42
IQ4_NL, IQ4_XS = 20, 23
TYPE_NAMES = {Q4_0: "Q4_0", Q5_0: "Q5_0", Q8_0: "Q8_0", Q4_K: "Q4_K", Q6_K: "Q6_K", Q1_0: "Q1_0", Q2_0: "Q2_0",
              IQ4_NL: "IQ4_NL", IQ4_XS: "IQ4_XS"}
BLOCK = {Q4_0: (32, 18), Q5_0: (32, 22), Q8_0: (32, 34), Q4_K: (256, 144), Q6_K: (256, 210),
         Q1_0: (128, 18), Q2_0: (64, 18), IQ4_NL: (32, 18), IQ4_XS: (256, 136)}  # (values, bytes)

ACT_KINDS = ("normal", "outliers", "zero_blocks", "ties", "tiny", "mixed")


def sha256(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def row_bytes(wtype: int, k: int) -> int:
    qk, bb = BLOCK[wtype]
    assert k % qk == 0, (wtype, k)
    return k // qk * bb


def _halves(rng, n, lo, hi, signed=False):
    v = rng.uniform(lo, hi, n)
    if signed:
        v *= rng.choice([-1.0, 1.0], n)
    return v.astype(np.float16).view(np.uint16)


def random_weights(wtype: int, m: int, k: int, seed: int) -> np.ndarray:
    """m rows of k values of wtype as uint8 [m, row_bytes]: random quants, finite scales of realistic size."""
    rng = np.random.default_rng(seed)
    qk, bb = BLOCK[wtype]
    nb = m * (k // qk)
    raw = rng.integers(0, 256, (nb, bb), dtype=np.uint8)
    if wtype in (Q1_0, Q2_0):  # half d; qs[16]
        raw[:, 0:2] = _halves(rng, nb, 1e-4, 4e-2, signed=True).view(np.uint8).reshape(nb, 2)
    elif wtype == Q4_0:  # half d; qs[16]
        raw[:, 0:2] = _halves(rng, nb, 1e-4, 4e-2, signed=True).view(np.uint8).reshape(nb, 2)
    elif wtype == Q5_0:  # half d; qh[4]; qs[16]
        raw[:, 0:2] = _halves(rng, nb, 1e-4, 4e-2, signed=True).view(np.uint8).reshape(nb, 2)
    elif wtype == Q8_0:  # half d; int8 qs[32]
        raw[:, 0:2] = _halves(rng, nb, 1e-4, 2e-2, signed=True).view(np.uint8).reshape(nb, 2)
    elif wtype == Q4_K:  # half d; half dmin; scales[12]; qs[128]
        raw[:, 0:2] = _halves(rng, nb, 1e-4, 2e-3).view(np.uint8).reshape(nb, 2)
        raw[:, 2:4] = _halves(rng, nb, 1e-4, 2e-3).view(np.uint8).reshape(nb, 2)
    elif wtype in (IQ4_NL, IQ4_XS):  # half d; then qs[16] (IQ4_NL) or scales_h, scales_l[4], qs[128] (IQ4_XS)
        raw[:, 0:2] = _halves(rng, nb, 1e-5, 2e-3, signed=True).view(np.uint8).reshape(nb, 2)
    elif wtype == Q6_K:  # ql[128]; qh[64]; int8 scales[16]; half d
        raw[:, 208:210] = _halves(rng, nb, 1e-5, 2e-3, signed=True).view(np.uint8).reshape(nb, 2)
    return raw.reshape(m, -1)


def activations(act: dict, n: int, k: int) -> np.ndarray:
    """float32 [n, k] of a kind: normal; outliers (a few large values a row); zero_blocks (whole 256- and
    32-value blocks of zeros); ties (+amax and -amax in the same super-block, -amax first: the one place
    the 4x8 and the row Q8_K quantizers choose different signs); tiny (1e-30 scale); mixed (rows of each)."""
    rng = np.random.default_rng(act["seed"])
    kind, scale = act["kind"], act.get("scale", 1.0)
    x = (rng.standard_normal((n, k)) * scale).astype(np.float32)
    if kind == "normal":
        pass
    elif kind == "outliers":
        idx = rng.integers(0, k, (n, 4))
        for r in range(n):
            x[r, idx[r]] = (rng.standard_normal(4) * 60 * scale).astype(np.float32)
    elif kind == "zero_blocks":
        for r in range(n):
            if k >= 512 and r % 2 == 0:
                b = int(rng.integers(0, k // 256)) * 256
                x[r, b:b + 256] = 0.0
            b = int(rng.integers(0, k // 32)) * 32
            x[r, b:b + 32] = 0.0
        if n > 2:
            x[n // 2] = 0.0
    elif kind == "ties":
        for r in range(n):
            for b in range(0, k - 255, 256):
                amax = np.float32(np.abs(x[r, b:b + 256]).max() * 1.25)
                i, j = sorted(rng.choice(256, 2, replace=False))
                x[r, b + i], x[r, b + j] = -amax, amax
    elif kind == "tiny":
        x *= np.float32(1e-30)
    elif kind == "mixed":
        kinds = ["normal", "outliers", "zero_blocks", "ties", "tiny"]
        for r in range(n):
            x[r] = activations(dict(seed=act["seed"] * 7 + r, kind=kinds[r % 5], scale=scale), 1, k)[0]
    else:
        raise ValueError(f"unknown activation kind {kind!r}")
    return x


def smollm2_q4_0(gguf_file, name: str, rows, as_type: str = "Q4_0") -> np.ndarray:
    """Rows r0..r1 of a SmolLM2 Q4_1 matrix decoded and encoded as Q4_0 (or `as_type`: Q1_0, Q2_0) by
    bankml.models.quantize (ggml's reference encoders, the bytes llama-quantize writes)."""
    from bankml.models import quantize
    t = np.asarray(gguf_file.tensor(name))
    r0, r1 = rows
    info = gguf_file.tensors[name]
    x = quantize.dequantize(int(info.type), t[r0:r1], r1 - r0, int(info.shape[0]))
    return quantize.quantize(as_type, x)


def weights(case: dict, gguf_file=None) -> np.ndarray:
    """The case's weight rows, uint8 [m, row_bytes] (a view into the model's mmap for real rows). gguf_file is
    the Gemma 3 file, or for "smollm2" cases the SmolLM2 one."""
    w = case["weights"]
    if "smollm2" in w:
        if gguf_file is None:
            raise ValueError(f"case needs the SmolLM2 file for {w['smollm2']}")
        return smollm2_q4_0(gguf_file, w["smollm2"], w["rows"], w.get("as", "Q4_0"))
    if "tensor" in w:
        if gguf_file is None:
            raise ValueError(f"case needs the Gemma 3 file for {w['tensor']}")
        t = np.asarray(gguf_file.tensor(w["tensor"]))
        r0, r1 = w["rows"]
        return t[r0:r1]
    return random_weights(case["wtype"], case["m"], case["k"], w["seed"])


def make_inputs(case: dict, gguf_file=None):
    """(weights uint8 [m, row_bytes], activations float32 [n, k]) of a MUL_MAT case."""
    w = weights(case, gguf_file)
    assert w.shape == (case["m"], row_bytes(case["wtype"], case["k"])), (w.shape, case)
    return w, activations(case["act"], case["n"], case["k"])


def glu_inputs(case: dict):
    """(x, g) float32 [rows, n] of a GELU / GEGLU case: x spans the table range and the +-10 clamps."""
    rng = np.random.default_rng(case["seed"])
    rows, n = case["rows"], case["n"]
    x = (rng.standard_normal((rows, n)) * case["scale"]).astype(np.float32)
    x.reshape(-1)[: min(16, x.size)] = np.array([-10, 10, -10.000001, 9.999999, 10.000001, -9.999999, 0, -0.0,
                                                  1e-8, -1e-8, 65504, 7e4, -7e4, 3e-5, -11, 11], np.float32)[: min(16, x.size)]
    g = (rng.standard_normal((rows, n)) * 2).astype(np.float32)
    return x, g


def all_halves() -> np.ndarray:
    """Every F16 bit pattern as float32 [64, 1024] (NaNs included): the GELU op's whole table domain."""
    return np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32).reshape(64, 1024)
