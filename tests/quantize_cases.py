"""Seeded inputs for the converter's oracle (testing/record_quantize.py records what ggml-base b11192 makes of
them; tests/test_quantize.py rebuilds the same inputs and replays). Each case is float32 rows to encode, or raw
blocks to decode; the same seed gives the same bytes on every machine (numpy's PCG64)."""

from __future__ import annotations

import numpy as np

N_PER_ROW = 256
ENCODE_TYPES = ("F16", "Q8_0", "Q4_0", "Q1_0", "Q2_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
                "BF16", "IQ4_NL", "IQ4_XS")
ENCODE_TYPES += ("TQ1_0", "TQ2_0")
DECODE_TYPES = {"F16": (1, 2), "BF16": (1, 2), "Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20),
                "Q1_0": (128, 18), "Q2_0": (64, 18), "IQ4_NL": (32, 18), "IQ4_XS": (256, 136)}

# llama-quantize runs (testing/record_quantize.py): (source, type, --tensor-type overrides). SmolLM2's rows of 576
# are not a multiple of Q1_0's block of 128, so a plain Q1_0 run stops; the overrides keep those matrices in
# Q8_0 and leave Q1_0 to ffn_down (rows of 1536).
Q1_0_OVERRIDES = ("attn_=q8_0", "ffn_(gate|up)=q8_0")
# The K mixes and the 32-block types after them: SmolLM2's rows of 576 send most K matrices to their fallbacks
# (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K / Q3_K -> Q4_0); ffn_down (rows of 1536) keeps the mix's types,
# and K_OVERRIDES puts every K type on ffn_down and ffn_up (rows of 576 then fall back, as llama-quantize does).
MIXES = ("Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K",
         "Q2_K_S")
K_OVERRIDES = ("blk\\.[0-4]\\.ffn_down=q2_k", "blk\\.[5-9]\\.ffn_down=q3_k", "blk\\.1[0-4]\\.ffn_down=q4_k",
               "blk\\.1[5-9]\\.ffn_down=q5_k", "ffn_down=q6_k")
# The Q2_K / Q3_K files of the forward records (testing/record_forward.py, tests/test_forward_kquants_q23.py), by
# record name: (source, mix, overrides). Attention, gate and up stay Q8_0 (rows of 576 would fall back to Q4_0), so
# ffn_down is Q2_K, Q3_K (the Q3_K_S mix's), or Q2_K on layers 0-9 and Q3_K after; "f16" is SmolLM2's F16 file.
Q23_OVERRIDES = {"q2_k_overrides": ("f16", "Q2_K", Q1_0_OVERRIDES + ("ffn_down=q2_k",)),
                 "q3_k_s_overrides": ("f16", "Q3_K_S", Q1_0_OVERRIDES),
                 "qwen3_q2_k_overrides": ("qwen3", "Q2_K", Q1_0_OVERRIDES + ("blk\\.[0-9]\\.ffn_down=q2_k",))}
# An IQ4_NL token embedding (no mix writes one): SmolLM2's F16 file as IQ4_NL with token_embd overridden to IQ4_NL
# (tied: the output head's MUL_MAT reads the same rows, repacked iq4_nl_8x8)
IQ4_EMBD = ("f16", "IQ4_NL", ("token_embd=iq4_nl",))
LLAMA_QUANTIZE_CASES = ([(src, t, tts) for src in ("smollm2", "qwen3")
                         for t, tts in (("Q2_0", ()), ("Q1_0", ()), ("Q1_0", Q1_0_OVERRIDES))]
                        + [("smollm2", t, ()) for t in MIXES] + [("qwen3", t, ()) for t in ("Q4_K_M", "Q6_K", "Q3_K_M")]
                        + [("smollm2", "Q4_K_M", K_OVERRIDES)] + list(Q23_OVERRIDES.values())
                        + [(src, "BF16", ()) for src in ("smollm2", "f16", "qwen3")]
                        + [(src, t, ()) for t in ("IQ4_NL", "IQ4_XS") for src in ("f16", "qwen3")] + [IQ4_EMBD])
# The ternary mixes (issue 14): SmolLM2's F16 file and the qwen3 re-description (rows of 576 fall back to Q4_0, the
# tied embedding Q8_0, ffn_down ternary), and the untied head-128 synthetic shape from F16 (rows of 1024 and 2816:
# every matrix ternary, token_embd Q4_K, output Q6_K): "synth" is bankml.models.synth's TQ_SHAPE file
TQ_SYNTH = ("llama-h128-gqa4-untied", "F16")
LLAMA_QUANTIZE_CASES += [(src, t, ()) for src in ("f16", "qwen3", "synth") for t in ("TQ2_0", "TQ1_0")]
# and the synthetic shape with a ternary token embedding too (an override: the mixes never put one there)
TQ_EMBD = {t: (f"token_embd={t.lower()}",) for t in ("TQ2_0", "TQ1_0")}
LLAMA_QUANTIZE_CASES += [("synth", t, tts) for t, tts in TQ_EMBD.items()]


def llama_quantize_key(src: str, tname: str, tensor_types) -> str:
    return f"{src}-{tname.lower()}" + ("-overrides" if tensor_types else "")


