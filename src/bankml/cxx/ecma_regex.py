"""libstdc++'s std::regex (ECMAScript grammar, `char`) as a Python `re` pattern over bytes, for grep_search.

    translate(b"li(?!ne o)ne") -> b"li(?!ne o)ne"          # a pattern Python's re reads alike
    translate(b"(")            -> RegexError("Mismatched '(' and ')' in regular expression")
    translate(b"(?<=a)b")      -> RegexError("Invalid '(?...)' zero-width assertion in regular expression")
    translate(b"\\ca")         -> None                     # not reproduced: the caller refuses it

What is read as libstdc++ does (each checked against llama-server b11192's grep_search, tests/oracle/server
session tools_search): literals, `.` (any byte but \\n and \\r), `^ $ |`, groups `( )`, `(?: )`, look-ahead
`(?= )` `(?! )`, back-references `\\1`-`\\9`, escapes `\\d \\D \\w \\W \\s \\S \\b \\B \\f \\n \\r \\t \\v \\0 \\xHH
\\uHHHH` (below 256) and any other escaped character as itself (`\\e` is `e`), classes with ranges, escapes and
POSIX names (`[]` matches nothing, `[^]` anything), quantifiers `* + ? {n} {n,} {n,m}` with a lazy `?`, a
quantifier on a quantified atom (`a**`, `a{2}{3}`). libstdc++'s error texts for: a quantifier with nothing to
repeat and unbalanced parentheses ("Mismatched '(' and ')'"), `(?` not followed by `:`, `=` or `!`, a trailing
backslash, an unclosed class, a reversed class range, an unclosed or reversed `{}`. Anything else gives None.
"""

from __future__ import annotations

import re


class RegexError(Exception):
    """std::regex_error: the text of its what()."""


MISMATCHED_PAREN = "Mismatched '(' and ')' in regular expression"
_POSIX = {b"alpha": b"a-zA-Z", b"digit": b"0-9", b"alnum": b"a-zA-Z0-9", b"upper": b"A-Z", b"lower": b"a-z",
          b"space": b" \\t\\n\\r\\f\\v", b"xdigit": b"0-9A-Fa-f", b"blank": b" \\t", b"w": b"a-zA-Z0-9_",
          b"punct": re.escape(bytes(c for c in range(33, 127) if not chr(c).isalnum())),
          b"cntrl": b"\\x00-\\x1f\\x7f", b"print": b"\\x20-\\x7e", b"graph": b"\\x21-\\x7e"}
_CLASS_ESC = {ord(c): ("\\" + c).encode() for c in "dDwWsS"}
_CTRL = {ord("f"): 0x0C, ord("n"): 0x0A, ord("r"): 0x0D, ord("t"): 0x09, ord("v"): 0x0B}


def _byte(v: int) -> bytes:
    return b"\\x%02x" % v


def _hex(src: bytes, i: int, n: int) -> int | None:
    part = src[i:i + n]
    if len(part) != n or not all(chr(c) in "0123456789abcdefABCDEF" for c in part):
        return None
    return int(part, 16)


def _escape(src: bytes, i: int, in_class: bool) -> tuple[bytes | None, int, int | None]:
    """The escape at src[i] == '\\\\': (Python text, next index, its single byte or None)."""
    if i + 1 >= len(src):
        raise RegexError("Invalid escape at end of regular expression")
    c = src[i + 1]
    if c in _CLASS_ESC:
        return _CLASS_ESC[c], i + 2, None
    if c in (ord("b"), ord("B")) and not in_class:
        return b"\\" + bytes([c]), i + 2, None
    if c == ord("b"):
        return _byte(8), i + 2, 8
    if c in _CTRL:
        return _byte(_CTRL[c]), i + 2, _CTRL[c]
    if c == ord("0"):
        if i + 2 < len(src) and chr(src[i + 2]).isdigit():
            return None, i, None
        return _byte(0), i + 2, 0
    if ord("1") <= c <= ord("9"):
        if in_class or (i + 2 < len(src) and chr(src[i + 2]).isdigit()):
            return None, i, None
        return b"\\" + bytes([c]), i + 2, None
    if c == ord("x"):
        v = _hex(src, i + 2, 2)
        return (None, i, None) if v is None else (_byte(v), i + 4, v)
    if c == ord("u"):
        v = _hex(src, i + 2, 4)
        return (None, i, None) if v is None or v > 0xFF else (_byte(v), i + 6, v)
    if c == ord("c") or chr(c).isalnum() and c not in b"eE":
        # \c X and the escapes whose meaning the grammar leaves to the implementation: not claimed
        return None, i, None
    return _byte(c), i + 2, c


