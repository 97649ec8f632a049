"""nlohmann::json as llama-server b11192 uses it: the text forms of its values and errors, and its parser.

1. Text forms. llama-server writes JSON values into some error messages (`Missing 'role' in message:
{"content":"hi"}`) and reports JSON type errors with nlohmann's own wording. `dump`, `type_name`, `at`,
`get_str`, `value`, `contains`, `iterate` and `NLError` reproduce those texts from Python values decoded by
`json.loads` (dict key order kept). Numbers: ints as decimal; floats with nlohmann's layout (at most 15 integer
digits before switching to exponent form, "1.0" for integral values, two-digit exponents), with the shortest
digits of nlohmann's Grisu2 (bankml.cxx._dtoa, which is not always the shortest text: docs/nljson.md).

2. Parsing request bodies: `loads(raw)` accepts what `json::parse(body)` (strict, no comments) accepts and
raises `JSONParseError` (an NLError) whose message is nlohmann's exception text.

    value = loads(raw_bytes)        # raises JSONParseError whose str() is nlohmann's exception message

What differs from Python's json module, and is reproduced here: lone surrogates ("\\ud800") are refused;
NaN/Infinity are refused; integers wider than 64 bits and floats that overflow are refused or turned into
doubles as nlohmann does (a double that overflows is "[json.exception.out_of_range.406] number overflow
parsing '...'"); a UTF-8 BOM is skipped; a NUL byte ends the input (anything after it is ignored); invalid
UTF-8 inside a string is refused; nesting has no depth limit (reading, checking and `dump` are iterative:
see docs/nljson.md, "Depth and size limits"). Error messages name the line and column (bytes
since the last newline) and the text read since the last string or number began ("last read"), with control
characters written <U+00XX>.

Valid bodies go through Python's json (C speed) and are checked for the few things it accepts and nlohmann
does not; only those and invalid bodies are walked by the byte-level parser below, which follows nlohmann's
lexer (scan, scan_string, scan_number, scan_literal, skip_bom) and parser (sax_parse_internal).
Integers come back as int (nlohmann keeps int64 / uint64; wider ones become float), floats as float.

3. `loads_python(text)`: the parse bankml.chat applies to the JSON texts it holds (Python's json with nlohmann's
refusals of NaN, overflow and lone surrogates); it differs from `loads` on a few inputs, listed in its docstring.
"""

from __future__ import annotations

import json
import math
import re

from . import _dtoa


def type_name(v) -> str:
    """nlohmann's basic_json::type_name()."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, list):
        return "array"
    return "number"


class NLError(Exception):
    """A nlohmann exception: `message` is its what() text."""

    def __init__(self, message: str):
        self.message = message
        super().__init__(message)


def type_must_be(kind: str, v) -> NLError:
    return NLError(f"[json.exception.type_error.302] type must be {kind}, but is {type_name(v)}")


def key_not_found(key: str) -> NLError:
    return NLError(f"[json.exception.out_of_range.403] key '{key}' not found")


def at(obj, key: str):
    """json::at(key)."""
    if not isinstance(obj, dict):
        raise NLError(f"[json.exception.type_error.304] cannot use at() with {type_name(obj)}")
    if key not in obj:
        raise key_not_found(key)
    return obj[key]


def get_str(v) -> str:
    if not isinstance(v, str):
        raise type_must_be("string", v)
    return v


def value(obj, key: str, default):
    """json::value(key, default) for a default of default's type (str or dict)."""
    if not isinstance(obj, dict):
        raise NLError(f"[json.exception.type_error.306] cannot use value() with {type_name(obj)}")
    if key not in obj:
        return default
    v = obj[key]
    if isinstance(default, str) and not isinstance(v, str):
        raise type_must_be("string", v)
    return v


def contains(obj, key: str) -> bool:
    """json::contains(key): true for an object holding the key, false for any other value."""
    return isinstance(obj, dict) and key in obj


def iterate(v):
    """Range-for over a json: an object's values, an array's items, nothing for null, else the value itself."""
    if v is None:
        return []
    if isinstance(v, dict):
        return list(v.values())
    if isinstance(v, list):
        return v
    return [v]


def _float(x: float) -> str:
    """A double as nlohmann writes it: Grisu2's digits and nlohmann's layout (bankml.cxx._dtoa)."""
    return _dtoa.number_text(x)


