"""bankml.tokenizer: llama.cpp b11192's tokenizer (src/llama-vocab.cpp, src/unicode.cpp), reproduced.

Owns: the vocabulary of a GGUF (tokens, attributes, special tokens, end-of-generation set), byte-level BPE with
llama.cpp's pre-tokenizers and SentencePiece-style tokenization, token pieces and detokenization.
Must not know: chat templates, HTTP.

    from bankml.tokenizer import Tokenizer
    tok = Tokenizer.from_gguf(header)
    ids = tok.tokenize("Hello", add_special=False, parse_special=True)
"""

from importlib import resources as _resources

from . import _unicode

_unicode.load_tables(_resources.files(__name__).joinpath("unicode_tables.bin").read_bytes())

from .tokenizer import Tokenizer, to_bytes  # noqa: E402
from .vocab import (ATTR_BYTE, ATTR_CONTROL, ATTR_LSTRIP, ATTR_NORMAL, ATTR_RSTRIP, ATTR_UNDEFINED,  # noqa: E402
                    ATTR_UNKNOWN, ATTR_UNUSED, ATTR_USER_DEFINED, Vocab, load_vocab, token_piece)

__all__ = ["Tokenizer", "Vocab", "load_vocab", "to_bytes", "token_piece", "ATTR_UNDEFINED", "ATTR_UNKNOWN", "ATTR_UNUSED",
           "ATTR_NORMAL", "ATTR_CONTROL", "ATTR_USER_DEFINED", "ATTR_BYTE", "ATTR_LSTRIP", "ATTR_RSTRIP"]
