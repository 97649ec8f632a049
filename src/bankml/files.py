"""Files bankml writes: whole or not at all.

    write_atomically(path, data, prefix=".tmp-")   # a temporary name beside it, flushed, renamed over it

Knows the file system only.
"""

from __future__ import annotations

import contextlib
import os
import tempfile


def write_atomically(path: str | os.PathLike, data: bytes, prefix: str = ".tmp-") -> None:
    """The file appears whole or not at all: written to a temporary name beside it (`prefix` + random +
    `.tmp`), flushed to the disk, then renamed over the old one (a write killed half-way leaves the previous file
    as it was, and no temporary behind)."""
    d = os.path.dirname(os.fspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