#: the characters nlohmann's dump escapes (the quote, the backslash, the C0 controls); every other code point,
#: including a lone surrogate, is written as it is
_ESCAPED = re.compile(r'["\\\x00-\x1f]')
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match) -> str:
    ch = m.group()
    return _SHORT.get(ch) or "\\u%04x" % ord(ch)


def _str(s: str) -> str:
    """A string as json::dump writes it (ensure_ascii off): the short escapes, \\u00XX for the other controls."""
    return '"' + _ESCAPED.sub(_escape, s) + '"'


_LITERALS = {None: "null", True: "true", False: "false"}


def dump(v, indent: int = -1, _lvl: int = 0) -> str:
    """json::dump(indent): compact (',' ':') without indent, else one member a line and ': '. Iterative (an
    explicit stack of pieces still to write), so any nesting depth dumps."""
    out: list[str] = []
    todo: list = [(v, _lvl)]
    while todo:
        item = todo.pop()
        if type(item) is str:
            out.append(item)
            continue
        x, lvl = item
        if x is None or x is True or x is False:
            out.append(_LITERALS[x])
        elif isinstance(x, int):
            out.append(str(x))
        elif isinstance(x, float):
            out.append(_float(x))
        elif isinstance(x, str):
            out.append(_str(x))
        elif isinstance(x, (list, tuple, dict)):
            is_obj = isinstance(x, dict)
            open_, close = ("{", "}") if is_obj else ("[", "]")
            if not x:
                out.append(open_ + close)
                continue
            members = list(x.items()) if is_obj else [(None, y) for y in x]
            pieces: list = []
            if indent < 0:
                out.append(open_)
                for i, (k, y) in enumerate(members):
                    if i:
                        pieces.append(",")
                    if is_obj:
                        pieces.append(_str(k) + ":")
                    pieces.append((y, 0))
                pieces.append(close)
            else:
                pad = " " * (indent * (lvl + 1))
                out.append(open_ + "\n")
                for i, (k, y) in enumerate(members):
                    pieces.append((",\n" if i else "") + pad + (_str(k) + ": " if is_obj else ""))
                    pieces.append((y, lvl + 1))
                pieces.append("\n" + " " * (indent * lvl) + close)
            todo.extend(reversed(pieces))
        else:
            raise TypeError(f"not a JSON value: {type(x).__name__}")
    return "".join(out)


def depth(v) -> int:
    """How deeply containers nest in a JSON value: 0 for a scalar, 1 for [] or [1], 2 for [[1]] (iterative)."""
    deepest = 0
    todo = [(v, 1)]
    while todo:
        x, d = todo.pop()
        if isinstance(x, dict):
            x = x.values()
        elif not isinstance(x, (list, tuple)):
            continue
        deepest = max(deepest, d)
        todo.extend((y, d + 1) for y in x)
    return deepest


# ---- parsing request bodies ----


class JSONParseError(NLError, ValueError):
    """str(e) is nlohmann's exception message, e.g. "[json.exception.parse_error.101] parse error at line 1,
    column 1: attempting to parse an empty input; ..."."""


_CONTROL_NAMES = ("NUL SOH STX ETX EOT ENQ ACK BEL BS HT LF VT FF CR SO SI DLE DC1 DC2 DC3 DC4 NAK SYN ETB CAN EM "
                  "SUB ESC FS GS RS US").split()

# token types and their names in messages
T_UNINIT, T_TRUE, T_FALSE, T_NULL, T_STRING, T_UNSIGNED, T_INTEGER, T_FLOAT = range(8)
T_BEGIN_ARRAY, T_BEGIN_OBJECT, T_END_ARRAY, T_END_OBJECT, T_NAME_SEP, T_VALUE_SEP = range(8, 14)
T_PARSE_ERROR, T_END, T_LITERAL_OR_VALUE = 14, 15, 16
_NAMES = {T_UNINIT: "<uninitialized>", T_TRUE: "true literal", T_FALSE: "false literal", T_NULL: "null literal",
          T_STRING: "string literal", T_UNSIGNED: "number literal", T_INTEGER: "number literal",
          T_FLOAT: "number literal", T_BEGIN_ARRAY: "'['", T_BEGIN_OBJECT: "'{'", T_END_ARRAY: "']'",
          T_END_OBJECT: "'}'", T_NAME_SEP: "':'", T_VALUE_SEP: "','", T_PARSE_ERROR: "<parse error>",
          T_END: "end of input", T_LITERAL_OR_VALUE: "'[', '{', or a literal"}
