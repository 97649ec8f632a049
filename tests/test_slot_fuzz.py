"""500 mutated slot files through the HTTP API (issue 19, "Done": the fuzz), seeded and deterministic.

bankml-serve runs as a process. Two base files: a save bankml wrote (with its checksum trailer) and the same
bytes without the trailer (what llama-server b11192 writes for that slot). Each is mutated 250 ways (flipped bytes,
flips in the header and cell list, truncations, extensions, cut-out spans, header fields set to edge values) and
restored: never a 5xx, never a dead process, `/health` answers after every one, a refusal is llama-server's
"Unable to restore slot: ..." 400 and leaves the slot empty; every mutation of the checked file is refused (but
cutting exactly the trailer off, which leaves llama-server's file); after some refusals the slot answers exactly
as a fresh slot does.
"""

from __future__ import annotations

import random

import httpx
import pytest
from server_replay import BankmlServe

from bankml.server import slotfile

pytestmark = pytest.mark.slow

PROMPT = {"prompt": "The capital of France is", "n_predict": 8, "temperature": 0}
N_EACH = 250
SPOT_EVERY = 25


@pytest.fixture(scope="module")
def server(smollm2_path, tmp_path_factory):
    slots = tmp_path_factory.mktemp("fuzz-slots")
    with BankmlServe(["-m", str(smollm2_path), "-c", "512", "-np", "1", "--cache-ram", "0", "--slot-save-path",
                      str(slots)]) as s:
        with httpx.Client(base_url=f"http://127.0.0.1:{s.port}", timeout=120) as c:
            yield s.proc, c, slots


def _fields(data: bytes) -> list[tuple[int, int]]:
    """(offset, size) of every header field of a one-stream file: magic .. media count, stream and cell counts,
    each cell's pos / n_seq_id / seq_id, v_trans, n_layer, each layer's K and V type and row size."""
    n_packed = int.from_bytes(data[8:12], "little")
    out = [(0, 4), (4, 4), (8, 4)] + [(12 + 4 * i, 4) for i in range(min(n_packed, 8))] + [(8 + 4 * n_packed, 4)]
    s = 12 + 4 * n_packed
    n = int.from_bytes(data[s + 4:s + 8], "little")
    out += [(s, 4), (s + 4, 4)] + [(s + 8 + 4 * i, 4) for i in range(3 * n)]
    m = s + 8 + 12 * n
    out += [(m, 4), (m + 4, 4)]
    n_layer = int.from_bytes(data[m + 4:m + 8], "little")
    off = m + 8
    for _ in range(2 * n_layer):                     # K layers, then V layers
        row = int.from_bytes(data[off + 4:off + 12], "little")
        out += [(off, 4), (off + 4, 8)]
        off += 12 + n * row
    return out


def _mutate(rng: random.Random, data: bytes, fields: list[tuple[int, int]]) -> tuple[str, bytes]:
    kind = rng.choice(["flip", "flip-head", "truncate", "extend", "cut", "field", "field", "field"])
    b = bytearray(data)
    if kind == "flip":
        for i in rng.sample(range(len(b)), rng.randint(1, 64)):
            b[i] ^= rng.randint(1, 255)
    elif kind == "flip-head":
        head = fields[-1][0] + 12
        for i in rng.sample(range(head), rng.randint(1, 4)):
            b[i] ^= rng.randint(1, 255)
    elif kind == "truncate":
        del b[rng.randrange(len(b)):]
    elif kind == "extend":
        b += rng.randbytes(rng.randint(1, 4096))
    elif kind == "cut":
        i = rng.randrange(len(b))
        del b[i:i + rng.randint(1, 4096)]
    else:
        off, size = rng.choice(fields)
        old = int.from_bytes(b[off:off + size], "little")
        top = (1 << (8 * size)) - 1
        new = rng.choice([0, 1, 2, 8, old - 1, old + 1, old * 2, top, top >> 1, rng.getrandbits(8 * size)]) & top
        b[off:off + size] = new.to_bytes(size, "little")
    return kind, bytes(b)


def test_mutated_slot_files(server):
    p, c, slots = server
    assert c.post("/slots/0?action=erase").status_code == 200
    fresh = c.post("/completion", json=PROMPT).json()
    assert fresh["timings"]["cache_n"] == 0
    assert c.post("/slots/0?action=save", json={"filename": "base.bin"}).status_code == 200
    whole = (slots / "base.bin").read_bytes()
    plain = whole[:-slotfile.TRAILER_SIZE]
    assert whole == plain + slotfile.trailer(plain)
    fields = _fields(plain)
    rng = random.Random(19)
    counts = {"refused": 0, "restored": 0, "spot": 0}
    for base_name, base in (("checked", whole), ("plain", plain)):
        for i in range(N_EACH):
            kind, data = _mutate(rng, base, fields)
            (slots / "m.bin").write_bytes(data)
            r = c.post("/slots/0?action=restore", json={"filename": "m.bin"})
            what = f"{base_name} #{i} ({kind}, {len(data)} bytes)"
            assert r.status_code in (200, 400), what
            assert p.poll() is None, what
            assert c.get("/health").status_code == 200, what
            if base_name == "checked" and data not in (whole, plain):
                assert r.status_code == 400, what              # every change to a checked file is caught
            if r.status_code == 200:
                counts["restored"] += 1
                assert r.json()["n_read"] in (len(data), len(data) - slotfile.TRAILER_SIZE), what
                continue
            counts["refused"] += 1
            err = r.json()["error"]
            assert err["type"] == "invalid_request_error" and err["code"] == 400, what
            assert err["message"].startswith("Unable to restore slot: "), what
            assert c.get("/slots").json()[0]["n_prompt_tokens"] == 0, what
            if counts["refused"] % SPOT_EVERY == 0:
                counts["spot"] += 1
                again = c.post("/completion", json=PROMPT).json()
                assert again["timings"]["cache_n"] == 0 and again["content"] == fresh["content"], what
                assert c.post("/slots/0?action=erase").status_code == 200
    assert sum(counts.values()) - counts["spot"] == 2 * N_EACH
    assert counts["refused"] > N_EACH and counts["spot"] >= 10, counts
