"""The format of tests/oracle/tokenizer/ records, shared by the recorder (testing/record_tokenizer.py) and the
tests: byte strings in JSON, the digest of a with_pieces answer, the seeded inputs of the libstdc++ probes."""

from __future__ import annotations

import base64
import hashlib
import json
import random


def enc_bytes(b: bytes):
    """A str when `b` is valid UTF-8, else {"b64": ...}."""
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(b).decode()}


def dec_bytes(x) -> bytes:
    return base64.b64decode(x["b64"]) if isinstance(x, dict) else x.encode("utf-8")


def pieces_sha(tokens_json) -> str:
    """sha256 of a /tokenize with_pieces "tokens" list, canonically dumped."""
    return hashlib.sha256(json.dumps(tokens_json, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()


def cxx_keys(seed: int, n: int) -> list[bytes]:
    """Distinct random byte strings for the unordered_map probe."""
    rnd = random.Random(seed)
    keys, seen = [], set()
    while len(keys) < n:
        k = bytes(rnd.getrandbits(8) for _ in range(rnd.getrandbits(5)))
        if k not in seen:
            seen.add(k)
            keys.append(k)
    return keys


def cxx_lengths(seed: int, n: int, top: int) -> list[int]:
    """Random lengths in [0, top) for the std::sort probe."""
    rnd = random.Random(seed)
    return [rnd.getrandbits(16) % top for _ in range(n)]