_STRUCT = {0x5B: T_BEGIN_ARRAY, 0x5D: T_END_ARRAY, 0x7B: T_BEGIN_OBJECT, 0x7D: T_END_OBJECT, 0x3A: T_NAME_SEP,
           0x2C: T_VALUE_SEP}
_SHORT_ESCAPES = {0x08: "b", 0x09: "t", 0x0A: "n", 0x0C: "f", 0x0D: "r"}
_ESCAPES = {0x22: 0x22, 0x5C: 0x5C, 0x2F: 0x2F, 0x62: 0x08, 0x66: 0x0C, 0x6E: 0x0A, 0x72: 0x0D, 0x74: 0x09}
EOF = -1

# runs the byte-level parser takes in one step (none holds a newline, so only the column moves): string bytes
# other than the quote, the backslash and control characters (then cut where they stop being well-formed
# UTF-8, whose definition nlohmann and Python share), digits, blanks
_PLAIN_STRING_RUN = re.compile(rb'[^"\\\x00-\x1f]+')
_DIGIT_RUN = re.compile(rb"[0-9]+")
_CONTROL_BYTE = re.compile(rb"[\x00-\x1f]")
_BLANK_RUN = re.compile(rb"[ \t\r]+")


def _utf8_ranges(c: int):
    # the continuation-byte ranges nlohmann accepts after lead byte c, or None when c cannot lead
    if 0xC2 <= c <= 0xDF:
        return ((0x80, 0xBF),)
    if c == 0xE0:
        return ((0xA0, 0xBF), (0x80, 0xBF))
    if 0xE1 <= c <= 0xEC or c in (0xEE, 0xEF):
        return ((0x80, 0xBF), (0x80, 0xBF))
    if c == 0xED:
        return ((0x80, 0x9F), (0x80, 0xBF))
    if c == 0xF0:
        return ((0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF))
    if 0xF1 <= c <= 0xF3:
        return ((0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF))
    if c == 0xF4:
        return ((0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF))
    return None


