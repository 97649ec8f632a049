"""The doubles whose nlohmann text tests/oracle/nljson/floats.json records (testing/record_nljson_floats.py) and
tests/test_nljson.py replays: the same seeded list on both sides."""

from __future__ import annotations

import numpy as np

SEED = 11192


def inputs() -> np.ndarray:
    rng = np.random.Generator(np.random.PCG64(SEED))
    edge = [0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1e-4, 1e-5, 9.999e-5, 1e15, 1e16, 123456789012345.0, 1234567890123456.0,
            5e-324, 2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308, 2.0 ** -1022,
            2.0 ** -1074, 2.0 ** 52, 2.0 ** 53, 2.0 ** 63, 2.0 ** 64, 1e-300, 1e300, 1e22, 1e23, 3.14159, 2.0 / 3]
    edge += [2.0 ** e for e in range(-1074, 1024, 7)] + [10.0 ** e for e in range(-300, 300, 3)]
    bits = rng.integers(0, 0x7FF0000000000000, size=200_000, dtype=np.int64).view(np.float64)
    floats = rng.standard_normal(500_000).astype(np.float32) * np.float32(0.05)
    small = (rng.random(200_000) * 10.0 ** rng.integers(-12, 12, size=200_000)).astype(np.float32)
    signs = np.where(rng.random(200_000) < 0.5, -1.0, 1.0)
    return np.concatenate([np.array(edge, dtype=np.float64), bits, floats.astype(np.float64),
                           small.astype(np.float64) * signs])
