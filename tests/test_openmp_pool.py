"""Model.open leaves no OpenMP pool behind on the thread that opened the model (bankml.engine._threads.release_pool;
docs/engine.md "Threads"): the regroup's helper threads have exited when it returns, so that a decode on another
thread (bankml-serve's worker, bankml.Engine) is the process's only team and libgomp does not cut its barrier
spins short (issue 17)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def test_open_leaves_no_pool(smollm2_path):
    from bankml.engine import Model
    from bankml.engine._threads import release_pool
    release_pool()                  # whatever an earlier test left on this thread
    before = _threads()
    m = Model.open(smollm2_path, n_ctx=256)
    try:
        assert m.n_threads < 2 or _threads() == before     # the regroup ran with n_threads; its helpers are gone
        out = []

        def decode():
            m.decode([1, 2, 3], 0)
            out.append(int(np.argmax(m.logits())))
            out.append(_threads())
        t = threading.Thread(target=decode)
        t.start()
        t.join()
        # the decoding thread's own team: itself and n_threads - 1 helpers beside this thread's `before`
        assert out[1] == before + 1 + (m.n_threads - 1)
    finally:
        m.close()
    assert release_pool() == 0