class _Lexer:
    def __init__(self, data: bytes):
        self.data = data
        self.i = 0                  # next byte to read
        self.current = EOF
        self.next_unget = False
        self.total = 0              # chars_read_total
        self.col = 0                # chars_read_current_line
        self.lines = 0              # lines_read
        self.token_string = bytearray()
        self.buf = bytearray()      # the token's value (strings, numbers)
        self.error = ""

    def get(self) -> int:
        self.total += 1
        self.col += 1
        if self.next_unget:
            self.next_unget = False
        elif self.i < len(self.data):
            self.current = self.data[self.i]
            self.i += 1
        else:
            self.current = EOF
        if self.current != EOF:
            self.token_string.append(self.current)
        if self.current == 0x0A:
            self.lines += 1
            self.col = 0
        return self.current

    def unget(self) -> None:
        self.next_unget = True
        self.total -= 1
        if self.col == 0:
            if self.lines > 0:
                self.lines -= 1
        else:
            self.col -= 1
        if self.current != EOF:
            self.token_string.pop()

    def reset(self) -> None:
        self.buf.clear()
        self.token_string.clear()
        self.token_string.append(self.current & 0xFF)

    def position(self) -> str:
        return f" at line {self.lines + 1}, column {self.col}"

    def token_text(self) -> str:
        # get_token_string(): control characters as <U+00XX>; bytes as they are (written out with U+FFFD
        # where they are not UTF-8, as llama-server's error JSON does)
        out = _CONTROL_BYTE.sub(lambda m: b"<U+%04X>" % m.group()[0], bytes(self.token_string))
        return out.decode("utf-8", "replace")

    def _fail(self, msg: str) -> int:
        self.error = msg
        return T_PARSE_ERROR

    def scan(self) -> int:
        if self.total == 0 and not self._skip_bom():
            return self._fail("invalid BOM; must be 0xEF 0xBB 0xBF if given")
        self._take_run(_BLANK_RUN)
        while True:
            self.get()
            if self.current not in (0x20, 0x09, 0x0A, 0x0D):
                break
        c = self.current
        if c in _STRUCT:
            return _STRUCT[c]
        if c == 0x74:
            return self._literal(b"true", T_TRUE)
        if c == 0x66:
            return self._literal(b"false", T_FALSE)
        if c == 0x6E:
            return self._literal(b"null", T_NULL)
        if c == 0x22:
            return self._string()
        if c == 0x2D or 0x30 <= c <= 0x39:
            return self._number()
        if c == 0 or c == EOF:
            return T_END
        return self._fail("invalid literal")

    def _skip_bom(self) -> bool:
        if self.get() == 0xEF:
            return self.get() == 0xBB and self.get() == 0xBF
        self.unget()
        return True

    def _literal(self, text: bytes, kind: int) -> int:
        for k in text[1:]:
            if self.get() != k:
                return self._fail("invalid literal")
        return kind

    def _hex4(self) -> int:
        cp = 0
        for shift in (12, 8, 4, 0):
            c = self.get()
            if 0x30 <= c <= 0x39:
                cp += (c - 0x30) << shift
            elif 0x41 <= c <= 0x46:
                cp += (c - 0x37) << shift
            elif 0x61 <= c <= 0x66:
                cp += (c - 0x57) << shift
            else:
                return -1
        return cp

    def _take_run(self, pattern, utf8: bool = False) -> bytes:
        # consume at once the run of bytes `pattern` matches at the next read position (none of them a
        # newline), as that many get() calls would; with utf8, only its well-formed UTF-8 prefix
        first = b""
        if self.next_unget:                 # the byte put back comes first (after the BOM check, a number)
            if self.current == EOF or not pattern.fullmatch(bytes([self.current])):
                return b""
            self.get()
            first = bytes([self.current])
        m = pattern.match(self.data, self.i)
        if m is None:
            return first
        run = m.group()
        if utf8:
            try:
                run.decode("utf-8")
            except UnicodeDecodeError as e:
                run = run[:e.start]
                if not run:
                    return first
        self.i += len(run)
        self.total += len(run)
        self.col += len(run)
        self.token_string += run
        self.current = run[-1]
        return first + run

    def _string(self) -> int:
        self.reset()
        buf = self.buf
        while True:
            buf += self._take_run(_PLAIN_STRING_RUN, utf8=True)
            c = self.get()
            if c == EOF:
                return self._fail("invalid string: missing closing quote")
            if c == 0x22:
                return T_STRING
            if c == 0x5C:
                e = self.get()
                if e in _ESCAPES:
                    buf.append(_ESCAPES[e])
                    continue
                if e != 0x75:
                    return self._fail("invalid string: forbidden character after backslash")
                cp = self._hex4()
                if cp == -1:
                    return self._fail("invalid string: '\\u' must be followed by 4 hex digits")
                if 0xD800 <= cp <= 0xDBFF:
                    if self.get() == 0x5C and self.get() == 0x75:
                        cp2 = self._hex4()
                        if cp2 == -1:
                            return self._fail("invalid string: '\\u' must be followed by 4 hex digits")
                        if not 0xDC00 <= cp2 <= 0xDFFF:
                            return self._fail("invalid string: surrogate U+D800..U+DBFF must be followed by "
                                              "U+DC00..U+DFFF")
                        cp = (cp << 10) + cp2 - 0x35FDC00
                    else:
                        return self._fail("invalid string: surrogate U+D800..U+DBFF must be followed by "
                                          "U+DC00..U+DFFF")
                elif 0xDC00 <= cp <= 0xDFFF:
                    return self._fail("invalid string: surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF")
                buf += chr(cp).encode("utf-8")
                continue
            if c <= 0x1F:
                short = _SHORT_ESCAPES.get(c)
                return self._fail(f"invalid string: control character U+{c:04X} ({_CONTROL_NAMES[c]}) must be "
                                  f"escaped to \\u{c:04X}" + (f" or \\{short}" if short else ""))
            if c <= 0x7F:
                buf.append(c)
                continue
            ranges = _utf8_ranges(c)
            if ranges is None:
                return self._fail("invalid string: ill-formed UTF-8 byte")
            buf.append(c)
            for lo, hi in ranges:
                d = self.get()
                if not lo <= d <= hi:
                    return self._fail("invalid string: ill-formed UTF-8 byte")
                buf.append(d)

    def _number(self) -> int:
        self.reset()
        buf = self.buf
        kind = T_UNSIGNED
        c = self.current
        buf.append(c)
        digits = range(0x30, 0x3A)
        if c == 0x2D:
            kind = T_INTEGER
            c = self.get()
            if c not in digits:
                return self._fail("invalid number; expected digit after '-'")
            buf.append(c)
        if c != 0x30:                                   # leading digits
            buf += self._take_run(_DIGIT_RUN)
            while self.get() in digits:
                buf.append(self.current)
        else:
            self.get()
        c = self.current
        if c == 0x2E:                                   # fraction
            kind = T_FLOAT
            buf.append(c)
            if self.get() not in digits:
                return self._fail("invalid number; expected digit after '.'")
            buf.append(self.current)
            while self.get() in digits:
                buf.append(self.current)
            c = self.current
        if c in (0x65, 0x45):                           # exponent
            kind = T_FLOAT
            buf.append(c)
            c = self.get()
            if c in (0x2B, 0x2D):
                buf.append(c)
                if self.get() not in digits:
                    return self._fail("invalid number; expected digit after exponent sign")
            elif c not in digits:
                return self._fail("invalid number; expected '+', '-', or digit after exponent")
            buf.append(self.current)
            while self.get() in digits:
                buf.append(self.current)
        self.unget()
        text = bytes(buf)
        if len(text) > 21:                              # past 64 bits whatever the digits: a double
            kind = T_FLOAT
        if kind == T_UNSIGNED:
            v = int(text)
            if v < (1 << 64):
                self.value = v
                return T_UNSIGNED
        elif kind == T_INTEGER:
            v = int(text)
            if v >= -(1 << 63):
                self.value = v
                return T_INTEGER
        self.value = float(text)
        return T_FLOAT


