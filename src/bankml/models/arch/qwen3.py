"""The Qwen3 architecture (`general.architecture` "qwen3": the dense Qwen3 models), as the engine's qwen3 graph
(src/kernels/forward_llama.c, llama's graph with the per-head Q/K norm step) runs it.

Owns: qwen3's description (keys, defaults, unsupported keys, tensors and their engine slots, options, the
graph's checks). Must not know: weight types per role (bankml.models.capabilities), how the graph runs.
Mirrors: src/models/qwen3.cpp (load_arch_hparams, load_arch_tensors, graph), src/llama-model.cpp (load_hparams'
shared keys, create_tensor_qkv, the NEOX rope type of LLM_ARCH_QWEN3) of b11192.

What differs from llama: each layer's attn_q_norm / attn_k_norm (head_dim values, required), NEOX RoPE, and
tensors the loader would take that bankml does not (Q/K/V biases, a fused attn_qkv, the reranker's cls.output:
not listed, so the guard refuses a file that has them). The F16 and Q8_0 KV caches (Q8_0 verified through
llama-server's answers: tests/oracle/server/qwen3.json; the context shift re-rotates K with NEOX RoPE).
"""

from __future__ import annotations

from .describe import Architecture, Tensor
from .llama import LLAMA

QWEN3 = Architecture(
    name="qwen3",
    # the loader's shared keys (src/llama-model.cpp load_hparams) as llama reads them; qwen3's own reads only
    # the RMS epsilon, required there too
    keys=LLAMA.keys,
    unsupported={
        "expert_count": 0,
        "rope.scaling.type": "none",
        "attention.causal": True,
        "embedding_length_out": None,
    },
    dims=LLAMA.dims,
    # llama's embedding, head and Q, K, V tensors, then the per-head norms, then llama's layer tail
    tensors=LLAMA.tensors[:7] + (
        Tensor("blk.{i}.attn_q_norm.weight", "vector", ("n_embd_head",), True, "q_norm"),
        Tensor("blk.{i}.attn_k_norm.weight", "vector", ("n_embd_head",), True, "k_norm"),
    ) + LLAMA.tensors[7:],
    # llama's checks: src/models/qwen3.cpp asserts the same (value length = key length = n_rot)
    checks=LLAMA.checks,
    norm="rms",
    rope="neox",
    swa="none",
    cache_types=("f16", "q8_0"),
    mirrors="src/models/qwen3.cpp, src/llama-model.cpp (load_hparams, create_tensor_qkv, rope type)",
)
