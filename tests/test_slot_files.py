"""Slot files stay inside --slot-save-path and appear whole (issue 19, findings 1 and 2).

- `--slot-save-path DIR` is refused unless DIR is a directory, and a path without its trailing separator gets
  one, as common/arg.cpp reads the flag: `{"filename": "ok.bin"}` is DIR/ok.bin, never "DIRok.bin" beside it,
  and `{"filename": ".conf"}` cannot overwrite DIR.conf.
- a save is written to a temporary name, flushed and renamed: a save that dies half-way leaves the previous file
  (and no partial file under the final name).
"""

from __future__ import annotations

import os

import pytest
from starlette.testclient import TestClient

from bankml.server import flags, slotfile
from bankml.server.app import build_app

pytestmark = pytest.mark.slow


def test_flag_needs_a_directory(tmp_path):
    with pytest.raises(flags.FlagError) as e:
        flags.parse_flags(["--slot-save-path", str(tmp_path / "missing")])
    assert str(e.value) == f'error while handling argument "--slot-save-path": not a directory: {tmp_path / "missing"}'
    f = tmp_path / "a-file"
    f.write_text("x")
    with pytest.raises(flags.FlagError):
        flags.parse_flags(["--slot-save-path", str(f)])
    assert flags.parse_flags(["--slot-save-path", str(tmp_path)]).slot_save_path == str(tmp_path) + os.sep
    assert flags.parse_flags(["--slot-save-path", str(tmp_path) + os.sep]).slot_save_path == str(tmp_path) + os.sep


@pytest.fixture(scope="module")
def served(smollm2_path, tmp_path_factory):
    root = tmp_path_factory.mktemp("slot-root")
    slots = root / "slots"
    slots.mkdir()
    (root / "slots.conf").write_text("keep me\n")
    app = build_app(["-m", str(smollm2_path), "-c", "512", "-np", "1", "--slot-save-path", str(slots)])
    with TestClient(app) as c:
        r = c.post("/completion", json={"prompt": "Hello there", "n_predict": 2, "temperature": 0})
        assert r.status_code == 200
        yield c, root, slots


def test_files_land_inside_the_directory(served):
    c, root, slots = served
    r = c.post("/slots/0?action=save", json={"filename": "ok.bin"})
    assert r.status_code == 200 and r.json()["n_saved"] > 0
    # llama-server's n_written: the bytes before bankml's checksum trailer
    assert (slots / "ok.bin").stat().st_size == r.json()["n_written"] + slotfile.TRAILER_SIZE
    assert not (root / "slotsok.bin").exists()
    assert c.post("/slots/0?action=save", json={"filename": ".conf"}).status_code == 200
    assert (slots / ".conf").is_file() and (root / "slots.conf").read_text() == "keep me\n"
    assert sorted(p.name for p in slots.iterdir()) == [".conf", "ok.bin"]   # no temporary file left behind


def test_a_save_that_dies_leaves_the_previous_file(served, monkeypatch):
    c, root, slots = served
    assert c.post("/slots/0?action=save", json={"filename": "good.bin"}).status_code == 200
    good = (slots / "good.bin").read_bytes()

    def dies(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(os, "fsync", dies)
    r = c.post("/slots/0?action=save", json={"filename": "good.bin"})
    assert r.status_code == 500
    assert r.json() == {"error": {"code": 500, "message": "Unable to save slot", "type": "server_error"}}
    monkeypatch.undo()
    assert (slots / "good.bin").read_bytes() == good
    assert not [p.name for p in slots.iterdir() if p.name.startswith(".slot-")]
    r = c.post("/slots/0?action=restore", json={"filename": "good.bin"})
    assert r.status_code == 200 and r.json()["n_restored"] > 0


# --- finding 3: a damaged file is refused, and the slot is left cleanly empty ------------------------------------

PROMPT = {"prompt": "The capital of France is", "n_predict": 8, "temperature": 0}


def _fresh_answer(c) -> str:
    """The answer of an empty slot (nothing reused: cache_n 0)."""
    assert c.post("/slots/0?action=erase").status_code == 200
    r = c.post("/completion", json=PROMPT).json()
    assert r["timings"]["cache_n"] == 0
    return r["content"]


def test_flipped_kv_bytes_are_refused(served):
    c, root, slots = served
    fresh = _fresh_answer(c)
    assert c.post("/completion", json={"prompt": "Once upon a time, in a land far away,", "n_predict": 16,
                                       "temperature": 0}).status_code == 200
    assert c.post("/slots/0?action=save", json={"filename": "flip.bin"}).status_code == 200
    data = bytearray((slots / "flip.bin").read_bytes())
    import random
    rng = random.Random(3)
    n_tokens = int.from_bytes(data[8:12], "little")          # the K/V rows start after the tokens and cell list
    start = 12 + 4 * n_tokens + 2048
    for i in rng.sample(range(start, len(data) - 64), 2000):
        data[i] ^= 1 + rng.randrange(255)
    (slots / "flip.bin").write_bytes(bytes(data))
    assert c.post("/completion", json=PROMPT).status_code == 200       # the slot holds something before
    r = c.post("/slots/0?action=restore", json={"filename": "flip.bin"})
    assert r.status_code == 400
    msg = r.json()["error"]["message"]
    assert msg.startswith("Unable to restore slot: invalid slot save file: checksum mismatch"), msg
    assert r.json()["error"]["type"] == "invalid_request_error"
    s = c.get("/slots").json()[0]
    assert s["n_prompt_tokens"] == 0                                   # cleanly empty, as llama-server leaves it
    r = c.post("/completion", json=PROMPT).json()
    assert r["timings"]["cache_n"] == 0 and r["content"] == fresh
