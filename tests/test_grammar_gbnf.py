"""bankml.grammar.gbnf: the GBNF parser against llama.cpp b11192's (records: tests/oracle/grammar/parse.json)."""

from __future__ import annotations

import hashlib
import json

import pytest

from bankml.errors import GrammarError
from bankml.grammar import gbnf


def _records(oracle_dir):
    return json.loads((oracle_dir / "grammar" / "parse.json").read_text(encoding="utf-8"))["records"]


def _rules_sha(rules, symbols) -> str:
    canon = json.dumps({"rules": rules, "symbols": sorted(symbols.items())}, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def test_parse_matches_oracle(oracle_dir):
    records = _records(oracle_dir)
    assert len(records) >= 400
    n_ok = 0
    for rec in records:
        try:
            p = gbnf.parse(rec["text"])
        except GrammarError:
            assert not rec["parse_ok"], rec["id"]
            continue
        assert rec["parse_ok"], rec["id"]
        rules = [[list(e) for e in r] for r in p.rules]
        assert len(rules) == rec["n_rules"], rec["id"]
        assert _rules_sha(rules, p.symbol_ids) == rec["rules_sha256"], rec["id"]
        if "rules" in rec:
            assert rules == rec["rules"] and p.symbol_ids == rec["symbols"], rec["id"]
        n_ok += 1
    assert n_ok >= 300


def test_left_recursion_and_root_checks_match_oracle_init(oracle_dir):
    # llama_grammar_init_impl refuses (NULL) exactly where the rules are empty, the root is missing or a
    # left recursion is found; "diverged" marks grammars the oracle itself cannot initialise (endless stacks)
    from bankml.grammar.grammar import compile_rules

    class _V:  # compile_rules only needs a vocabulary for the engine; the checks run before
        pass

    refused = diverged = 0
    for rec in _records(oracle_dir):
        if not rec["parse_ok"]:
            continue
        p = gbnf.parse(rec["text"])
        checks_pass = bool(p.rules) and "root" in p.symbol_ids and gbnf.left_recursive_rule(p.rules) is None
        if rec["init"] == "ok":
            assert checks_pass, rec["id"]
        elif rec["init"] == "null":
            assert not checks_pass, rec["id"]
            refused += 1
        else:
            assert checks_pass, rec["id"]  # passes the checks, then never finishes expanding its stacks
            diverged += 1
    assert refused >= 10 and diverged >= 1
    del compile_rules, _V


def test_repetition_rewrite_ids():
    p = gbnf.parse('root ::= "a"{2,4}')
    # root: a a ref(root_2); root_1 ::= a | ; root_2 ::= a root_1 |
    assert p.symbol_ids == {"root": 0, "root_1": 1, "root_2": 2}
    assert p.rules[0] == [(gbnf.CHAR, 97), (gbnf.CHAR, 97), (gbnf.RULE_REF, 2), (gbnf.END, 0)]
    assert p.rules[1] == [(gbnf.CHAR, 97), (gbnf.ALT, 0), (gbnf.END, 0)]
    assert p.rules[2] == [(gbnf.CHAR, 97), (gbnf.RULE_REF, 1), (gbnf.ALT, 0), (gbnf.END, 0)]


@pytest.mark.parametrize("text, match", [
    ('root ::= "a" (', r"'\)' was expected"),
    ("root ::= missing", "undefined rule 'missing'"),
    ('root ::= "\\q"', "unknown escape"),
    ('root ::= "a"{2001}', "repetition count 2001 is above 2000"),
    ('root ::= ("a"? "b"? "c"?){800}', "would copy 3200 rules"),
    ('root ::= "a"{3,1}', "upper bound is below the lower one"),
    ("root ::= *", "a repetition needs an item before it"),
    ('root : "a"', "'::=' was expected"),
    ("root ::= <[5000000000]>", "token id too large"),
    ("root ::= <foo>", "a token given by its text needs a vocabulary"),
], ids=lambda x: x if isinstance(x, str) and len(x) < 30 else None)
def test_refusals(text, match):
    with pytest.raises(GrammarError, match=match):
        gbnf.parse(text)


def test_text_read_as_c_string():
    # everything after a NUL byte is ignored, as the oracle reads a C string
    assert gbnf.parse('root ::= "a"\0 garbage ((').rules == gbnf.parse('root ::= "a"').rules


def test_token_by_text_uses_tokenize():
    p = gbnf.parse("root ::= <hello> !<[7]>", tokenize=lambda s: [42] if s == "<hello>" else [1, 2])
    assert p.rules[0][:2] == [(gbnf.TOKEN, 42), (gbnf.TOKEN_NOT, 7)]
    with pytest.raises(GrammarError, match="not exactly one token"):
        gbnf.parse("root ::= <other>", tokenize=lambda s: [1, 2])


def test_upper_bound_above_limit_means_unbounded():
    # {0,3000} is read as {0,} (the oracle drops an upper bound above 2000)
    assert gbnf.parse('root ::= "a"{0,3000}').rules == gbnf.parse('root ::= "a"{0,}').rules


def test_left_recursion_detection():
    assert gbnf.left_recursive_rule(gbnf.parse('root ::= x\nx ::= x "a" | "b"').rules) is not None
    assert gbnf.left_recursive_rule(gbnf.parse('root ::= x\nx ::= "a" x | "b"').rules) is None
    # only a directly empty alternate counts as "may be empty" (as in the oracle)
    rules = gbnf.parse('root ::= x\nx ::= e x | "b"\ne ::= f\nf ::= "" | "c"').rules
    assert gbnf.left_recursive_rule(rules) is None
