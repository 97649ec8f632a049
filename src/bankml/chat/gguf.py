"""What the chat step takes from a GGUF header: the template sources, the BOS/EOS texts, add_bos / add_eos.

Owns llama_model_chat_template (the `tokenizer.chat_template[.name]` key read as llama.cpp reads it) and the
vocabulary facts the templates need: the texts of the BOS and EOS tokens (llama_token_to_piece with
special=true) and whether the vocabulary adds them itself. The facts come from bankml.tokenizer: its Tokenizer
when it loads the vocabulary, else its piece rule applied to the header's keys when they say it all.
Must not know: templates, requests; tokenization itself is bankml.tokenizer's.

    model_chat_template(header)             # bytes or None
    vocab_facts(header)                     # {"bos_text": "<s>", "eos_text": "</s>", "add_bos": True, ...}
"""

from __future__ import annotations

from ..errors import TokenizerError
from ..models.gguf import GGUFHeader
from ..tokenizer import Tokenizer, token_piece
from .errors import TemplateNotReproduced


def model_chat_template(header, name: str | None = None) -> bytes | None:
    """llama_model_chat_template: `tokenizer.chat_template[.name]` as llama.cpp reads it (a C string: cut at the
    first NUL), or its one built-in fallback (Mistral Small 2503's tekken vocabulary with 40 layers)."""
    key = "tokenizer.chat_template" + ("." + name if name else "")
    v = header.get(key)
    if v is None:
        if name is None and header.get("tokenizer.ggml.pre") == "tekken" and header.arch_key("block_count") == 40:
            return b"mistral-v7-tekken"
        return None
    if isinstance(v, (list, tuple)):
        return None                                     # arrays are not in llama.cpp's string view of the KVs
    if isinstance(v, bytes):
        b = v
    elif isinstance(v, str):
        b = v.encode("utf-8", "surrogateescape")
    elif isinstance(v, bool):
        b = b"true" if v else b"false"
    else:
        b = str(v).encode()
    return b.split(b"\0", 1)[0]


def vocab_facts(header) -> dict:
    """BOS/EOS texts and the add_bos/add_eos switches of a header, by bankml.tokenizer's Tokenizer. A header it
    does not load (a vocabulary it refuses or does not reproduce yet, or a header that is not a GGUFHeader) is
    read from its keys when they say it all (a 'gpt2' or 'llama' vocabulary with explicit BOS/EOS ids and
    add_bos_token), the two texts made by bankml.tokenizer's piece rule; any other: TemplateNotReproduced."""
    if isinstance(header, GGUFHeader):
        try:
            tok = Tokenizer.from_gguf(header)
        except TokenizerError:   # a vocabulary the tokenizer does not load: the keys below decide, or refuse
            pass
        else:
            def text(tid):
                if tid is None or tid < 0:
                    return ""
                return tok.token_to_piece(tid, special=True).decode("utf-8", "surrogateescape")
            return {"bos_text": text(tok.bos_id), "eos_text": text(tok.eos_id), "add_bos": bool(tok.add_bos),
                    "add_eos": bool(tok.add_eos)}
    return _facts_from_keys(header)


def _facts_from_keys(header) -> dict:
    model = header.get("tokenizer.ggml.model")
    missing = [k for k in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                           "tokenizer.ggml.add_bos_token") if header.get(k) is None]
    if model not in ("gpt2", "llama") or missing:
        raise TemplateNotReproduced(
            f"BOS/EOS texts of a '{model}' vocabulary without {', '.join(missing) or 'a known model'}: "
            "they need bankml.tokenizer's defaults")
    tokens = header.get("tokenizer.ggml.tokens")
    types = header.get("tokenizer.ggml.token_type")

    def text(key):
        tid = header.get(key)
        if tid is None or not 0 <= tid < len(tokens):
            return ""
        ttype = int(types[tid]) if types is not None else 1
        return token_piece(tokens[tid], ttype, model == "llama").decode("utf-8", "surrogateescape")
    return {"bos_text": text("tokenizer.ggml.bos_token_id"), "eos_text": text("tokenizer.ggml.eos_token_id"),
            "add_bos": bool(header.get("tokenizer.ggml.add_bos_token")),
            "add_eos": bool(header.get("tokenizer.ggml.add_eos_token", False))}
