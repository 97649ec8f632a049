"""The llama architecture (`general.architecture` "llama": SmolLM2 and other llama files), as the engine's
llama graph runs it.

Owns: llama's description (keys, defaults, unsupported keys, tensors and their engine slots, options, the
graph's checks). Must not know: weight types per role (bankml.models.capabilities), how the graph runs.
Mirrors: src/llama-model.cpp (LLM_ARCH_LLAMA in load_hparams and load_tensors), src/llama-arch.cpp (tensor
names), src/models/llama.cpp (what the graph asserts) of b11192.
"""

from __future__ import annotations

from .describe import Architecture, Check, Key, Ratio, Same, Tensor, TokenCount

LLAMA = Architecture(
    name="llama",
    keys=(
        # required, with the GGUF type llama.cpp's loader insists on
        Key("context_length", "UINT32", "n_ctx_train", required=True),
        Key("embedding_length", "UINT32", "n_embd", required=True),
        Key("block_count", "UINT32", "n_layer", required=True),
        Key("feed_forward_length", "UINT32", "n_ff", required=True),
        Key("attention.head_count", "UINT32", "n_head", required=True),
        Key("attention.layer_norm_rms_epsilon", "FLOAT32", "rms_eps", required=True),
        # optional: read when present, else the default rule
        Key("attention.head_count_kv", "UINT32", "n_head_kv", default=Same("n_head")),
        Key("attention.key_length", "UINT32", "head_dim", default=Ratio("n_embd", "n_head")),
        Key("attention.value_length", "UINT32", "head_dim_v", default=Same("head_dim")),
        Key("rope.dimension_count", "UINT32", "n_rot", default=Same("head_dim")),
        Key("rope.freq_base", "FLOAT32", "rope_freq_base", default=10000.0),
        Key("vocab_size", "UINT32", "n_vocab", default=TokenCount()),
    ),
    unsupported={
        "expert_count": 0,
        "rope.scaling.type": "none",
        "attention.causal": True,
        "embedding_length_out": None,
    },
    dims={
        "n_embd_head": "head_dim",
        "n_embd_q": "head_dim * n_head",
        "n_embd_kv": "head_dim * n_head_kv",
        "n_rot_half": "n_rot // 2",
    },
    tensors=(
        Tensor("token_embd.weight", "embedding", ("n_embd", "n_vocab"), True, "tok_embd"),
        Tensor("output_norm.weight", "vector", ("n_embd",), True, "output_norm"),
        Tensor("output.weight", "matrix", ("n_embd", "n_vocab"), False, "output", tied_to="token_embd.weight"),
        Tensor("blk.{i}.attn_norm.weight", "vector", ("n_embd",), True, "attn_norm"),
        Tensor("blk.{i}.attn_q.weight", "matrix", ("n_embd", "n_embd_q"), True, "wq"),
        Tensor("blk.{i}.attn_k.weight", "matrix", ("n_embd", "n_embd_kv"), True, "wk"),
        Tensor("blk.{i}.attn_v.weight", "matrix", ("n_embd", "n_embd_kv"), True, "wv"),
        Tensor("blk.{i}.attn_output.weight", "matrix", ("n_embd_q", "n_embd"), True, "wo"),
        Tensor("blk.{i}.ffn_norm.weight", "vector", ("n_embd",), True, "ffn_norm"),
        Tensor("blk.{i}.ffn_gate.weight", "matrix", ("n_embd", "n_ff"), True, "gate"),
        Tensor("blk.{i}.ffn_down.weight", "matrix", ("n_ff", "n_embd"), True, "down"),
        Tensor("blk.{i}.ffn_up.weight", "matrix", ("n_embd", "n_ff"), True, "up"),
    ),
    checks=(
        Check(("n_embd", "n_head", "n_head_kv", "n_layer"),
              lambda v: 0 not in (v["n_embd"], v["n_head"], v["n_head_kv"], v["n_layer"]),
              "hyper-parameters with a zero: embedding_length {n_embd}, head_count {n_head}, "
              "head_count_kv {n_head_kv}, block_count {n_layer}", fatal=True),
        Check(("n_head", "n_head_kv"), lambda v: v["n_head"] % v["n_head_kv"] == 0,
              "head_count {n_head} is not a multiple of head_count_kv {n_head_kv}", fatal=True),
        # the key length's default rule (n_embd / n_head) needs an exact division
        Check(("n_embd", "n_head"), lambda v: v["head_dim"] is not None,
              "embedding_length {n_embd} is not a multiple of head_count {n_head}", fatal=True),
        Check(("head_dim", "head_dim_v"), lambda v: v["head_dim_v"] == v["head_dim"],
              "attention.value_length {head_dim_v} differs from the key length {head_dim}; not supported yet"),
        Check(("head_dim", "n_rot"), lambda v: v["n_rot"] == v["head_dim"],
              "rope.dimension_count {n_rot} differs from the head size {head_dim}; "
              "llama.cpp's llama graph requires them equal"),
        Check(("head_dim",), lambda v: v["head_dim"] % 2 == 0,
              "head size {head_dim} is odd; the RoPE kernel rotates pairs"),
    ),
    norm="rms",
    rope="normal",
    swa="none",
    mirrors="src/llama-model.cpp (LLM_ARCH_LLAMA), src/models/llama.cpp",
)
