"""bankml.grammar.grammar / _engine: masks, accept and EOG rules against llama.cpp b11192's grammar sampler.

The records (tests/oracle/grammar/masks_smollm2.json) hold, along random token walks over ~360 grammars, the
oracle's allowed set over the whole vocabulary (sha256 of the ids) and its verdict on small candidate lists.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from bankml.errors import GrammarError
from bankml.grammar import Grammar, GrammarVocab, init_grammar


@pytest.fixture(scope="module")
def vocab(smollm2_path):
    return GrammarVocab.from_gguf_file(smollm2_path)


def _ids_sha(mask: np.ndarray) -> str:
    return hashlib.sha256(np.flatnonzero(mask).astype("<i4").tobytes()).hexdigest()


@pytest.mark.slow
@pytest.mark.oracle
def test_masks_match_oracle_along_walks(vocab, oracle_dir):
    data = json.loads((oracle_dir / "grammar" / "masks_smollm2.json").read_text(encoding="utf-8"))
    n_steps = n_partial = 0
    for rec in data["records"]:
        g = Grammar.parse(rec["text"], vocab=vocab)
        for i, step in enumerate(rec["steps"]):
            where = f"{rec['id']} step {i}"
            # the token-by-token path (no cached mask yet) on the candidate subset
            sub = np.asarray(step["subset"], dtype=np.int32)
            verdict = "".join("1" if g.allowed(t) else "0" for t in sub)
            assert verdict == step["subset_allowed"], where
            m = g.mask()
            assert int(m.sum()) == step["n_allowed"], where
            assert _ids_sha(m) == step["allowed_sha256"], where
            if "allowed" in step:
                assert np.flatnonzero(m).tolist() == step["allowed"], where
            # apply() on the subset once the mask is cached
            logits = np.zeros(len(sub), dtype=np.float32)
            g.apply(sub, logits)
            assert "".join("0" if np.isneginf(x) else "1" for x in logits) == step["subset_allowed"], where
            n_partial += g.partial_utf8[1] > 0
            n_steps += 1
            if "token" in step:
                g.accept(step["token"])
    assert n_steps >= 4000 and n_partial >= 50


def test_eog_only_when_complete(vocab):
    g = Grammar.parse('root ::= "ab"', vocab=vocab)
    eos = min(vocab.eog_ids)
    assert not g.is_done and not g.allowed(eos)
    a = vocab.pieces.index(b"a")
    b = vocab.pieces.index(b"b")
    g.accept(a)
    assert not g.allowed(eos) and g.allowed(b) and not g.allowed(a)
    g.accept(b)
    assert g.is_done and g.allowed(eos)
    assert g.mask().sum() == len(vocab.eog_ids)  # nothing but end of generation is left
    g.accept(eos)  # accepting EOG leaves the state as it is
    assert g.is_done


def test_accept_of_a_rejected_token_raises_like_the_oracle(vocab):
    g = Grammar.parse('root ::= "ab"', vocab=vocab)
    x = vocab.pieces.index(b"x")
    with pytest.raises(GrammarError, match=r"^Unexpected empty grammar stack after accepting piece: x \(\d+\)$"):
        g.accept(x)
    with pytest.raises(GrammarError, match="end-of-generation token was accepted while the grammar is not complete"):
        g.accept(min(vocab.eog_ids))


def test_clone_and_reset_share_the_engine(vocab):
    g = Grammar.parse("root ::= [a-z]+ \".\"", vocab=vocab)
    h = g.clone()
    g.accept(vocab.pieces.index(b"hello"))
    assert g.stacks() != h.stacks()
    assert h.engine is g.engine
    g.reset()
    assert g.stacks() == h.stacks()
    # the same text compiles to the same (cached) engine
    assert Grammar.parse("root ::= [a-z]+ \".\"", vocab=vocab).engine is g.engine


def test_partial_utf8_across_tokens(vocab):
    g = Grammar.parse('root ::= "é" "!"', vocab=vocab)
    lead = vocab.pieces.index(b"\xc3")
    cont = vocab.pieces.index(b"\xa9")
    assert g.allowed(lead)
    g.accept(lead)
    assert g.partial_utf8 == (0x03, 1)
    m = g.mask()
    assert m[cont] and not m[lead]
    g.accept(cont)
    assert g.partial_utf8[1] == 0 and g.allowed(vocab.pieces.index(b"!"))


def test_empty_text_is_no_grammar(vocab):
    assert init_grammar("", vocab) is None
    assert init_grammar("\0root ::= \"a\"", vocab) is None
    with pytest.raises(GrammarError, match="defines no rule"):
        init_grammar("   ", vocab)
    with pytest.raises(GrammarError, match="has no 'root' symbol"):
        init_grammar('start ::= "a"', vocab)
    with pytest.raises(GrammarError, match="left recursion"):
        init_grammar('root ::= root "a" | "b"', vocab)


def test_divergent_expansion_is_refused(vocab):
    # passes llama.cpp's left-recursion check, then grows its stacks without end in the oracle
    with pytest.raises(GrammarError, match="does not terminate"):
        Grammar.parse('root ::= x\nx ::= e x "z" | "b"\ne ::= f\nf ::= "c" |', vocab=vocab)


def test_apply_rejects_bad_ids_and_lengths(vocab):
    g = Grammar.parse('root ::= "a"', vocab=vocab)
    with pytest.raises(GrammarError, match="outside the vocabulary"):
        g.apply(np.array([vocab.n_vocab], dtype=np.int32), np.zeros(1, dtype=np.float32))
    with pytest.raises(ValueError, match="differ in length"):
        g.apply(np.array([1, 2], dtype=np.int32), np.zeros(1, dtype=np.float32))


def test_token_elements(vocab):
    # <[id]> matches a token by id; !<[id]> any other token
    g = Grammar.parse("root ::= <[100]> !<[2]>", vocab=vocab)
    m = g.mask()
    assert m[100] and m.sum() == 1
    g.accept(100)
    m = g.mask()
    assert not m[2] and m[3] and m.sum() > 40000


def test_lazy_grammar_waits_for_its_trigger(vocab):
    # llama_sampler_init_grammar_lazy_patterns: nothing is constrained before the trigger; then the buffered
    # text from the first non-empty group on is replayed into the grammar
    g = Grammar.parse('root ::= "<tool>" [a-z]+', vocab=vocab, lazy=True,
                      trigger_patterns=[r"[\s\S]*?(<tool>)[\s\S]*"])
    assert g.awaiting and g.mask().all() and g.allowed(min(vocab.eog_ids))
    for piece in (b"Hello", b" <", b"tool", b">"):
        g.accept(vocab.pieces.index(piece))
    assert not g.awaiting
    m = g.mask()
    assert m[vocab.pieces.index(b"abc")] and not m[vocab.pieces.index(b" ")]
    h = g.clone()
    g.reset()
    assert g.awaiting and not h.awaiting


def test_lazy_grammar_trigger_token(vocab):
    g = Grammar.parse('root ::= <[1]> "x"', vocab=vocab, lazy=True, trigger_tokens=[1])
    g.accept(vocab.pieces.index(b"Hi"))
    assert g.awaiting
    g.accept(1)
    assert not g.awaiting
    m = g.mask()
    assert m[vocab.pieces.index(b"x")] and m.sum() == 1