def _class(src: bytes, i: int) -> tuple[bytes, int]:
    """The bracket expression starting at src[i] == '['."""
    j = i + 1
    negated = src[j:j + 1] == b"^"
    if negated:
        j += 1
    items: list[bytes] = []
    prev: int | None = None          # the last single byte (a range may start there)
    while True:
        if j >= len(src):
            raise RegexError("Unexpected character within '[...]' in regular expression")
        c = src[j]
        if c == ord("]"):
            j += 1
            break
        if src[j:j + 2] == b"[:":
            end = src.find(b":]", j + 2)
            if end < 0 or src[j + 2:end] not in _POSIX:
                return None, j
            items.append(_POSIX[src[j + 2:end]])
            j, prev = end + 2, None
            continue
        if src[j:j + 2] in (b"[=", b"[."):
            return None, j
        if c == ord("-") and prev is None and items and j + 1 < len(src) and src[j + 1] != ord("]"):
            return None, j           # a range from a class escape or a POSIX name
        if c == ord("-") and prev is not None and j + 1 < len(src) and src[j + 1] != ord("]"):
            if src[j + 1] == ord("\\"):
                text, nxt, hi = _escape(src, j + 1, True)
                if text is None or hi is None:
                    return None, j
            elif src[j + 1:j + 3] == b"[:":
                return None, j
            else:
                hi, nxt = src[j + 1], j + 2
            if hi < prev:
                raise RegexError("Invalid range in bracket expression.")
            items[-1] = _byte(prev) + b"-" + _byte(hi)
            j, prev = nxt, None
            continue
        if c == ord("\\"):
            text, nxt, single = _escape(src, j, True)
            if text is None:
                return None, j
            items.append(text)
            j, prev = nxt, single
            continue
        items.append(_byte(c))
        j, prev = j + 1, c
    if not items:
        return (b"[\\x00-\\xff]" if negated else b"(?!)"), j
    return b"[" + (b"^" if negated else b"") + b"".join(items) + b"]", j


def _interval(src: bytes, i: int) -> tuple[bytes | None, int]:
    """`{n}`, `{n,}`, `{n,m}` at src[i] == '{'."""
    m = re.compile(rb"\{(\d*)(,?)(\d*)").match(src, i)
    lo, comma, hi = m.group(1), m.group(2), m.group(3)
    end = m.end()
    if end >= len(src):
        raise RegexError("Mismatched '{' and '}' in regular expression")
    if src[end] != ord("}"):
        return None, i
    if not lo or (hi and int(hi) < int(lo)):
        raise RegexError("Invalid range in '{}' in regular expression")
    return src[i:end + 1], end + 1


def translate(src: bytes) -> bytes | None:
    """The Python pattern for `src`; RegexError with libstdc++'s text; None when not reproduced."""
    out: list[bytes] = []
    atom: int | None = None      # index in `out` where the last quantifiable item starts
    quantified = False
    depth = 0
    groups = 0
    i = 0
    while i < len(src):
        c = src[i]
        if c in b"*+?{":
            if atom is None:
                if c == ord("{"):
                    return None
                raise RegexError(MISMATCHED_PAREN)
            if c == ord("{"):
                q, i = _interval(src, i)
                if q is None:
                    return None
            else:
                q, i = bytes([c]), i + 1
            if src[i:i + 1] == b"?":
                q, i = q + b"?", i + 1
            if quantified:          # a quantifier on a quantified atom: repeat the whole
                out[atom:] = [b"(?:" + b"".join(out[atom:]) + b")"]
            out.append(q)
            quantified = True
            continue
        quantified = False
        if c == ord("\\"):
            text, nxt, _single = _escape(src, i, False)
            if text is None:
                return None
            if text in (b"\\b", b"\\B"):
                atom = None
            else:
                if ord("1") <= src[i + 1] <= ord("9") and src[i + 1] - ord("0") > groups:
                    return None
                atom = len(out)
            out.append(text)
            i = nxt
        elif c == ord("["):
            text, nxt = _class(src, i)
            if text is None:
                return None
            atom = len(out)
            out.append(text)
            i = nxt
        elif c == ord("("):
            if src[i + 1:i + 2] == b"?":
                kind = src[i + 2:i + 3]
                if kind not in (b":", b"=", b"!"):
                    raise RegexError("Invalid '(?...)' zero-width assertion in regular expression")
                out.append(b"(?" + kind)
                i += 3
            else:
                groups += 1
                out.append(b"(")
                i += 1
            depth += 1
            atom = None
        elif c == ord(")"):
            depth -= 1
            if depth < 0:
                raise RegexError(MISMATCHED_PAREN)
            # a group is the atom a quantifier after it repeats (a look-ahead is an assertion: none)
            k, level = len(out) - 1, 0
            while k >= 0:
                if out[k] == b")":
                    level += 1
                elif out[k] in (b"(", b"(?:", b"(?=", b"(?!"):
                    if level == 0:
                        break
                    level -= 1
                k -= 1
            out.append(b")")
            atom = None if out[k] in (b"(?=", b"(?!") else k
            i += 1
        elif c == ord("|"):
            out.append(b"|")
            atom = None
            i += 1
        elif c in b"^$":
            out.append(bytes([c]))
            atom = None
            i += 1
        elif c == ord("."):
            atom = len(out)
            out.append(b"[^\\n\\r]")
            i += 1
        else:
            atom = len(out)
            out.append(_byte(c))
            i += 1
    if depth != 0:
        raise RegexError(MISMATCHED_PAREN)
    return b"".join(out)
