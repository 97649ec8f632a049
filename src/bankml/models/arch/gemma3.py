"""The Gemma 3 architecture (`general.architecture` "gemma3": Gemma 3 270M, 1B and the text part of the larger
ones), as the engine's gemma3 graph (src/kernels/forward_gemma3.c) runs it.

Owns: gemma3's description (keys, defaults, unsupported keys, tensors and their engine slots, options, the
graph's checks). Must not know: weight types per role (bankml.models.capabilities), how the graph runs.
Mirrors: src/models/gemma3.cpp (load_arch_hparams, load_arch_tensors, graph<true>), src/llama-model.cpp
(load_hparams' shared keys, get_rope_freq_base), src/llama-hparams.cpp (set_swa_pattern) and
src/llama-hparams.h (rope_freq_base_train_swa = 10000) of b11192.
"""

from __future__ import annotations

from .describe import Architecture, Check, Key, Tensor
from .llama import LLAMA

GEMMA3 = Architecture(
    name="gemma3",
    # llama's keys (the same loader rules, src/llama-model.cpp load_hparams), then the sliding-window layers'
    # window and RoPE base (hparams default 10000), the vocabulary size last
    keys=LLAMA.keys[:-1] + (
        Key("attention.sliding_window", "UINT32", "n_swa", default=0),
        Key("rope.freq_base_swa", "FLOAT32", "rope_freq_base_swa", default=10000.0),
        LLAMA.keys[-1],
    ),
    unsupported={
        "expert_count": 0,
        "rope.scaling.type": "none",
        "rope.scaling.factor": None,
        "attention.causal": True,
        "attention.sliding_window_pattern": None,
        "final_logit_softcapping": 0.0,
        "embedding_length_out": None,
    },
    dims={
        "n_embd_head": "head_dim",
        "n_embd_q": "head_dim * n_head",
        "n_embd_kv": "head_dim * n_head_kv",
    },
    # llama's embedding, head and Q, K, V tensors, then Gemma 3's own
    tensors=LLAMA.tensors[:7] + (
        Tensor("blk.{i}.attn_q_norm.weight", "vector", ("n_embd_head",), True, "q_norm"),
        Tensor("blk.{i}.attn_k_norm.weight", "vector", ("n_embd_head",), True, "k_norm"),
        Tensor("blk.{i}.attn_output.weight", "matrix", ("n_embd_q", "n_embd"), True, "wo"),
        Tensor("blk.{i}.post_attention_norm.weight", "vector", ("n_embd",), True, "attn_post_norm"),
        Tensor("blk.{i}.ffn_norm.weight", "vector", ("n_embd",), True, "ffn_norm"),
        Tensor("blk.{i}.ffn_gate.weight", "matrix", ("n_embd", "n_ff"), True, "gate"),
        Tensor("blk.{i}.ffn_up.weight", "matrix", ("n_embd", "n_ff"), True, "up"),
        Tensor("blk.{i}.ffn_down.weight", "matrix", ("n_ff", "n_embd"), True, "down"),
        Tensor("blk.{i}.post_ffw_norm.weight", "vector", ("n_embd",), True, "ffn_post_norm"),
    ),
    checks=LLAMA.checks[:4] + (
        Check(("head_dim", "n_rot"), lambda v: v["n_rot"] == v["head_dim"],
              "rope.dimension_count {n_rot} differs from the head size {head_dim}; not reproduced by bankml yet"),
        LLAMA.checks[5],
        # without a window llama.cpp builds graph<false> (one cache, one RoPE base): not reproduced yet
        Check(("n_swa",), lambda v: v["n_swa"] > 0,
              "attention.sliding_window is 0 or absent: Gemma 3 without sliding-window layers is not "
              "reproduced by bankml yet"),
        # src/models/gemma3.cpp: the 27B model (62 layers) scales queries by 1/sqrt(n_embd / n_head)
        Check(("n_layer",), lambda v: v["n_layer"] != 62,
              "block_count 62 (Gemma 3 27B): its query scale 1/sqrt(n_embd / n_head) is not reproduced by "
              "bankml yet"),
    ),
    norm="rms",
    rope="neox",
    swa="standard/6",
    cache_types=("f16",),
    mirrors="src/models/gemma3.cpp, src/llama-model.cpp (get_rope_freq_base), src/llama-hparams.cpp",
)
