"""The Tokenizer: text to token ids and back, identical to llama.cpp b11192 on the same GGUF vocabulary.

    tok = Tokenizer.from_gguf(header)                   # header: bankml.models.gguf.GGUFHeader
    tok.tokenize("Hello <|im_start|>", add_special=False, parse_special=True) -> [19556, 216, 1]
    tok.token_to_piece(19556) -> b"Hello"
    tok.detokenize([19556, 905]) -> b"Hello world"

Text may be `str` or bytes-like. A `str` is encoded as UTF-8, its lone surrogates U+DC80..U+DCFF as the raw
bytes they escape (the convention of bankml.models.gguf) and any other lone surrogate as its 3-byte UTF-8 form (what
llama.cpp would receive for it). Pieces and detokenized text are bytes: a piece may hold part of a UTF-8
character, and joining them into text is the caller's job (the server keeps bytes until a character is
complete).

Thread safety: every method may be called from several threads at once; tokenize releases the GIL.
"""

from __future__ import annotations

import codecs
import os

import numpy as np

from ..errors import InvalidToken
from ..models.gguf import GGUFHeader, read_header_file
from . import vocab as _vocab
from .vocab import (ATTR_BYTE, ATTR_CONTROL, ATTR_NORMAL, ATTR_UNKNOWN, ATTR_UNUSED, ATTR_USER_DEFINED, NULL,
                    Vocab, load_vocab)


def _surrogates(err: UnicodeEncodeError):
    out = bytearray()
    for ch in err.object[err.start:err.end]:
        cp = ord(ch)
        if 0xDC80 <= cp <= 0xDCFF:
            out.append(cp - 0xDC00)
        elif 0xD800 <= cp <= 0xDFFF:
            out += bytes([0xE0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3F), 0x80 | (cp & 0x3F)])
        else:
            raise err
    return bytes(out), err.end


codecs.register_error("bankml.surrogates", _surrogates)


def to_bytes(text) -> bytes:
    """The bytes bankml tokenizes for `text` (str or bytes-like)."""
    if isinstance(text, str):
        return text.encode("utf-8", "bankml.surrogates")
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise TypeError(f"text must be str or bytes, not {type(text).__name__}")


