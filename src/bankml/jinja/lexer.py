"""Lexer of llama.cpp b11192's Jinja dialect (common/jinja/lexer.cpp), re-derived.

Works on bytes, as the reference does on std::string: positions are byte offsets into the normalised source
(CRLF and CR turned into LF, one trailing newline of the original dropped), and they are what runtime error
messages report. The whitespace rules are the reference's own, which are close to but not the same as Jinja2's
`trim_blocks=True, lstrip_blocks=True`:

- text before a `{%` / `{#` tag loses the spaces between the last newline and the tag (any C `isspace` byte,
  not only blanks), and a one-byte text at the very start of the template is dropped entirely;
- the first newline after `%}` / `#}` (also `-%}` / `-#}`) is dropped, never after `}}`;
- `{%-` `{{-` `{#-` strip " \\t\\r\\n" before the tag, `-%}` `-}}` `-#}` strip it after.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import TemplateSyntaxError, peak_source

# token types (the reference's enum, same names)
EOF = "eof"
TEXT = "text"
NUMERIC = "numeric_literal"
STRING = "string_literal"
IDENT = "identifier"
EQUALS = "equals"
OPEN_PAREN = "open_paren"
CLOSE_PAREN = "close_paren"
OPEN_STMT = "open_statement"
CLOSE_STMT = "close_statement"
OPEN_EXPR = "open_expression"
CLOSE_EXPR = "close_expression"
OPEN_SQUARE = "open_square_bracket"
CLOSE_SQUARE = "close_square_bracket"
OPEN_CURLY = "open_curly_bracket"
CLOSE_CURLY = "close_curly_bracket"
COMMA = "comma"
DOT = "dot"
COLON = "colon"
PIPE = "pipe"
CALL_OP = "call_operator"
ADDITIVE = "additive_binary_operator"
MULTIPLICATIVE = "multiplicative_binary_operator"
COMPARISON = "comparison_binary_operator"
UNARY = "unary_operator"
COMMENT = "comment"

# the enum's integer values, used in one parser message ("... of type N")
TYPE_NUMBER = {t: i for i, t in enumerate([
    EOF, TEXT, NUMERIC, STRING, IDENT, EQUALS, OPEN_PAREN, CLOSE_PAREN, OPEN_STMT, CLOSE_STMT, OPEN_EXPR,
    CLOSE_EXPR, OPEN_SQUARE, CLOSE_SQUARE, OPEN_CURLY, CLOSE_CURLY, COMMA, DOT, COLON, PIPE, CALL_OP, ADDITIVE,
    MULTIPLICATIVE, COMPARISON, UNARY, COMMENT])}


@dataclass(frozen=True)
class Token:
    type: str
    value: bytes
    pos: int


_ESCAPES = {ord("n"): b"\n", ord("t"): b"\t", ord("r"): b"\r", ord("b"): b"\b", ord("f"): b"\f",
            ord("v"): b"\v", ord("\\"): b"\\", ord("'"): b"'", ord('"'): b'"'}

# longest first where prefixes overlap, in the reference's order
_TABLE = [
    (b"{%-", OPEN_STMT), (b"-%}", CLOSE_STMT), (b"{{-", OPEN_EXPR), (b"-}}", CLOSE_EXPR),
    (b"{%", OPEN_STMT), (b"%}", CLOSE_STMT), (b"{{", OPEN_EXPR), (b"}}", CLOSE_EXPR),
    (b"(", OPEN_PAREN), (b")", CLOSE_PAREN), (b"{", OPEN_CURLY), (b"}", CLOSE_CURLY),
    (b"[", OPEN_SQUARE), (b"]", CLOSE_SQUARE), (b",", COMMA), (b".", DOT), (b":", COLON), (b"|", PIPE),
    (b"<=", COMPARISON), (b">=", COMPARISON), (b"==", COMPARISON), (b"!=", COMPARISON), (b"<", COMPARISON),
    (b">", COMPARISON), (b"+", ADDITIVE), (b"-", ADDITIVE), (b"~", ADDITIVE), (b"*", MULTIPLICATIVE),
    (b"/", MULTIPLICATIVE), (b"%", MULTIPLICATIVE), (b"=", EQUALS),
]

_SPACE = frozenset(b" \t\n\v\f\r")          # C isspace() in the "C" locale
_STRIP = b" \t\r\n"                          # what {%- / -%} remove


def _is_word(c: int) -> bool:
    return (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122) or c == 95


def _is_digit(c: int) -> bool:
    return 48 <= c <= 57


def _error(msg: bytes, source: bytes, pos: int) -> TemplateSyntaxError:
    return TemplateSyntaxError(b"lexer: " + msg + b"\n" + peak_source(source, pos))


def normalise(source: bytes) -> bytes:
    """The source the reference lexes and reports positions in."""
    src = source.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if source.endswith(b"\n"):
        src = src[:-1]
    return src


def tokenize(source: bytes) -> tuple[list[Token], bytes]:
    """Tokens and the normalised source. Raises TemplateSyntaxError with the reference's message."""
    tokens: list[Token] = []
    if not source:
        return tokens, source
    src = normalise(source)
    n = len(src)
    pos = 0

    def at(i: int) -> int:                   # std::string::operator[] returns NUL at size()
        return src[i] if i < n else 0

    def next_is(chars: bytes, k: int = 1) -> bool:
        if pos + k >= n:
            return False
        return src[pos + k] in chars

    def consume_while(pred) -> bytes:
        nonlocal pos
        out = bytearray()
        while pred(at(pos)):
            if at(pos) == 92:                # backslash: an escape (only string literals get here)
                pos += 1
                if pos >= n:
                    raise _error(b"unexpected end of input after escape character", source, pos)
                esc = src[pos]
                pos += 1
                if esc not in _ESCAPES:
                    raise _error(b"unknown escape character \\" + bytes([esc]), source, pos)
                out += _ESCAPES[esc]
                continue
            out.append(at(pos))
            pos += 1
            if pos > n:
                raise _error(b"unexpected end of input during consume_while", source, pos)
        return bytes(out)

    def consume_numeric() -> bytes:
        nonlocal pos
        num = consume_while(_is_digit)
        if pos < n and src[pos] == 46 and pos + 1 < n and _is_digit(src[pos + 1]):
            pos += 1
            num += b"." + consume_while(_is_digit)
        return num

    curly_depth = 0                          # size_t in the reference: "non-zero" is the test
    while pos < n:
        start_pos = pos
        last = tokens[-1].type if tokens else CLOSE_STMT
        if last in (CLOSE_STMT, CLOSE_EXPR, COMMENT):
            can_rm_newline = False
            rstrip_last = False
            if pos > 3:
                c0, c1, c2 = src[pos - 3], src[pos - 2], src[pos - 1]
                rstrip_last = c0 == 45 and c1 in b"%}#" and c2 == 125
                can_rm_newline = c1 in b"#%-" and c2 == 125
            start = end = pos
            while pos < n and not (src[pos] == 123 and next_is(b"%{#")):
                pos += 1
                end = pos
            if at(pos) == 123 and next_is(b"%#-"):
                cur = end
                while cur > start:
                    c = src[cur - 1]
                    if cur == 1:
                        end = 0
                        break
                    if c == 10:
                        end = cur
                        break
                    if c not in _SPACE:
                        break
                    cur -= 1
            text = src[start:end] if end > start else b""
            if can_rm_newline and text[:1] == b"\n":
                text = text[1:]
            if rstrip_last:
                text = text.lstrip(_STRIP)
            if at(pos) == 123 and next_is(b"{%#") and next_is(b"-", 2):
                text = text.rstrip(_STRIP)
            if text:
                tokens.append(Token(TEXT, text, start_pos))
                continue

        if at(pos) == 123 and next_is(b"#"):
            start_pos = pos
            pos += 2
            comment = bytearray()
            while not (at(pos) == 35 and next_is(b"}")):
                if pos + 2 >= n:
                    raise _error(b"missing end of comment tag", source, pos)
                comment.append(src[pos])
                pos += 1
            tokens.append(Token(COMMENT, bytes(comment), start_pos))
            pos += 2
            continue

        if at(pos) == 45 and last in (OPEN_EXPR, OPEN_STMT):
            pos += 1
            if pos >= n:
                break

        consume_while(lambda c: c in _SPACE)
        if pos >= n:
            break
        ch = src[pos]
        closing = ch == 45 and next_is(b"%}")

        if not closing and ch in (45, 43):
            start_pos = pos
            lt = tokens[-1].type if tokens else EOF
            if lt in (TEXT, EOF):
                raise _error(b"unexpected character: " + bytes([ch]), source, pos)
            if lt not in (IDENT, NUMERIC, STRING, CLOSE_PAREN, CLOSE_SQUARE):
                pos += 1
                num = consume_numeric()
                tokens.append(Token(NUMERIC if num else UNARY, bytes([ch]) + num, start_pos))
                continue

        matched = False
        for seq, typ in _TABLE:
            start_pos = pos
            if seq == b"}}" and curly_depth != 0:
                continue
            if src.startswith(seq, pos):
                tokens.append(Token(typ, seq, start_pos))
                if typ == OPEN_EXPR:
                    curly_depth = 0
                elif typ == OPEN_CURLY:
                    curly_depth += 1
                elif typ == CLOSE_CURLY:
                    curly_depth -= 1
                pos += len(seq)
                matched = True
                break
        if matched:
            continue

        if ch in (39, 34):
            start_pos = pos
            pos += 1
            s = consume_while(lambda c, q=ch: c != q)
            tokens.append(Token(STRING, s, start_pos))
            pos += 1
            continue
        if _is_digit(ch):
            start_pos = pos
            tokens.append(Token(NUMERIC, consume_numeric(), start_pos))
            continue
        if _is_word(ch):
            start_pos = pos
            tokens.append(Token(IDENT, consume_while(_is_word), start_pos))
            continue
        raise _error(b"unexpected character: " + bytes([ch]), source, pos)

    return tokens, src
