"""The forward pass. Importing this package checks the CPU first: the kernels need AVX2, FMA, F16C, BMI2."""

from .. import _cpu
from ..errors import UnsupportedCPU

_missing = _cpu.missing_features()
if _missing:
    raise UnsupportedCPU(_missing)
