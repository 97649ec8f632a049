"""Slot files stay inside --slot-save-path and appear whole (issue 19, findings 1 and 2).

- `--slot-save-path DIR` is refused unless DIR is a directory, and a path without its trailing separator gets
  one, as common/arg.cpp reads the flag: `{"filename": "ok.bin"}` is DIR/ok.bin, never "DIRok.bin" beside it,
  and `{"filename": ".conf"}` cannot overwrite DIR.conf.
- a save is written to a temporary name, flushed and renamed: a save that dies half-way leaves the previous file
  (and no partial file under the final name).
- finding 3: a file bankml wrote carries a sha256 trailer, so 2,000 flipped KV bytes are refused ("Unable to
  restore slot: ..."; they restored with 200 before); a file without it (llama-server's) gets llama-server's
  structural checks; every refusal leaves the slot empty, and the next answer is a fresh slot's. The files are
  llama-server b11192's own: it restores bankml's and bankml restores its.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
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
    # no RAM prompt cache: cache_n then counts only what the slot itself holds
    app = build_app(["-m", str(smollm2_path), "-c", "512", "-np", "1", "--cache-ram", "0", "--slot-save-path",
                     str(slots)])
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


def _offsets(data: bytes) -> dict:
    """Where llama_state_seq_save_file's fields sit in a one-stream file (bankml.server.slotfile's layout)."""
    n_packed = int.from_bytes(data[8:12], "little")
    s = 12 + 4 * n_packed
    n = int.from_bytes(data[s + 4:s + 8], "little")
    m = s + 8 + 12 * n
    return {"n_packed": 8, "n_tokens": 20, "n_stream": s, "cells": s + 4, "meta": s + 8, "v_trans": m,
            "n_layer": m + 4, "k_type": m + 8, "k_row": m + 12, "n_cells": n}


def _put(data: bytes, off: int, value: int, size: int = 4) -> bytes:
    return data[:off] + value.to_bytes(size, "little", signed=value < 0) + data[off + size:]


def test_files_without_the_checksum_get_llama_servers_checks(served):
    """A file llama-server wrote (no trailer) restores on its structure; a structurally wrong one is refused
    with what is wrong, and the slot is left empty (server-context.cpp:2642 prompt_clear)."""
    c, root, slots = served
    fresh = _fresh_answer(c)
    r = c.post("/completion", json={"prompt": "Hello there, how are", "n_predict": 4, "temperature": 0})
    assert r.status_code == 200
    saved = c.post("/slots/0?action=save", json={"filename": "whole.bin"}).json()
    whole = (slots / "whole.bin").read_bytes()
    plain = whole[:-slotfile.TRAILER_SIZE]                      # what llama-server writes for this slot
    assert slotfile.trailer(plain) == whole[len(plain):]
    o = _offsets(plain)
    (slots / "plain.bin").write_bytes(plain)
    r = c.post("/slots/0?action=restore", json={"filename": "plain.bin"}).json()
    assert r["n_restored"] == saved["n_saved"] and r["n_read"] == saved["n_written"] == len(plain)
    k_row = int.from_bytes(plain[o["k_row"]:o["k_row"] + 8], "little")
    n = o["n_cells"]
    bad = {
        "truncated": (plain[:len(plain) - 100],
                      "invalid slot save file: the file ends inside the V rows of layer 29 "
                      f"(byte {len(plain) - n * k_row}: "
                      f"{n * k_row} bytes needed, {n * k_row - 100} left)"),
        "short": (plain[:6], "invalid slot save file: 6 bytes, too short for a header"),
        "magic": (b"ggsx" + plain[4:], "invalid slot save file: unknown (magic, version): 78736767, 00000003"),
        "version": (_put(plain, 4, 2), "invalid slot save file: unknown (magic, version): 67677371, 00000002"),
        "token count": (_put(plain, o["n_packed"], 1 << 30),
                        f"invalid slot save file: token count {1 << 30} exceeds the file size "
                        f"({(len(plain) - 12) // 4})"),
        "tokens vs cells": (_put(_put(plain[:24 + 4 * (n - 1)] + plain[24 + 4 * n:], 8, n + 3), 20, n - 1),
                            f"invalid slot save file: {n - 1} tokens but {n} KV cells"),
        "stream count": (_put(plain, o["n_stream"], 2), "invalid slot save file: n_stream mismatch (2, this "
                                                        "server has 1)"),
        "cell count": (_put(plain, o["cells"], n + 1),      # the next cell's n_seq_id is the layer count
                       "invalid slot save file: invalid seq_id-agnostic kv cell"),
        "cells too many": (_put(plain, o["cells"], 10 ** 6),
                           "invalid slot save file: not enough cells in kv cache (1000000 > 512)"),
        "position": (_put(plain, o["meta"], 7), f"invalid slot save file: the cells' positions are not 0 .. {n - 1}"),
        "n_seq_id": (_put(plain, o["meta"] + 4, 2), "invalid slot save file: invalid seq_id-agnostic kv cell"),
        "v_trans": (_put(plain, o["v_trans"], 1), "invalid slot save file: incompatible V transposition"),
        "layers": (_put(plain, o["n_layer"], 31), "invalid slot save file: mismatched layer count (31 instead "
                                                   "of 30)"),
        "type": (_put(plain, o["k_type"], 8), "invalid slot save file: mismatched K type (1 != 8, layer 0)"),
        "row size": (_put(plain, o["k_row"], k_row * 2, 8),
                     f"invalid slot save file: mismatched K row size ({k_row} != {k_row * 2}, layer 0)"),
        "extended": (plain + b"\0" * 10, "invalid slot save file: 10 bytes after the slot state are not a bankml "
                                         "checksum"),
        "extended checked": (whole + b"x", f"invalid slot save file: {slotfile.TRAILER_SIZE + 1} bytes after the "
                                           "slot state are not a bankml checksum"),
        "invalid token": (_put(plain, 24, 10 ** 6), "Invalid tokens in slot save file"),
        "tokens version": (_put(plain, 16, 2), "Unsupported server tokens state version"),
    }
    # too large to be a slot of this server: refused from its size, before it is read
    n_max = 12 + 4 * 516 + 8 + 12 * 512 + 8 + 24 * 30 + 512 * 30 * 2 * k_row + slotfile.TRAILER_SIZE
    bad["huge"] = (plain + bytes(n_max - len(plain) + 1),
                   f"invalid slot save file: {n_max + 1} bytes, more than a slot of this server holds ({n_max})")
    for name, (data, want) in bad.items():
        (slots / "bad.bin").write_bytes(data)
        assert c.post("/slots/0?action=restore", json={"filename": "plain.bin"}).status_code == 200
        r = c.post("/slots/0?action=restore", json={"filename": "bad.bin"})
        assert r.status_code == 400, name
        if not want.startswith(("Invalid", "Unsupported", "invalid")):
            want = "invalid slot save file: " + want
        assert r.json()["error"] == {"code": 400, "message": "Unable to restore slot: " + want,
                                     "type": "invalid_request_error"}, name
        assert c.get("/slots").json()[0]["n_prompt_tokens"] == 0, name
    r = c.post("/completion", json=PROMPT).json()
    assert r["timings"]["cache_n"] == 0 and r["content"] == fresh


# --- the files are llama-server's: it restores bankml's, bankml restores its ------------------------------------

def _llama_server() -> Path | None:
    d = Path(os.environ.get("BANKML_ORACLE_DIR", Path.home() / ".cache" / "bankml" / "oracle"))
    p = d / "build" / "bin" / "llama-server"
    return p if os.access(p, os.X_OK) else None


@pytest.mark.skipif(_llama_server() is None,
                    reason="llama-server b11192 is not built (testing/build_oracle.sh builds it)")
def test_llama_server_reads_bankmls_files(served, smollm2_path, tmp_path):
    """Measured on b11192: bankml's save of a slot is byte for byte llama-server's save of the same prompt, plus
    the 48-byte trailer; llama-server restores it (n_read: the bytes before the trailer) and answers as before."""
    c, root, slots = served
    ls_dir = tmp_path / "ls"
    ls_dir.mkdir()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([str(_llama_server()), "-m", str(smollm2_path), "-t", "2", "-c", "512", "-np", "1",
                          "--cache-ram", "0", "--jinja", "--reasoning", "off", "--no-webui", "--port", str(port),
                          "--slot-save-path", str(ls_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(base + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert p.poll() is None, "llama-server exited"
            time.sleep(0.1)
        ours = c.post("/completion", json=PROMPT).json()
        theirs = httpx.post(base + "/completion", json=PROMPT, timeout=60).json()
        assert ours["content"] == theirs["content"]
        a = c.post("/slots/0?action=save", json={"filename": "x.bin"}).json()
        b = httpx.post(base + "/slots/0?action=save", json={"filename": "ls.bin"}, timeout=60).json()
        assert (a["n_saved"], a["n_written"]) == (b["n_saved"], b["n_written"])
        mine, llamas = (slots / "x.bin").read_bytes(), (ls_dir / "ls.bin").read_bytes()
        assert mine == llamas + slotfile.trailer(llamas)
        (ls_dir / "x.bin").write_bytes(mine)
        assert httpx.post(base + "/slots/0?action=erase", timeout=60).status_code == 200
        r = httpx.post(base + "/slots/0?action=restore", json={"filename": "x.bin"}, timeout=60).json()
        assert (r["n_restored"], r["n_read"]) == (a["n_saved"], a["n_written"])
        again = httpx.post(base + "/completion", json=PROMPT, timeout=60).json()
        assert again["content"] == theirs["content"] and again["timings"]["cache_n"] > 0
        (slots / "ls.bin").write_bytes(llamas)
        r = c.post("/slots/0?action=restore", json={"filename": "ls.bin"}).json()
        assert (r["n_restored"], r["n_read"]) == (b["n_saved"], b["n_written"])
    finally:
        p.kill()
        p.wait()


def test_cells_in_another_order_keep_the_file_order():
    """llama-server writes a sequence's cells in cell order, which need not be position order (a unified pool, a
    context shift); state_read_meta puts them back in that order into cells 0 .. n-1, at their positions, so the
    parsed state keeps the file's order and says the positions (a context-shifted cache restores them)."""
    import random
    g = slotfile.Geometry(n_layer=2, ggml_type=1, k_row=8, v_row=4, n_ctx=16)
    n = 3
    state = random.Random(5).randbytes(g.n_layer * n * (g.k_row + g.v_row))
    body, n_written = slotfile.encode([5, 6, 7], state, g)
    body = bytearray(body[:n_written])
    meta = 12 + 4 * (n + 4) + 8
    order = [2, 0, 1]                                      # the file's cell i holds position order[i]
    for i, p in enumerate(order):
        body[meta + 12 * i:meta + 12 * i + 4] = p.to_bytes(4, "little")
    off = meta + 12 * n + 8
    for row in [g.k_row] * g.n_layer + [g.v_row] * g.n_layer:
        rows = [bytes(body[off + 12 + row * k:off + 12 + row * (k + 1)]) for k in range(n)]
        body[off + 12:off + 12 + row * n] = b"".join(rows[p] for p in order)
        off += 12 + row * n
    got = slotfile.parse(bytes(body), g)
    per = g.k_row + g.v_row
    want = b""
    for lay in range(g.n_layer):
        base = lay * n * per
        for start, row in ((base, g.k_row), (base + n * g.k_row, g.v_row)):
            want += b"".join(state[start + row * p:start + row * (p + 1)] for p in order)
    assert (got.tokens, got.state, got.n_read, got.checked) == ([5, 6, 7], want, n_written, False)
    assert got.state.positions == tuple(order)
    assert slotfile.encode([5, 6, 7], got.state, g)[0][:n_written] == bytes(body)   # written back as it was read
    with pytest.raises(slotfile.SlotFileError) as e:           # two cells at one position
        slotfile.parse(bytes(body[:meta]) + (0).to_bytes(4, "little") + bytes(body[meta + 4:]), g)
    assert str(e.value) == "invalid slot save file: the cells' positions are not 0 .. 2"
