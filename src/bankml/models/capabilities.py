"""What bankml's engine can run: the one table the guard (`bankml.models.verify.guard`) checks a model against.

THIS IS A PLAIN DATA TABLE, EDITED BY EVERY PART THAT ADDS SUPPORT. When the forward pass learns a new weight
type, or the tokenizer a new model or pre-tokenizer, add it here in the same commit (with the tests that show
it reproduces llama.cpp b11192); nothing else in bankml keeps its own list. A new architecture is a description
in `bankml.models.arch` (docs/architectures.md), shown here as `ARCHITECTURES`. Entries are names as they
appear in a GGUF file (`general.architecture`, ggml type names such as "Q4_1", `tokenizer.ggml.model`,
`tokenizer.ggml.pre`).

Owns: the list of supported things. Must not know: how they run (that is bankml.engine / bankml.tokenizer).
"""

from __future__ import annotations

from . import arch

# --- weights -----------------------------------------------------------------------------------------------
# ggml tensor types the engine can use, per role a tensor plays in the graph.
WEIGHT_TYPES: dict[str, frozenset[str]] = {
    # matrix multiplications (attention and feed-forward projections, the output head); each bit-exact with
    # llama.cpp b11192: tests/test_engine_oracle.py (SmolLM2 Q4_1, F16, Q8_0, F32 files) and
    # tests/test_kernels_forward.py (ggml's MUL_MAT). Q4_0 / K-quants per architecture below
    "matrix": frozenset({"F32", "F16", "Q8_0", "Q4_1"}),
    # the token embedding table (rows are looked up, then dequantized; GET_ROWS checked against ggml's)
    "embedding": frozenset({"F32", "F16", "Q8_0", "Q4_1"}),
    # RMS-norm weights, biases and other vectors
    "vector": frozenset({"F32"}),
}

# Types an architecture's graph runs beyond WEIGHT_TYPES, per role: gemma3's matrices also in Q5_0, Q4_K (the
# repacked q4_K_8x8 products llama-server runs) and Q6_K, bit-exact on Gemma 3 270M Q4_K_M
# (tests/test_forward_gemma3.py); the llama and qwen3 graphs too, bit-exact on SmolLM2 and its qwen3 re-description
# in Q4_K_M (tests/test_forward_kquants_llama.py). llama and qwen3 also take Q5_1 and Q5_K matrices (one vec_dot per
# output, as ggml-cpu runs them on x86) and Q4_K / Q5_K / Q6_K token embeddings (ggml-base's to_float): op records
# tests/oracle/forward/ops_k.json (48 MUL_MAT + 9 GET_ROWS, tests/test_kernels_forward.py: 57 of 57 identical) and
# graph records q5_k_m / q5_k_s / q5_1 / qwen3_q5_k_m (1,092 rows each) and shapes_q4_k_m (117 + 117 + 21 rows,
# untied Q4_K and tied Q6_K embeddings, the 1B llama), replayed by tests/test_forward_kquants_llama.py.
# The llama and qwen3 graphs' matrices also in Q2_K and Q3_K (one vec_dot per output against Q8_K activations,
# as the AVX2 build runs them: no repack, no sgemm), bit-exact on SmolLM2 and its qwen3 re-description with
# Q2_K / Q3_K ffn_down matrices (tests/test_forward_kquants_q23.py, records q2_k_overrides.json,
# q3_k_s_overrides.json and qwen3_q2_k_overrides.json: 1,092 of 1,092 rows identical each), and as ops in
# ops_k.json (48 more MUL_MAT cases, n = 1 .. 64 columns: 48 of 48 identical).
# The llama and qwen3 graphs' matrices (the tied output head too) and token embeddings also in BF16: activations
# rounded to BF16 (ggml_cpu_fp32_to_bf16), then tinyBLAS's BF16 order (n >= 2, m % 4 == 0, k % 8 == 0) or
# ggml_vec_dot_bf16's AVX2 order; the embedding rows widened exactly. Op records tests/oracle/forward/ops_bf16.json
# (156 MUL_MAT of n = 1 .. 512 columns + 4 GET_ROWS, tests/test_kernels_forward.py: 160 of 160 identical) and
# graph records bf16 and qwen3_bf16 (SmolLM2's F16 file and its qwen3 re-description written as BF16 by `bankml
# quantize`, llama-quantize's bytes: 1,142 of 1,142 and 1,092 of 1,092 rows identical), replayed by
# tests/test_forward_bf16.py.
# The llama and qwen3 graphs' matrices and token embeddings also in Q4_0: repacked q4_0_8x8 where the rows are a
# multiple of 8 (llama-server's CPU_REPACK buffer, the tied head's MUL_MAT copy too), one vec_dot per output
# otherwise, Q8_0 activations; bit-exact on SmolLM2 and its qwen3 re-description re-encoded as Q4_0 and on
# SmolLM2's plain Q2_K / Q3_K_S / Q3_K_M / Q3_K_L mixes and the qwen3 Q3_K_M (Q4_0 on the rows of 576):
# tests/test_forward_q4_0.py, records q4_0.json (1,142 rows), q2_k.json and q3_k_m.json (1,092 rows each),
# qwen3_q4_0, q3_k_s, q3_k_l, qwen3_q3_k_m (117 rows each); mul_mat.json's 124 Q4_0 nodes through bk_matmul.
# The llama and qwen3 graphs' matrices also in IQ4_NL and IQ4_XS (issue 14), as llama-server's haswell build runs
# them: IQ4_NL repacked iq4_nl_8x8 where the rows are a multiple of 8 (else vec_dot for one column, tinyBLAS_Q0_AVX
# for more), Q8_0 activations; IQ4_XS against Q8_K activations by vec_dot, or by ggml-cpu's IQ panel gemm from 8
# columns on a multiple of 8 rows. Op records tests/oracle/kquants/iq4.json (134 MUL_MAT nodes, n = 1 .. 512: 134 of
# 134 identical) and graph records iq4_nl, qwen3_iq4_nl, iq4_xs, qwen3_iq4_xs (SmolLM2's F16 file and the qwen3
# re-description in llama-quantize's IQ4_NL / IQ4_XS mixes, written by `bankml quantize`: 117 of 117 rows each),
# replayed by tests/test_forward_iq4.py. llama also takes an IQ4_NL token embedding (GET_ROWS by to_float; the tied
# head repacked iq4_nl_8x8): record iq4_nl_embd (the F16 file as IQ4_NL with --tensor-type token_embd=iq4_nl,
# llama-quantize's bytes: 117 of 117 rows). qwen3 IQ4_NL and any IQ4_XS embeddings stay refused (not recorded).
# qwen3's matrices also in the Bonsai types Q1_0 and Q2_0 (one vec_dot per output against Q8_0 activations, as
# ggml-cpu runs them on x86), bit-exact on the qwen3 test file quantized by `bankml quantize`
# (tests/test_forward_qwen3.py, records qwen3_q2_0.json and qwen3_q1_0.json).
# The llama and qwen3 graphs' matrices and token embeddings also in the ternary types TQ1_0 and TQ2_0 (one vec_dot
# per output against Q8_K activations on the AVX2 build: no repack, no sgemm; ggml-base's dequantize_row_tq* for
# GET_ROWS; src/kernels/quants_tq.h), bit-exact on llama-quantize's TQ1_0 / TQ2_0 mixes of SmolLM2, its qwen3
# re-description and a synthetic 1024-wide llama, and on that one with a ternary token embedding (an override: the
# mixes never put one there): tests/test_forward_tq.py, records tq2_0, tq1_0, qwen3_tq2_0, qwen3_tq1_0,
# synth_tq2_0, synth_tq1_0, synth_tq2_0_embd, synth_tq1_0_embd (117 rows each); ops_tq.json (70 MUL_MAT + 6
# GET_ROWS); docs/ternary.md.
ARCH_WEIGHT_TYPES: dict[str, dict[str, frozenset[str]]] = {
    "gemma3": {"matrix": WEIGHT_TYPES["matrix"] | {"Q5_0", "Q4_K", "Q6_K"}},
    "qwen3": {"matrix": WEIGHT_TYPES["matrix"] | {"Q1_0", "Q2_0", "Q4_0", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K",
                                                   "Q5_K", "Q6_K", "BF16", "IQ4_NL", "IQ4_XS"},
              "embedding": WEIGHT_TYPES["embedding"] | {"Q4_0", "Q4_K", "Q5_K", "Q6_K", "BF16"}},
    "llama": {"matrix": WEIGHT_TYPES["matrix"] | {"Q4_0", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
                                                   "BF16", "IQ4_NL", "IQ4_XS"},
              "embedding": WEIGHT_TYPES["embedding"] | {"Q4_0", "Q4_K", "Q5_K", "Q6_K", "BF16", "IQ4_NL"}},
}
for _a in ("llama", "qwen3"):  # the ternary types (comment above)
    ARCH_WEIGHT_TYPES[_a]["matrix"] |= {"TQ1_0", "TQ2_0"}
    ARCH_WEIGHT_TYPES[_a]["embedding"] |= {"TQ1_0", "TQ2_0"}


