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


# ---- synthetic vocab-only GGUFs: SmolLM2's vocabulary under other pre-tokenizers, names and attributes ----

SYNTHETIC = {
    # name: (changed keys, renamed tokens {id: text}, token types {id: type})
    "smollm2-default": ({"tokenizer.ggml.pre": "default"}, {}, {}),
    "smollm2-gpt2": ({"tokenizer.ggml.pre": "gpt-2"}, {}, {}),
    "smollm2-qwen2": ({"tokenizer.ggml.pre": "qwen2"}, {}, {}),
    "smollm2-llama3": ({"tokenizer.ggml.pre": "llama3"}, {}, {}),
    # jina-v2-code: GPT-2 pre-tokenizer, add_sep, and "<mask>" gets lstrip
    "smollm2-lstrip": ({"tokenizer.ggml.pre": "jina-v2-code"}, {16: "<mask>"}, {}),
    # a name with "phi3": every special token gets rstrip, but "<unk>", "<s>", "<|endoftext|>"
    "smollm2-rstrip": ({"general.name": "Phi3 synthetic"}, {13: "</s>", 14: "<unk>", 15: "<s>"}, {}),
    # several candidates for the end-of-turn and FIM tokens, some of them NORMAL: the loader's choice follows
    # its unordered_map's order and makes the chosen ones CONTROL
    "smollm2-named": ({}, {3: "<|eot_id|>", 5: "<end_of_turn>", 6: "<|fim_prefix|>", 7: "<PRE>", 8: "<fim-suffix>",
                           9: "<|fim_suffix|>", 10: "<|fim_pad|>", 11: "<fim_pad>", 12: "<|file_sep|>",
                           13: "<|eom_id|>", 200: "<|end|>", 201: "<EOT>"},
                      {6: 1, 9: 1, 11: 1, 200: 1, 201: 1}),
}


def synthetic_gguf(base, name: str) -> bytes:
    """The bytes of a synthetic vocab-only GGUF: `base` (SmolLM2's GGUFHeader) with general.architecture,
    general.name and the tokenizer.ggml.* keys only, changed as SYNTHETIC[name] says."""
    from bankml.models.gguf import ValueType
    from gguf_writer import gguf

    changed, renamed, types = SYNTHETIC[name]
    kvs = []
    for key in ["general.architecture", "general.name"] + sorted(k for k in base.metadata
                                                                 if k.startswith("tokenizer.ggml.")):
        vtype, v = base.value_types[key], base.metadata[key]
        if key in changed:
            v = changed[key]
        if key == "tokenizer.ggml.tokens":
            v = list(v)
            for i, t in renamed.items():
                v[i] = t
        if key == "tokenizer.ggml.token_type":
            v = v.copy()
            for i, t in types.items():
                v[i] = t
        if vtype == ValueType.ARRAY:
            items = v.tolist() if hasattr(v, "tolist") else list(v)
            kvs.append((key, vtype, (base.array_types[key], items)))
        else:
            kvs.append((key, vtype, v))
    for key, v in changed.items():
        if key not in base.metadata:
            kvs.append((key, ValueType.STRING, v))
    return gguf(kvs, data=False)
