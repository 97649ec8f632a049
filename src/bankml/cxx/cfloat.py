"""C's float next to Python's double: `static_cast<float>(double)`, the one float32 rounding bankml's Python uses
wherever llama.cpp stores a double in a float (sampling fields, slot similarity, probabilities in JSON)."""

from __future__ import annotations

import math
import struct


def f32(x: float) -> float:
    """static_cast<float>(double): round to nearest float32 (beyond FLT_MAX's rounding range: infinity; NaN stays
    NaN)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)
