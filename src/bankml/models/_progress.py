"""Progress on the long steps a user waits for (hashing or pulling a large file): a bar on stderr when it is a
terminal, otherwise a log line when the step starts and one when it ends (for steps of LOG_MIN units or more,
when no callback is given), so that a server's log says why a first load takes a while."""

from __future__ import annotations

import logging
import sys
import time
from typing import Callable, Union

#: what callers pass as `progress=`: None (a bar when stderr is a TTY), a bool, or a callback(done, total)
ProgressArg = Union[None, bool, Callable[[int, int], None]]

log = logging.getLogger("bankml.models")
#: the size (bytes, or the unit the step counts) from which a step without a bar is logged
LOG_MIN = 64 * 1024 * 1024


class Progress:
    def __init__(self, total: int, label: str, progress: ProgressArg = None):
        self.total = max(total, 0)
        self.label = label
        self.done = 0
        self._callback = progress if callable(progress) else None
        if progress is None:
            self._bar = sys.stderr.isatty()
        else:
            self._bar = progress is True
        self._last = 0.0
        self._drawn = -1  # `done` when last drawn
        self._logged = progress is None and not self._bar and self.total >= LOG_MIN
        self._t0 = time.monotonic()
        if self._logged:
            log.info("%s: %.1f MB ...", label, self.total / 1e6)

    def update(self, n: int) -> None:
        self.done += n
        if self._callback is not None:
            self._callback(self.done, self.total)
        if self._bar:
            now = time.monotonic()
            if now - self._last >= 0.1 or self.done >= self.total:
                self._last = now
                self._draw()

    def _draw(self) -> None:
        self._drawn = self.done
        frac = self.done / self.total if self.total else 1.0
        width = 30
        filled = int(frac * width)
        sys.stderr.write(f"\r{self.label} {frac * 100:5.1f}% |{'#' * filled}{' ' * (width - filled)}| "
                         f"{self.done / 1e6:.1f}/{self.total / 1e6:.1f} MB")
        sys.stderr.flush()

    def close(self) -> None:
        if self._logged:
            log.info("%s: done in %.1f s", self.label, time.monotonic() - self._t0)
        if self._bar:
            if self._drawn != self.done:
                self._draw()
            sys.stderr.write("\n")
            sys.stderr.flush()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