def _parse_slow(data: bytes):
    """nlohmann's parser over the bytes: the value, or JSONParseError with its message."""
    lx = _Lexer(data)
    last = [T_UNINIT]

    def next_token() -> int:
        last[0] = lx.scan()
        return last[0]

    def fail(expected: int, context: str):
        msg = "syntax error "
        if context:
            msg += f"while parsing {context} "
        msg += "- "
        if last[0] == T_PARSE_ERROR:
            msg += f"{lx.error}; last read: '{lx.token_text()}'"
        else:
            msg += f"unexpected {_NAMES[last[0]]}"
        if expected != T_UNINIT:
            msg += f"; expected {_NAMES[expected]}"
        raise JSONParseError(f"[json.exception.parse_error.101] parse error{lx.position()}: {msg}")

    def string_value() -> str:
        return bytes(lx.buf).decode("utf-8")

    def object_key() -> str:
        # the current token is an object's key; then ':' and the value's first token
        if last[0] != T_STRING:
            fail(T_STRING, "object key")
        key = string_value()
        if next_token() != T_NAME_SEP:
            fail(T_NAME_SEP, "object separator")
        next_token()
        return key

    # containers under construction: (container, pending key) pairs
    stack: list = []
    result = None
    have_result = False

    def put(v):
        nonlocal result, have_result
        if not stack:
            result, have_result = v, True
            return
        top = stack[-1]
        if isinstance(top[0], list):
            top[0].append(v)
        else:
            top[0][top[1]] = v

    next_token()
    skip = False
    while True:
        if not skip:
            t = last[0]
            if t == T_BEGIN_OBJECT:
                obj: dict = {}
                if next_token() == T_END_OBJECT:
                    put(obj)
                else:
                    key = object_key()
                    put(obj)
                    stack.append([obj, key])
                    continue
            elif t == T_BEGIN_ARRAY:
                arr: list = []
                put(arr)
                if next_token() != T_END_ARRAY:
                    stack.append([arr, None])
                    continue
            elif t == T_FLOAT:
                if not math.isfinite(lx.value):
                    raise JSONParseError("[json.exception.out_of_range.406] number overflow parsing "
                                         f"'{lx.token_text()}'")
                put(lx.value)
            elif t in (T_UNSIGNED, T_INTEGER):
                put(lx.value)
            elif t == T_TRUE:
                put(True)
            elif t == T_FALSE:
                put(False)
            elif t == T_NULL:
                put(None)
            elif t == T_STRING:
                put(string_value())
            elif t == T_PARSE_ERROR:
                fail(T_UNINIT, "value")
            elif t == T_END:
                if lx.total == 1:
                    raise JSONParseError(f"[json.exception.parse_error.101] parse error{lx.position()}: attempting "
                                         "to parse an empty input; check that your input string or stream "
                                         "contains the expected JSON")
                fail(T_LITERAL_OR_VALUE, "value")
            else:
                fail(T_LITERAL_OR_VALUE, "value")
        skip = False
        if not stack:
            break
        top = stack[-1]
        if isinstance(top[0], list):
            if next_token() == T_VALUE_SEP:
                next_token()
                continue
            if last[0] == T_END_ARRAY:
                stack.pop()
                skip = True
                continue
            fail(T_END_ARRAY, "array")
        if next_token() == T_VALUE_SEP:
            next_token()
            top[1] = object_key()
            continue
        if last[0] == T_END_OBJECT:
            stack.pop()
            skip = True
            continue
        fail(T_END_OBJECT, "object")
    if next_token() != T_END:
        fail(T_END, "value")
    assert have_result
    return result