def weight_types(architecture: str, role: str) -> frozenset[str]:
    """The types a tensor of `role` may have in a file of `architecture`."""
    return ARCH_WEIGHT_TYPES.get(architecture, {}).get(role, WEIGHT_TYPES[role])

# --- architectures ------------------------------------------------------------------------------------------
# The architectures are described in `bankml.models.arch` (one module each: keys, defaults, tensors with their
# roles and engine slots, the graph's checks), the one place the guard and the engine both read. Shown here as
# a plain table, for each `general.architecture`:
#   hparams: keys `{arch}.{suffix}` the file must have, with the GGUF type llama.cpp's loader insists on
#   optional_hparams: keys read when present, with their type
#   unsupported: keys the engine cannot honour yet -> the only value accepted (absence is always accepted;
#                None: any value is refused)
#   tensors: tensor name -> (role in WEIGHT_TYPES, shape in ggml order written with dims, required);
#            "{i}" stands for a layer number 0 .. block_count-1. A tensor not listed here is refused: llama.cpp
#            refuses a file with tensors its graph does not use.
ARCHITECTURES: dict[str, dict] = {name: a.table() for name, a in arch.ARCHITECTURES.items()}

# --- tokenizers ---------------------------------------------------------------------------------------------
# `tokenizer.ggml.model` -> the `tokenizer.ggml.pre` names the tokenizer reproduces. A missing pre counts as
# "default" (llama.cpp's rule for BPE); None means llama.cpp ignores the pre name for that model.
TOKENIZERS: dict[str, frozenset[str] | None] = {
    "gpt2": frozenset({"smollm", "qwen2", "llama-bpe", "gpt-2", "default"}),  # byte-level BPE
    "llama": None,  # SentencePiece
}

# metadata keys the tokenizer needs, per tokenizer model: key -> (value type, element type for arrays)
TOKENIZER_KEYS: dict[str, dict[str, tuple[str, str | None]]] = {
    "gpt2": {"tokenizer.ggml.tokens": ("ARRAY", "STRING"), "tokenizer.ggml.merges": ("ARRAY", "STRING")},
    "llama": {"tokenizer.ggml.tokens": ("ARRAY", "STRING")},
}

# --- chat templates -----------------------------------------------------------------------------------------
# The template must parse with bankml.jinja, llama.cpp's own Jinja dialect (llama-server --jinja renders it).
