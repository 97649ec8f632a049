"""Architectures as data: one description per `general.architecture` the engine runs, read alike by the guard
(`bankml.models.verify`) and by the engine (`bankml.engine.Model`), so that the guard cannot play a file the
engine would then refuse, nor the engine read a key or a tensor the guard did not check.

A description (`Architecture`, one module per architecture: `llama.py`, `gemma3.py`, ...) holds:
- its hyper-parameter keys (`Key`): the GGUF type the loader insists on, the HParams field each fills, whether
  it is required, and the rule that fills the field when the key is absent (`Same`, `Ratio`, `TokenCount` or a
  constant);
- the keys the engine cannot honour yet, with the one value accepted;
- named dimensions (expressions over the fields) that tensor shapes are written in;
- its tensors (`Tensor`): name pattern, role (a key of `bankml.models.capabilities.WEIGHT_TYPES`), shape,
  whether required, the engine slot it fills, and the tensor it falls back to when absent (a tied head);
- options the compiled graph follows (norm, RoPE type, sliding-window pattern, the KV cache types reproduced);
- the graph's own checks (`Check`), which the guard reports as refusals.

Adding an architecture on the Python side is one description module and one entry in `ARCHITECTURES`
(docs/architectures.md).

Owns: the table of descriptions. Must not know: weight types per role (bankml.models.capabilities), tensor
data, how the graph runs (bankml.engine).
"""

from __future__ import annotations

from .describe import Architecture, Check, Key, Ratio, Reading, Same, Tensor, TokenCount
from .gemma3 import GEMMA3
from .llama import LLAMA
from .qwen3 import QWEN3

ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in (LLAMA, GEMMA3, QWEN3)}

__all__ = ["ARCHITECTURES", "Architecture", "Check", "Key", "Ratio", "Reading", "Same", "Tensor", "TokenCount"]