def encode_cases() -> dict[str, np.ndarray]:
    """name -> float32[rows, N_PER_ROW]"""
    rng = np.random.default_rng(20261201)
    f = np.float32
    out = {
        "normal": rng.standard_normal((16, N_PER_ROW)).astype(f),
        "wide": (rng.standard_normal((8, N_PER_ROW)) * np.exp(rng.uniform(-30, 30, (8, 1)))).astype(f),
        "zeros": np.zeros((2, N_PER_ROW), f),
        "subnormal": (rng.standard_normal((4, N_PER_ROW)) * f(1e-40)).astype(f),
        "tiny_f16": (rng.standard_normal((4, N_PER_ROW)) * f(3e-6)).astype(f),
        "huge": (rng.standard_normal((4, N_PER_ROW)) * f(1e30)).astype(f),
        "f16_edge": rng.choice(np.array([65504, 65519, 65520, -65520, 6.1e-5, 5.96e-8, 2.98e-8, 0.5, -0.5],
                                        f), (4, N_PER_ROW)).astype(f),
    }
    # ties: the largest magnitude reached by several elements, of both signs (Q4_0 takes the first one)
    t = rng.integers(-8, 9, (8, N_PER_ROW)).astype(f)
    t[:, ::7] = 8
    t[:, 3::11] = -8
    out["ties"] = t * f(0.25)
    # values whose scaled form lands on .5 exactly (roundf rounds half away from zero)
    h = (rng.integers(-254, 255, (8, N_PER_ROW)).astype(f) / f(2))
    h[:, ::32] = 127
    out["halves"] = h
    # small integers: every block's values on the Q4_0 and Q8_0 grids
    out["grid"] = rng.integers(-127, 128, (4, N_PER_ROW)).astype(f)
    return out


def bf16_encode_cases() -> dict[str, np.ndarray]:
    """name -> float32[rows, N_PER_ROW]: the values only BF16's encoder is asked about (the others' rules for
    them are not followed): NaNs (quiet, signalling, with payloads, both signs), infinities, values that round to
    infinity, and ties of the rounding at every exponent."""
    rng = np.random.default_rng(20261206)
    u = rng.integers(0, 2 ** 32, (4, N_PER_ROW), dtype=np.uint64).astype(np.uint32)
    u[0, ::3] = (u[0, ::3] & 0x807FFFFF) | 0x7F800000               # NaN (or inf when the mantissa is 0)
    u[0, 1::7] = np.array([0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7F8000, 0x7F800001, 0xFFC00001, 0x7FFF8000],
                          np.uint32).repeat(6)[:len(u[0, 1::7])]
    u[1] = (u[1] & 0xFFFF0000) | 0x8000                                # every element a tie
    u[2] = (u[2] & 0xFFFF0000) | 0x7FFF                                # just below a tie
    u[3, ::2] = u[3, ::2] & 0x807FFFFF                                 # subnormals
    return {"bf16_specials": u.view(np.float32)}


def decode_cases() -> dict[str, tuple[str, np.ndarray, int]]:
    """name -> (type, raw uint8 bytes of `rows` rows of N_PER_ROW, rows). Block scales are finite halves."""
    rng = np.random.default_rng(1201)
    out = {}
    for tname, (blck, bsize) in DECODE_TYPES.items():
        rows = 8
        n_blocks = rows * N_PER_ROW // blck
        raw = rng.integers(0, 256, (n_blocks, bsize), dtype=np.uint8)
        if tname in ("F16", "BF16"):
            v = raw.view("<u2")
            exp_mask = 0x7C00 if tname == "F16" else 0x7F80
            v[(v & exp_mask) == exp_mask] &= np.uint16(~0x4000 & 0xFFFF)  # no inf or NaN
        else:
            n_scales = 2 if tname == "Q4_1" else 1
            s = rng.standard_normal((n_blocks, n_scales)).astype(np.float16)
            raw[:, :2 * n_scales] = s.view(np.uint8).reshape(n_blocks, 2 * n_scales)
        out[f"{tname.lower()}_random"] = (tname, raw.reshape(-1), rows)
    return out


def bonsai_derived(src, dst, tname: str):
    """The Q2_0 / Q1_0 test file of `src` (the qwen3 re-description) as the forward records were made of it:
    `bankml quantize SRC DST Q2_0`, or Q1_0 with Q1_0_OVERRIDES (tests/test_quantize.py shows the bytes are
    llama-quantize's)."""
    from bankml.models import quantize
    tts = [tuple(t.split("=", 1)) for t in Q1_0_OVERRIDES] if tname == "Q1_0" else None
    return quantize.convert(src, dst, tname, tensor_types=tts, progress=False)


def tq_derived(src, tname: str, tensor_types=()):
    """The ternary test file of `src` as the forward records were made of it (testing/record_forward.py TQ_SETS):
    `bankml quantize SRC DST TQ2_0|TQ1_0 [--tensor-type ...]` into <models>/derived, made when missing
    (tests/test_quantize.py shows the bytes are llama-quantize's)."""
    from pathlib import Path
    from bankml.models import quantize
    src = Path(src)
    models = src.parent.parent if src.parent.name == "derived" else src.parent
    stem = src.stem.removesuffix("-q4_1").removesuffix("-f16").removesuffix("-q8_0")
    dst = models / "derived" / f"{stem}-{tname.lower()}{'-embd' if tensor_types else ''}.gguf"
    if not dst.exists():
        quantize.convert(src, dst, tname, tensor_types=[tuple(t.split("=", 1)) for t in tensor_types],
                         progress=False)
    return dst
