"""What the grammar needs to know about a vocabulary: each token's piece, and which tokens end a generation.

llama.cpp's grammar sampler reads `vocab->token_to_piece(id)`, the piece cache built at load time with
`special = true` (control and user-defined tokens give their text), and `vocab->is_eog(id)`. `GrammarVocab`
holds those two facts as plain data, so the compiled engine never calls back into Python.

Two ways to build one:
- `GrammarVocab.from_tokenizer(tok)`: from `bankml.tokenizer.Tokenizer` (`token_to_piece(id, special=True)`,
  `eog_ids`), the authority (both builds agree with libllama on SmolLM2 and gemma-3).
- `GrammarVocab.from_gguf(header)`: a self-contained fallback that decodes the GGUF token texts as
  llama-vocab.cpp does for the two tokenizer families bankml runs (GPT-2 byte-level BPE and SentencePiece),
  and rebuilds the end-of-generation set from the special ids and the list of end-marker texts llama.cpp
  recognises. Checked against the oracle's libllama for every token of SmolLM2 and gemma-3 (tests/oracle/
  grammar/vocab_*.json).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from bankml.errors import BankmlError


class TokenizerNeeded(BankmlError):
    """A grammar names a token by its text (`<name>`) that only the real tokenizer can resolve; raised by the
    GGUF fallback vocabulary (which resolves exact control / user-defined token texts only)."""

# llama_token_type values stored in tokenizer.ggml.token_type
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED, _UNUSED, _BYTE = 1, 2, 3, 4, 5, 6

# token texts that llama-vocab.cpp (b11192) puts in the end-of-generation set whatever their type
_EOG_TEXTS = frozenset([
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\uff5cend\u2581of\u2581sentence\uff5c>", "[e~[",
])


# texts llama-vocab.cpp takes as the fill-in-the-middle pad / repo / file-separator tokens when the GGUF file
# names none; those ids join the end-of-generation set
_FIM_TEXTS = {
    "tokenizer.ggml.fim_pad_token_id": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"),
    "tokenizer.ggml.fim_rep_token_id": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "tokenizer.ggml.fim_sep_token_id": ("<|file_sep|>",),
}


def _gpt2_byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's bytes_to_unicode table: printable bytes map to themselves, the other 68 bytes
    to U+0100 upwards in byte order."""
    printable = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table = {chr(b): b for b in printable}
    n = 0
    for b in range(256):
        if b not in table.values():
            table[chr(0x100 + n)] = b
            n += 1
    return table


_BYTE_DECODER = _gpt2_byte_decoder()


def _gpt2_piece(text: str) -> bytes:
    out = bytearray()
    for ch in text:
        b = _BYTE_DECODER.get(ch)
        if b is not None:
            out.append(b)
        else:
            # llama_decode_text's fallback for a code point outside the byte table: a marker with the
            # code point's UTF-8 bytes in hex, followed by the whole token text
            enc = ch.encode("utf-8", "surrogateescape")
            out += b"[UNK_BYTE_0x" + "".join(f"{x:02x}" for x in enc).encode() \
                + text.encode("utf-8", "surrogateescape") + b"]"
    return bytes(out)


def _byte_token(text: str) -> bytes:
    # "<0xAB>"
    return bytes([int(text[3:5], 16)])


@dataclass
class GrammarVocab:
    """Token pieces (llama_token_to_piece with special=true) and the end-of-generation ids."""

    pieces: list[bytes]
    eog_ids: frozenset[int]
    # text -> token ids with parse_special=true, for `<name>` token references in GBNF (None: refused)
    tokenize: Callable[[str], Sequence[int]] | None = field(default=None, repr=False)

    @property
    def n_vocab(self) -> int:
        return len(self.pieces)

    @classmethod
    def from_tokenizer(cls, tok) -> "GrammarVocab":
        """From a `bankml.tokenizer.Tokenizer` (see docs/architecture.md)."""
        pieces = [bytes(tok.token_to_piece(i, special=True)) for i in range(tok.n_vocab)]
        return cls(pieces, frozenset(int(i) for i in tok.eog_ids),
                   lambda text: tok.tokenize(text, add_special=False, parse_special=True))

    @classmethod
    def from_gguf(cls, header) -> "GrammarVocab":
        """From a GGUF header (`bankml.models.gguf.GGUFHeader`), without the tokenizer module."""
        md = header.metadata
        model = md.get("tokenizer.ggml.model")
        texts = md.get("tokenizer.ggml.tokens")
        types = md.get("tokenizer.ggml.token_type")
        if texts is None:
            raise ValueError("the GGUF file has no tokenizer.ggml.tokens")
        if model not in ("gpt2", "llama"):
            raise ValueError(f"token pieces for tokenizer model {model!r} are not reproduced yet "
                             "(gpt2 and llama are)")
        n = len(texts)
        types = [int(t) for t in types] if types is not None else [_NORMAL] * n
        eog = set()
        for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id",
                    "tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id",
                    "tokenizer.ggml.fim_sep_token_id"):
            v = md.get(key)
            if v is not None and 0 <= int(v) < n:
                eog.add(int(v))
        for key, names in _FIM_TEXTS.items():
            if md.get(key) is None:
                found = [i for i, t in enumerate(texts) if t in names]
                if found:
                    eog.add(found[0])
        specials = {}
        pieces = []
        for i, (text, ttype) in enumerate(zip(texts, types)):
            if ttype in (_CONTROL, _USER_DEFINED) or text in _EOG_TEXTS:
                specials.setdefault(text, i)
            if text in _EOG_TEXTS:
                eog.add(i)
                ttype = _CONTROL if ttype == _NORMAL else ttype
            if ttype in (_CONTROL, _UNKNOWN, _USER_DEFINED):
                pieces.append(text.encode("utf-8", "surrogateescape"))
            elif ttype == _NORMAL:
                if model == "gpt2":
                    pieces.append(_gpt2_piece(text))
                else:
                    pieces.append(text.replace("\u2581", " ").encode("utf-8", "surrogateescape"))
            elif ttype == _BYTE:
                pieces.append(_byte_token(text))
            else:
                pieces.append(b"")

        def tokenize(text: str) -> list[int]:
            # with parse_special, the exact text of a special token is that one token
            if text in specials:
                return [specials[text]]
            raise TokenizerNeeded(f"the grammar token {text!r} needs bankml.tokenizer to be resolved")

        return cls(pieces, frozenset(eog), tokenize)

    @classmethod
    def from_gguf_file(cls, path) -> "GrammarVocab":
        from bankml.models.gguf import read_header_file
        return cls.from_gguf(read_header_file(path))
