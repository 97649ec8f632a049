"""A slot save killed half-way (issue 19, "Done": the fault test).

bankml-serve runs as a process; a good save, then a second, larger save of the same name, and `kill -9` while that
second save's temporary file (`.slot-*.tmp`, bankml.files.write_atomically) is on disk. Started again, the server
restores the name: the previous good file (and the answer after it is the answer after the first save), since
the final name only ever changes by a rename of a whole file. The temporary the kill left stays beside the saves:
it is never read under the final name, a later save picks a fresh temporary name, and restoring it by its own name
is refused unless it happens to be whole (its checksum trailer decides).
"""

from __future__ import annotations

import os
import signal
import threading

import httpx
import pytest
from server_replay import BankmlServe

from bankml.server import slotfile

pytestmark = pytest.mark.slow

PROMPT = {"prompt": "The capital of France is", "n_predict": 8, "temperature": 0}


def _start(model, slots) -> tuple[BankmlServe, str]:
    s = BankmlServe(["-m", str(model), "-c", "4096", "-np", "1", "--cache-ram", "0", "--slot-save-path", str(slots)])
    s.__enter__()
    return s, f"http://127.0.0.1:{s.port}"


def _temporaries(slots) -> list[str]:
    return sorted(n for n in os.listdir(slots) if n.startswith(".slot-") and n.endswith(".tmp"))


def test_kill_during_a_save_keeps_the_previous_file(smollm2_path, tmp_path):
    slots = tmp_path / "slots"
    slots.mkdir()
    s, base = _start(smollm2_path, slots)
    p = s.proc
    try:
        assert httpx.post(base + "/completion", json=PROMPT, timeout=120).status_code == 200
        first = httpx.post(base + "/slots/0?action=save", json={"filename": "good.bin"}, timeout=120).json()
        good = (slots / "good.bin").read_bytes()
        after_first = httpx.post(base + "/completion", json=PROMPT, timeout=120).json()["content"]

        # a slot of ~1,200 cells: a ~28 MB file, written while the poll below watches for its temporary
        r = httpx.post(base + "/completion", json={"prompt": "word " * 1200, "n_predict": 1, "temperature": 0},
                       timeout=300)
        assert r.status_code == 200
        done = threading.Event()

        def save():
            try:
                httpx.post(base + "/slots/0?action=save", json={"filename": "good.bin"}, timeout=300)
            except httpx.HTTPError:
                pass                                        # the server died under it
            done.set()
        t = threading.Thread(target=save)
        t.start()
        seen = []
        while not done.is_set() and not seen:
            seen = _temporaries(slots)
        if seen:
            os.kill(p.pid, signal.SIGKILL)
        t.join()
        p.wait()
        assert seen, "the save finished before its temporary file was seen"
        assert p.returncode == -signal.SIGKILL
    finally:
        s.__exit__()

    final = (slots / "good.bin").read_bytes()
    left = _temporaries(slots)
    if final != good:
        # the rename won the race with the kill: the final name holds the whole new save, never a part of it
        body = final[:-slotfile.TRAILER_SIZE]
        assert final == body + slotfile.trailer(body)
    assert left == seen or (final != good and left == [])

    s, base = _start(smollm2_path, slots)
    try:
        r = httpx.post(base + "/slots/0?action=restore", json={"filename": "good.bin"}, timeout=120)
        assert r.status_code == 200
        if final == good:
            assert r.json()["n_restored"] == first["n_saved"] and r.json()["n_read"] == first["n_written"]
            again = httpx.post(base + "/completion", json=PROMPT, timeout=120).json()
            assert again["content"] == after_first and again["timings"]["cache_n"] > 0
        # the leftover temporary breaks nothing: saves pick fresh names, and it stays where the kill left it
        assert httpx.post(base + "/slots/0?action=save", json={"filename": "good.bin"},
                          timeout=120).status_code == 200
        assert httpx.post(base + "/slots/0?action=save", json={"filename": "other.bin"},
                          timeout=120).status_code == 200
        assert _temporaries(slots) == left
        for name in left:                    # by its own name: refused when cut (no whole state, no trailer)
            size = (slots / name).stat().st_size
            r = httpx.post(base + "/slots/0?action=restore", json={"filename": name}, timeout=120)
            assert r.status_code in (200, 400)
            if r.status_code == 400:
                assert r.json()["error"]["message"].startswith("Unable to restore slot: invalid slot save file: ")
            else:
                assert size == r.json()["n_read"] + slotfile.TRAILER_SIZE
        assert httpx.get(base + "/health", timeout=10).status_code == 200
    finally:
        s.__exit__()
