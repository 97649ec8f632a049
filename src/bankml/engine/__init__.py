"""The forward pass. Importing this package checks the CPU first: the kernels need AVX2, FMA, F16C, BMI2.

    from bankml.engine import Model
    model = Model.open(path, n_ctx=4096)      # verify() first, then the mmap
    model.decode(tokens, 0); row = model.logits()
"""

from .. import _cpu
from ..errors import UnsupportedCPU

_missing = _cpu.missing_features()
if _missing:
    raise UnsupportedCPU(_missing)

from .model import KV_PAD, HParams, KVCache, Model, UnifiedCache, UnifiedSeq, pad_ctx  # noqa: E402

__all__ = ["KV_PAD", "HParams", "KVCache", "Model", "UnifiedCache", "UnifiedSeq", "pad_ctx"]
