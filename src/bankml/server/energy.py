"""The CPU package's energy counter, where Linux exposes it (powercap: Intel RAPL, and AMD's RAPL through the same
interface), for the cost of a token in `timings` and /metrics.

    meter = energy.meter()          # the process's meter: None when no package counter can be read
    e0 = meter.read()               # microjoules since the meter was made (monotonic; the counters' wraps folded in)

The package domains are the top-level zones of `$BANKML_POWERCAP` (default /sys/class/powercap) whose `name` is
`package-N`; their subzones (core, uncore, dram) are not added, being parts of a package. Each zone's
`energy_uj` wraps at its `max_energy_range_uj`; a read that finds a smaller value than the previous one adds the
range. A wrap is seen only when reads are closer than one period apart (minutes to hours, with the power):
generation.py reads at a task's start, its first token and its timings.

What it measures is the whole package, all processes and idle cores included, not this request alone: two
requests at once each see the package's energy over their own time. Kernels since 5.10 make `energy_uj` readable
by root only; then, as on a machine without RAPL (or in most VMs), there is no meter and the energy fields are
absent, never zero.

Knows nothing of HTTP, slots or requests: it reads files.
"""

from __future__ import annotations

import os
import threading

ROOT_ENV = "BANKML_POWERCAP"
DEFAULT_ROOT = "/sys/class/powercap"


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


class _Zone:
    def __init__(self, path: str, span: int):
        self.path = path
        self.span = span
        self.last = _read_int(os.path.join(path, "energy_uj"))


class EnergyMeter:
    """The sum of the package zones under `root`, as a monotonic count of microjoules since the meter was made."""

    def __init__(self, root: str):
        self.root = root
        self._lock = threading.Lock()
        self._total = 0
        self.zones: list[_Zone] = []
        try:
            names = sorted(os.listdir(root))
        except OSError:
            names = []
        for d in names:
            path = os.path.join(root, d)
            if d.count(":") != 1:               # intel-rapl:0 is a package; intel-rapl:0:0 a part of one
                continue
            try:
                with open(os.path.join(path, "name")) as f:
                    if not f.read().strip().startswith("package"):
                        continue
            except OSError:
                continue
            span = _read_int(os.path.join(path, "max_energy_range_uj"))
            z = _Zone(path, span or 0)
            if z.last is not None:
                self.zones.append(z)

    @property
    def available(self) -> bool:
        return bool(self.zones)

    def read(self) -> int | None:
        """Microjoules since the meter was made; None when a zone can no longer be read."""
        with self._lock:
            for z in self.zones:
                now = _read_int(os.path.join(z.path, "energy_uj"))
                if now is None:
                    return None
                delta = now - z.last
                if delta < 0:                   # the counter wrapped
                    delta += z.span
                self._total += max(0, delta)
                z.last = now
            return self._total


_meter: EnergyMeter | None = None
_made = False
_made_lock = threading.Lock()


def meter() -> EnergyMeter | None:
    """The process's meter over `$BANKML_POWERCAP` (read once), or None when no package counter is readable."""
    global _meter, _made
    with _made_lock:
        if not _made:
            m = EnergyMeter(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)
            _meter, _made = (m if m.available else None), True
        return _meter


def read() -> int | None:
    """meter().read(), or None without a meter."""
    m = meter()
    return m.read() if m is not None else None