class Tokenizer:
    """One vocabulary, tokenized and detokenized as llama.cpp b11192 does (llama_tokenize,
    llama_token_to_piece, llama_detokenize)."""

    def __init__(self, vocab: Vocab):
        self.vocab = vocab
        core = vocab.core if vocab.core is not None else _vocab.build_core(vocab)
        vocab.core = core
        core.configure(attrs=vocab.attrs, add_space_prefix=vocab.add_space_prefix, add_bos=vocab.add_bos,
                       add_eos=vocab.add_eos, clean_spaces=vocab.clean_spaces, bos=vocab.ids["bos"],
                       eos=vocab.ids["eos"], special_order=vocab.special_order, pieces=vocab.pieces)
        self._core = core
        self._attrs = np.asarray(vocab.attrs, dtype=np.int32).copy()
        self._attrs.flags.writeable = False
        self._eog = frozenset(vocab.eog_ids)

    @classmethod
    def from_gguf(cls, header: GGUFHeader) -> "Tokenizer":
        """The tokenizer of a GGUF header. Raises TokenizerError where llama.cpp would not load the
        vocabulary, UnsupportedTokenizer where bankml does not reproduce it yet."""
        return cls(load_vocab(header))

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "Tokenizer":
        return cls.from_gguf(read_header_file(path))

    # --- vocabulary facts ---

    @property
    def n_vocab(self) -> int:
        return self.vocab.n_tokens

    @property
    def vocab_type(self) -> str:
        """"bpe" (tokenizer.ggml.model gpt2) or "spm" (llama)."""
        return self.vocab.kind

    @property
    def pre(self) -> str:
        """tokenizer.ggml.pre ("" when absent)."""
        return self.vocab.pre

    def _id(self, name: str) -> int | None:
        i = self.vocab.ids[name]
        return None if i == NULL else i

    bos_id = property(lambda self: self._id("bos"), doc="BOS id, or None")
    eos_id = property(lambda self: self._id("eos"), doc="EOS id, or None")
    eot_id = property(lambda self: self._id("eot"), doc="end-of-turn id, or None")
    eom_id = property(lambda self: self._id("eom"), doc="end-of-message id, or None")
    unk_id = property(lambda self: self._id("unk"), doc="unknown-token id, or None")
    sep_id = property(lambda self: self._id("sep"), doc="separator id, or None")
    pad_id = property(lambda self: self._id("pad"), doc="padding id, or None")
    nl_id = property(lambda self: self._id("nl"), doc="newline id (llama_vocab_nl), or None")
    fim_pre_id = property(lambda self: self._id("fim_pre"))
    fim_suf_id = property(lambda self: self._id("fim_suf"))
    fim_mid_id = property(lambda self: self._id("fim_mid"))
    fim_pad_id = property(lambda self: self._id("fim_pad"))
    fim_rep_id = property(lambda self: self._id("fim_rep"))
    fim_sep_id = property(lambda self: self._id("fim_sep"))

    @property
    def add_bos(self) -> bool:
        return self.vocab.add_bos

    @property
    def add_eos(self) -> bool:
        return self.vocab.add_eos

    @property
    def add_sep(self) -> bool:
        return self.vocab.add_sep

    @property
    def add_space_prefix(self) -> bool:
        return self.vocab.add_space_prefix

    @property
    def eog_ids(self) -> frozenset[int]:
        """The end-of-generation tokens (llama_vocab_is_eog)."""
        return self._eog

    def is_eog(self, token: int) -> bool:
        return token in self._eog

    @property
    def attrs(self) -> np.ndarray:
        """Read-only int32 llama_token_attr of every token."""
        return self._attrs

    def token_attr(self, token: int) -> int:
        return int(self._attrs[self._check(token)])

    def is_control(self, token: int) -> bool:
        return bool(self._attrs[self._check(token)] & ATTR_CONTROL)

    def token_text(self, token: int) -> bytes:
        """The token's text as stored in the GGUF (llama_vocab_get_text)."""
        return self.vocab.texts[self._check(token)]

    def token_score(self, token: int) -> float:
        return float(self.vocab.scores[self._check(token)])

    def _check(self, token: int) -> int:
        if not isinstance(token, (int, np.integer)) or isinstance(token, bool):
            raise TypeError(f"token ids are integers, not {type(token).__name__}")
        if not 0 <= token < self.vocab.n_tokens:
            raise InvalidToken(int(token), self.vocab.n_tokens)
        return int(token)

    # --- text <-> tokens ---

    def tokenize(self, text, add_special: bool = False, parse_special: bool = True) -> list[int]:
        """llama_tokenize(text, add_special, parse_special). add_special adds BOS/EOS as the vocabulary asks
        (tokenizer.ggml.add_bos_token / add_eos_token); parse_special turns the text of control and unknown
        tokens into those tokens (user-defined tokens always are)."""
        return self._core.tokenize(to_bytes(text), bool(add_special), bool(parse_special))

    def token_to_piece(self, token: int, special: bool = True, lstrip: int = 0) -> bytes:
        """llama_token_to_piece: the token's bytes (empty for control and unknown tokens unless `special`),
        without up to `lstrip` leading spaces."""
        return self._core.piece(self._check(token), bool(special), int(lstrip))

    def pieces(self, special: bool = True) -> list[bytes]:
        """The piece of every token, in id order."""
        return [self._core.piece(i, special, 0) for i in range(self.n_vocab)]

    def detokenize(self, tokens, remove_special: bool = False, unparse_special: bool = True) -> bytes:
        """llama_detokenize(tokens, remove_special, unparse_special): the pieces joined (the first without its
        leading space when the vocabulary adds a space prefix; BOS/EOS dropped with remove_special when the
        vocabulary adds them), then llama.cpp's clean-up of spaces before punctuation and around apostrophes
        when the vocabulary asks for it (clean_spaces: BPE vocabularies whose pre-tokenizer does not turn it
        off)."""
        ids = self._ids(tokens)
        try:
            return self._core.detokenize(ids, bool(remove_special), bool(unparse_special))
        except IndexError:
            bad = next(int(t) for t in ids if not 0 <= t < self.n_vocab)
            raise InvalidToken(bad, self.n_vocab) from None

    def join_pieces(self, tokens, special: bool = True) -> bytes:
        """The pieces of `tokens` concatenated, nothing removed or cleaned (what llama-server's /detokenize and
        its streamed text are made of)."""
        ids = self._ids(tokens)
        for t in ids:
            if not 0 <= t < self.n_vocab:
                raise InvalidToken(int(t), self.n_vocab)
        return b"".join(self._core.piece(int(t), special, 0) for t in ids)

    def _ids(self, tokens) -> np.ndarray:
        try:
            a = np.asarray(tokens if len(tokens) else np.zeros(0, dtype=np.int64))
        except OverflowError:
            a = np.asarray(tokens, dtype=object)
        if a.ndim != 1 or (a.dtype.kind not in "iu" and not all(isinstance(t, (int, np.integer)) for t in a)) \
                or any(isinstance(t, bool) for t in a.tolist()):
            raise TypeError("token ids must be a flat sequence of integers")
        for t in (a.tolist() if a.dtype.kind == "O" else ()):
            if not 0 <= t < self.n_vocab:
                raise InvalidToken(int(t), self.n_vocab)
        bad = (a < 0) | (a >= self.n_vocab)
        if bad.any():
            raise InvalidToken(int(a[bad][0]), self.n_vocab)
        return np.ascontiguousarray(a, dtype=np.int32)

    def __repr__(self) -> str:
        return (f"Tokenizer({self.vocab.model}/{self.vocab.pre or 'default'}, n_vocab={self.n_vocab}, "
                f"bos={self.bos_id}, eos={self.eos_id}, eog={sorted(self._eog)})")


__all__ = ["Tokenizer", "to_bytes", "ATTR_BYTE", "ATTR_CONTROL", "ATTR_NORMAL", "ATTR_UNKNOWN", "ATTR_UNUSED",
           "ATTR_USER_DEFINED"]
