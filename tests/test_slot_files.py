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

from bankml.server import flags
from bankml.server.api import slots as slots_api
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
    assert (slots / "ok.bin").stat().st_size == r.json()["n_written"]
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
    monkeypatch.setattr(slots_api.os, "fsync", dies)
    r = c.post("/slots/0?action=save", json={"filename": "good.bin"})
    assert r.status_code == 500
    assert r.json() == {"error": {"code": 500, "message": "Unable to save slot", "type": "server_error"}}
    monkeypatch.undo()
    assert (slots / "good.bin").read_bytes() == good
    assert not [p.name for p in slots.iterdir() if p.name.startswith(".slot-")]
    r = c.post("/slots/0?action=restore", json={"filename": "good.bin"})
    assert r.status_code == 200 and r.json()["n_restored"] > 0