def _no_constant(name):
    raise ValueError(name)


_SURROGATE = re.compile("[\ud800-\udfff]")


#: the slice (characters, bytes) a long string is searched or decoded in: one C call on a body of many MB would
#: hold the GIL all along (bankml-serve parses bodies on a worker thread while its event loop keeps answering)
_SLICE = 1 << 20


def _suspicious(v) -> bool:
    # what Python's json accepts and nlohmann does not (or reads differently)
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, str):
            if any(_SURROGATE.search(x, a, a + _SLICE) for a in range(0, len(x), _SLICE)):
                return True
        elif isinstance(x, float):
            if not math.isfinite(x):
                return True
        elif isinstance(x, int) and not isinstance(x, bool):
            if not -(1 << 63) <= x < (1 << 64):
                return True
        elif isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.keys())
            stack.extend(x.values())
    return False


def _decode(data: bytes) -> str:
    """data.decode("utf-8") (strict), slice by slice."""
    if len(data) <= _SLICE:
        return data.decode("utf-8")
    import codecs
    dec = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    parts = [dec.decode(view[a:a + _SLICE]) for a in range(0, len(data), _SLICE)]
    parts.append(dec.decode(b"", final=True))
    return "".join(parts)


def loads(data: bytes | bytearray | memoryview | str):
    """Parse a request body as llama-server does. Raises JSONParseError (str: nlohmann's message)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    data = bytes(data)
    try:
        if data[:1] not in (b"\xef", b"") and b"\x00" not in data:
            v = json.loads(_decode(data), parse_constant=_no_constant)
            if not _suspicious(v):
                return v
    except (ValueError, RecursionError):
        pass
    return _parse_slow(data)


# ---- parsing texts held by the chat step ----


def loads_python(text: str):
    """Python's json.loads with nlohmann's refusals: NaN / Infinity, numbers that overflow a double and lone
    surrogates raise ValueError. The chat step (bankml.chat) parses the JSON texts it holds with this (tool
    parameters, chat_template_kwargs values, the json_schema, string tool-call arguments, Gemma 4 tool results)
    where chat.cpp calls json::parse on a std::string. It is not `loads`: it refuses a leading UTF-8 BOM and a NUL
    character (nlohmann skips the one and stops at the other), keeps integers outside int64 / uint64 exact
    (nlohmann makes them doubles); a text nested past Python's limit is read by `loads` instead. The chat step's
    texts are mostly `dump` output, where the two agree; they differ only on such inputs from a request."""
    def bad_constant(name):
        raise ValueError("invalid literal " + name)

    try:
        v = json.loads(text, parse_constant=bad_constant)
    except RecursionError:
        # nested past Python's limit: nlohmann's own (iterative) reading, which agrees on such texts
        v = loads(text)
    todo = [v]
    while todo:
        x = todo.pop()
        if isinstance(x, str):
            try:
                x.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError("lone surrogate") from None
        elif isinstance(x, float) and not math.isfinite(x):
            raise ValueError("number overflow")
        elif isinstance(x, list):
            todo.extend(x)
        elif isinstance(x, dict):
            todo.extend(x.keys())
            todo.extend(x.values())
    return v
