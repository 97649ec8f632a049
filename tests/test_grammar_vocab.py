"""bankml.grammar.vocab: token pieces and end-of-generation ids as libllama reports them (records:
tests/oracle/grammar/vocab_*.json)."""

from __future__ import annotations

import hashlib
import json

import pytest

from bankml.grammar import GrammarVocab


def _pieces_sha(pieces) -> str:
    return hashlib.sha256(b"".join(len(p).to_bytes(4, "little") + p for p in pieces)).hexdigest()


def _from_tokenizer(path):
    from bankml.models.gguf import read_header_file
    from bankml.tokenizer import Tokenizer
    return GrammarVocab.from_tokenizer(Tokenizer.from_gguf(read_header_file(path)))


@pytest.mark.slow
@pytest.mark.parametrize("build", ["gguf", "tokenizer"])
@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_pieces_and_eog_match_libllama(name, build, request, oracle_dir):
    path = request.getfixturevalue(f"{name}_path")
    rec = json.loads((oracle_dir / "grammar" / f"vocab_{name}.json").read_text(encoding="utf-8"))
    v = GrammarVocab.from_gguf_file(path) if build == "gguf" else _from_tokenizer(path)
    assert v.n_vocab == rec["n_vocab"]
    assert sorted(v.eog_ids) == rec["eog_ids"]
    for tid, hexpiece in rec["sample"].items():
        assert v.pieces[int(tid)] == bytes.fromhex(hexpiece), tid
    assert _pieces_sha(v.pieces) == rec["pieces_sha256"]


def test_from_tokenizer_uses_its_pieces():
    class Tok:
        n_vocab = 3
        eog_ids = [2]

        def token_to_piece(self, i, special=True):
            return [b"a", b"\xc3", b"</s>"][i]

        def tokenize(self, text, add_special=False, parse_special=True):
            return [0]

    v = GrammarVocab.from_tokenizer(Tok())
    assert v.pieces == [b"a", b"\xc3", b"</s>"] and v.eog_ids == frozenset({2})
    assert v.tokenize("<a>") == [0]


def test_gguf_fallback_resolves_special_token_texts(smollm2_path):
    from bankml.grammar import Grammar
    from bankml.grammar.vocab import TokenizerNeeded
    v = GrammarVocab.from_gguf_file(smollm2_path)
    g = Grammar.parse('root ::= "hi" <|im_start|>', vocab=v)
    g.accept(v.pieces.index(b"hi"))
    assert g.mask().sum() == 1 and g.allowed(1)
    # an end-of-generation token named in a grammar is still held back until the grammar is complete
    g = Grammar.parse('root ::= "hi" <|im_end|>', vocab=v)
    g.accept(v.pieces.index(b"hi"))
    assert g.mask().sum() == 0
    with pytest.raises(TokenizerNeeded, match="needs bankml.tokenizer"):
        Grammar.parse("root ::= <hello>", vocab=v)
