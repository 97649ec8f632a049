"""JSON as Ollama v0.13.3 writes and reads it: Go's encoding/json (go 1.24) behind gin v1.10's c.JSON and
ShouldBindJSON.

    body = dumps({"model": m, "created_at": go_time(time.time_ns()), ...})     # json.Marshal
    req = bind(raw, "ChatRequest")      # ShouldBindJSON into an api.ChatRequest; raises BindError(message)

Writing (json.Marshal): a dict is written in its own key order (a Go struct's field order is the caller's to
keep), a `GoMap` in sorted key order (Go sorts a map's keys); strings HTML-escaped (<, >, & as \\u003c, \\u003e,
\\u0026; U+2028, U+2029 escaped; \\b \\f \\n \\r \\t; other control characters \\u00XX; invalid UTF-8 as
U+FFFD); floats as strconv.FormatFloat(f, 'f' or 'e', -1, 64) with Go's switch to 'e' below 1e-6 and from 1e21
and its exponent without a leading zero, `F32(x)` as a float32 field is written (the shortest digits that
round-trip in 32 bits). NaN and the infinities are refused (Go's UnsupportedValueError).

Reading (gin's ShouldBindJSON = json.NewDecoder(body).Decode(&req)): the first JSON value of the body is read
and the rest ignored; an empty or blank body is io.EOF, which every Ollama handler answers as `missing request
body` (`BindError.eof`); a body that ends inside the value is `unexpected EOF`; a syntax error is the Go
scanner's message (`invalid character 'x' looking for beginning of value`, ...). The value is then decoded into
the named struct of api/types.go: keys match field names exactly or else without regard to case, unknown keys
are ignored, `null` leaves a field unset, a value of the wrong type is Go's UnmarshalTypeError (`json: cannot
unmarshal string into Go struct field ChatRequest.messages of type []api.Message`; decoding goes on and the
first such error is the one returned), and the types with their own UnmarshalJSON run it: api.Duration
(keep_alive: bankml.server.keep_alive.from_json's messages), api.ThinkValue, api.Message (role lower-cased; an
error inside a message carries the outer path), api.ImageData (base64), api.PropertyType.
Nesting: up to Go's 10,000 levels, the next opening bracket being `invalid character '[' exceeded max depth`;
reading, copying and writing values keep their own stacks; structs inside the same struct type (a ToolProperty's
anyOf) nest at most MAX_STRUCT_DEPTH (100), bankml's limit.

The result is a dict of the fields the body set (null ones left out), by their JSON names: strings, ints,
bools, lists, dicts as decoded; `format` (json.RawMessage) as its raw JSON text; `keep_alive` as the JSON value
(already validated: pass it to keep_alive.from_json); `think` as True / False / "high" | "medium" | "low";
images as bytes.

This module knows JSON and api/types.go's request structs only.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
import time

# --- writing ---------------------------------------------------------------------------------------------------


class GoMap(dict):
    """A Go map: written with its keys sorted."""


class F32(float):
    """A float32 field's value (api.Options' floats, ...): written with float32's shortest digits."""


_ESC = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
        "<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_NEEDS = re.compile('["\\\\\x00-\x1f<>&\u2028\u2029\ud800-\udfff]')


def _esc(m) -> str:
    c = m.group(0)
    e = _ESC.get(c)
    if e is not None:
        return e
    if "\ud800" <= c <= "\udfff":
        return "\ufffd"
    return "\\u%04x" % ord(c)


def _string(s) -> str:
    if isinstance(s, (bytes, bytearray)):
        s = bytes(s).decode("utf-8", "replace")
    return '"' + _NEEDS.sub(_esc, s) + '"'


def _shortest32(x: float) -> str:
    """The shortest decimal digits that read back as the same float32 (repr's rule, in 32 bits)."""
    f = struct.unpack("<f", struct.pack("<f", x))[0]
    for p in range(1, 10):
        s = "%.*e" % (p - 1, f)
        if struct.unpack("<f", struct.pack("<f", float(s)))[0] == f:
            return s
    return "%.8e" % f


def format_float(x: float, bits: int = 64) -> str:
    """encoding/json's floatEncoder."""
    if math.isnan(x) or math.isinf(x):
        raise ValueError(f"json: unsupported value: {x!r}")
    if bits == 32:
        x = struct.unpack("<f", struct.pack("<f", x))[0]
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    digits_exp = _shortest32(x) if bits == 32 else "%r" % x
    # normalise to mantissa digits and a decimal exponent
    m = re.fullmatch(r"(-?)(\d+)(?:\.(\d*))?(?:e([+-]?\d+))?", digits_exp)
    if m is None:                          # repr gave e.g. "1e+16" forms only; anything else: let float say
        digits_exp = "%.17e" % x
        m = re.fullmatch(r"(-?)(\d+)(?:\.(\d*))?(?:e([+-]?\d+))?", digits_exp)
    sign, ip, fp, ex = m.group(1), m.group(2), m.group(3) or "", int(m.group(4) or 0)
    digits = (ip + fp).lstrip("0")
    # the decimal point sits after len(ip) digits of ip+fp; leading zeros stripped shift it
    lead = len(ip + fp) - len((ip + fp).lstrip("0"))
    point = len(ip) + ex - lead            # value = 0.digits... no: digits[0:point] . digits[point:]
    digits = digits.rstrip("0") or "0"
    a = abs(x)
    use_e = (a < 1e-6 or a >= 1e21) if bits == 64 else (a < 1e-6 or a >= 1e21)
    if not use_e:
        if point <= 0:
            out = "0." + "0" * (-point) + digits
        elif point >= len(digits):
            out = digits + "0" * (point - len(digits))
        else:
            out = digits[:point] + "." + digits[point:]
        return sign + out
    e = point - 1
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    es = "e-%02d" % -e if e < 0 else "e+%02d" % e
    if es.startswith("e-0") and len(es) == 4:     # Go: e-07 -> e-7
        es = "e-" + es[3:]
    return sign + mant + es


def _encode(v, out: list) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, (str, bytes, bytearray)):
        out.append(_string(v))
    elif isinstance(v, int):
        out.append(str(int(v)))
    elif isinstance(v, F32):
        out.append(format_float(float(v), 32))
    elif isinstance(v, float):
        out.append(format_float(v, 64))
    elif isinstance(v, dict):
        items = sorted(v.items()) if isinstance(v, GoMap) else v.items()
        out.append("{")
        first = True
        for k, x in items:
            if not first:
                out.append(",")
            first = False
            out.append(_string(str(k)))
            out.append(":")
            _encode(x, out)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, x in enumerate(v):
            if i:
                out.append(",")
            _encode(x, out)
        out.append("]")
    else:
        raise TypeError(f"json: unsupported type: {type(v).__name__}")


def dumps(obj) -> bytes:
    """json.Marshal(obj)."""
    out: list = []
    _encode(obj, out)
    return "".join(out).encode("utf-8")


def go_time(ns: int | None = None, utc: bool = True) -> str:
    """A time.Time as its MarshalJSON writes it (RFC 3339 with nanoseconds, trailing zeros dropped): in UTC
    (`Z`) for time.Now().UTC(), else in the local zone (`Z` too when its offset is zero)."""
    if ns is None:
        ns = time.time_ns()
    secs, frac = divmod(ns, 1_000_000_000)
    if utc:
        tm, off = time.gmtime(secs), 0
    else:
        tm = time.localtime(secs)
        off = tm.tm_gmtoff or 0
    out = time.strftime("%Y-%m-%dT%H:%M:%S", tm)
    if frac:
        out += "." + ("%09d" % frac).rstrip("0")
    if off == 0:
        return out + "Z"
    sign = "+" if off > 0 else "-"
    off = abs(off)
    return out + "%s%02d:%02d" % (sign, off // 3600, off % 3600 // 60)


# --- reading: the scanner --------------------------------------------------------------------------------------


class BindError(Exception):
    """ShouldBindJSON's error: `message` as err.Error() prints it; `eof`: the body was empty (io.EOF, which the
    handlers answer as `missing request body`)."""

    def __init__(self, message: str, eof: bool = False):
        super().__init__(message)
        self.message = message
        self.eof = eof


class _Syntax(Exception):
    pass


class _EOF(Exception):
    pass


def _quote_char(c: int) -> str:
    """encoding/json's quoteChar: the byte as a rune, quoted as strconv.Quote quotes it, in single quotes."""
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    ch = chr(c)
    if ch == "\\":
        return "'\\\\'"
    if ch.isprintable() and ch != "\x7f" and not (0x80 <= c < 0xA0):
        return "'" + ch + "'"
    specials = {7: "\\a", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t", 11: "\\v"}
    if c in specials:
        return "'" + specials[c] + "'"
    if c < 0x80 or c < 0x100:
        return "'\\x%02x'" % c if c < 0x80 else "'\\u%04x'" % c
    return "'\\u%04x'" % c


def _err(c: int, context: str) -> _Syntax:
    return _Syntax("invalid character " + _quote_char(c) + " " + context)


_WS = b" \t\r\n"


MAX_DEPTH = 10000  # encoding/json's maxNestingDepth (scanner.go)


def c_close(opening: int) -> int:
    return 0x7D if opening == 0x7B else 0x5D


class _Scanner:
    """Go's scanner over the bytes of one value (the Decoder's readValue): raises _Syntax with its message or
    _EOF when the data ends inside the value; returns the end offset of the first value."""

    def __init__(self, data: bytes):
        self.d = data
        self.i = 0
        self.deepest = 0   # the most containers open at once

    def peek(self) -> int:
        if self.i >= len(self.d):
            raise _EOF()
        return self.d[self.i]

    def skip_ws(self) -> None:
        while self.i < len(self.d) and self.d[self.i] in _WS:
            self.i += 1

    def value(self) -> None:
        """One value, on an explicit stack of the open containers ("{" or "["), as Go's scanner keeps its parse
        states; an opening bracket past MAX_DEPTH of them is Go's "exceeded max depth" (scanner.go,
        pushParseState)."""
        stack: list[int] = []
        while True:
            self.deepest = max(self.deepest, len(stack))
            # a value is expected
            self.skip_ws()
            c = self.peek()
            if c in (0x7B, 0x5B):  # { [
                if len(stack) >= MAX_DEPTH:
                    raise _err(c, "exceeded max depth")
                self.i += 1
                stack.append(c)
                self.skip_ws()
                c = self.peek()
                if c == c_close(stack[-1]):
                    self.i += 1
                    stack.pop()
                elif stack[-1] == 0x7B:
                    self._key()
                    continue
                else:
                    continue
            elif c == ord('"'):
                self.i += 1
                self.string()
            elif c == ord("-") or ord("0") <= c <= ord("9"):
                self.number()
            elif c in b"tfn":
                self.literal()
            else:
                raise _err(c, "looking for beginning of value")
            # a value ended: close what it ends, until a ',' asks for the next one
            while stack:
                self.skip_ws()
                c = self.peek()
                top = stack[-1]
                if c == ord(","):
                    self.i += 1
                    if top == 0x7B:
                        self.skip_ws()
                        self._key()
                    break
                if c == c_close(top):
                    self.i += 1
                    stack.pop()
                    continue
                raise _err(c, "after object key:value pair" if top == 0x7B else "after array element")
            if not stack:
                return

    def _key(self) -> None:
        c = self.peek()
        if c != ord('"'):
            raise _err(c, "looking for beginning of object key string")
        self.i += 1
        self.string()
        self.skip_ws()
        c = self.peek()
        if c != ord(":"):
            raise _err(c, "after object key")
        self.i += 1

    def string(self) -> None:
        while True:
            c = self.peek()
            self.i += 1
            if c == ord('"'):
                return
            if c == ord("\\"):
                e = self.peek()
                self.i += 1
                if e in b'"\\/bfnrt':
                    continue
                if e == ord("u"):
                    for _ in range(4):
                        h = self.peek()
                        if not (chr(h) in "0123456789abcdefABCDEF"):
                            raise _err(h, "in \\u hexadecimal character escape")
                        self.i += 1
                    continue
                raise _err(e, "in string escape code")
            if c < 0x20:
                raise _err(c, "in string literal")

    def _digit(self) -> bool:
        return self.i < len(self.d) and ord("0") <= self.d[self.i] <= ord("9")

    def number(self) -> None:
        # the next byte after a number decides its end; at the end of the data a number is complete (the
        # decoder steps a space in), but inside an object or array that is the caller's EOF
        if self.d[self.i] == ord("-"):
            self.i += 1
            c = self.peek()
            if not (ord("0") <= c <= ord("9")):
                raise _err(c, "in numeric literal")
        if self.d[self.i] == ord("0"):
            self.i += 1
        else:
            while self._digit():
                self.i += 1
        if self.i < len(self.d) and self.d[self.i] == ord("."):
            self.i += 1
            c = self.peek()
            if not (ord("0") <= c <= ord("9")):
                raise _err(c, "after decimal point in numeric literal")
            while self._digit():
                self.i += 1
        if self.i < len(self.d) and self.d[self.i] in b"eE":
            self.i += 1
            c = self.peek()
            if c in b"+-":
                self.i += 1
                c = self.peek()
            if not (ord("0") <= c <= ord("9")):
                raise _err(c, "in exponent of numeric literal")
            while self._digit():
                self.i += 1

    def literal(self) -> None:
        word = {ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}[self.d[self.i]]
        name = word.decode()
        self.i += 1
        for ch in word[1:]:
            c = self.peek()
            if c != ch:
                raise _err(c, f"in literal {name} (expecting {_quote_char(ch)})")
            self.i += 1


# Go reads up to MAX_DEPTH levels, and so does bankml (the scanner, the parse of a deep value, _plain and
# _raw_text keep their own stacks). The one recursive walk left is decoding into a struct inside the same struct
# type (api.ToolProperty's anyOf): bankml refuses those nested deeper than this (400, the message names the limit):
# docs/grammar.md, "Depth and size limits".
MAX_STRUCT_DEPTH = 100
STRUCT_DEPTH_MESSAGE = (f"request structs nested deeper than {MAX_STRUCT_DEPTH} levels (tool property anyOf) are "
                        "not supported (bankml's limit)")
_DEEP = 200  # a value nested deeper than this is parsed on an explicit stack (Python's json would recurse)


def _first_value(data: bytes) -> tuple[bytes, int]:
    """Decoder.Decode's readValue: the bytes of the first value (BindError as Go reports the data), and how many
    containers it opens at most."""
    s = _Scanner(data)
    s.skip_ws()
    if s.i >= len(data):
        raise BindError("EOF", eof=True)
    start = s.i
    try:
        s.value()
    except _EOF:
        raise BindError("unexpected EOF") from None
    except _Syntax as e:
        raise BindError(str(e)) from None
    return data[start:s.i], s.deepest + 1


# --- reading: the decoded value --------------------------------------------------------------------------------

def _fix_str(s: str) -> str:
    # Go's unquote: a lone surrogate escape and invalid UTF-8 become U+FFFD
    if any("\ud800" <= c <= "\udfff" for c in s):
        s = re.sub("[\ud800-\udfff]", "\ufffd", s)
    return s


class _Num:
    """A JSON number kept as its literal (Go decodes from the text)."""
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


_TOKEN = re.compile(r'\s*(?:([\[\]{}:,])|("(?:[^"\\]|\\.)*")|(true|false|null)|([^\s\[\]{}:,]+))', re.S)
_LITERAL = {"true": True, "false": False, "null": None}


def _parse(raw: bytes, depth: int = 0):
    """The value of bytes the scanner accepted: numbers as _Num (their text), strings decoded."""
    import json
    text = raw.decode("utf-8", "replace")
    if depth <= _DEEP:
        return json.loads(text, parse_int=_Num, parse_float=_Num, parse_constant=_Num)
    # the same value on explicit stacks: the open containers, and the keys read for the objects among them
    containers: list = []
    keys: list[str] = []
    expect_key = False
    result = None
    for m in _TOKEN.finditer(text):
        punct, string, literal, number = m.groups()
        if punct == ":":
            continue
        if punct == ",":
            expect_key = isinstance(containers[-1], dict)
            continue
        if punct == "[" or punct == "{":
            containers.append([] if punct == "[" else {})
            expect_key = punct == "{"
            continue
        if punct is not None:  # ] or }
            v = containers.pop()
        elif string is not None:
            v = json.loads(string)
            if expect_key:
                keys.append(v)
                expect_key = False
                continue
        elif literal is not None:
            v = _LITERAL[literal]
        else:
            v = _Num(number)
        if not containers:
            result = v
        elif isinstance(containers[-1], dict):
            containers[-1][keys.pop()] = v
        else:
            containers[-1].append(v)
    return result


def _plain_scalar(v):
    if isinstance(v, _Num):
        f = float(v.text)
        return int(v.text) if re.fullmatch(r"-?\d+", v.text) and abs(f) < 2 ** 63 else f
    if isinstance(v, str):
        return _fix_str(v)
    return v


def _plain(v):
    """The decoded value as Go's interface{} holds it (numbers as float64; ints kept exact when whole); a copy
    made on an explicit stack."""
    if not isinstance(v, (list, dict)):
        return _plain_scalar(v)
    root: list | dict = [] if isinstance(v, list) else {}
    todo = [(v, root)]
    while todo:
        src, dst = todo.pop()
        for k, x in (enumerate(src) if isinstance(src, list) else src.items()):
            if isinstance(x, (list, dict)):
                y = [] if isinstance(x, list) else {}
                todo.append((x, y))
            else:
                y = _plain_scalar(x)
            if isinstance(dst, list):
                dst.append(y)
            else:
                dst[_fix_str(k)] = y
    return root


def _json_kind(v) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, _Num):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return "null"


class _TypeError(Exception):
    def __init__(self, value: str, gotype: str, struct_name: str = "", field: str = ""):
        self.value, self.gotype, self.struct, self.field = value, gotype, struct_name, field

    def text(self) -> str:
        if self.struct or self.field:
            return (f"json: cannot unmarshal {self.value} into Go struct field {self.struct}.{self.field} of type "
                    f"{self.gotype}")
        return f"json: cannot unmarshal {self.value} into Go value of type {self.gotype}"


class _Custom(Exception):
    """An error an UnmarshalJSON returned (decoding stops at once)."""


# A type: ("string"|"int"|"float64"|"bool"|"any"|"raw"|"duration"|"think"|"image"|"ptype",) | ("slice", T, name)
# | ("map", T, name) | ("struct", Name) | ("message",)
_S, _I, _F, _B, _ANY = ("string",), ("int",), ("float64",), ("bool",), ("any",)


def _slice(t, name):
    return ("slice", t, name)


def _map(t, name):
    return ("map", t, name)


_OPTIONS = _map(_ANY, "map[string]interface {}")
_MESSAGES = _slice(("message",), "[]api.Message")
_IMAGES = _slice(("image",), "[]api.ImageData")

STRUCTS: dict[str, tuple[str, dict]] = {
    # name: (Go type name, {json name: type})
    "GenerateRequest": ("api.GenerateRequest", {
        "model": _S, "prompt": _S, "suffix": _S, "system": _S, "template": _S, "context": _slice(_I, "[]int"),
        "stream": _B, "raw": _B, "format": ("raw",), "keep_alive": ("duration",), "images": _IMAGES,
        "options": _OPTIONS, "think": ("think",), "truncate": _B, "shift": _B, "_debug_render_only": _B,
        "logprobs": _B, "top_logprobs": _I}),
    "ChatRequest": ("api.ChatRequest", {
        "model": _S, "messages": _MESSAGES, "stream": _B, "format": ("raw",), "keep_alive": ("duration",),
        "tools": _slice(("struct", "Tool"), "api.Tools"), "options": _OPTIONS, "think": ("think",),
        "truncate": _B, "shift": _B, "_debug_render_only": _B, "logprobs": _B, "top_logprobs": _I}),
    "Message": ("api.Message", {
        "role": _S, "content": _S, "thinking": _S, "images": _IMAGES,
        "tool_calls": _slice(("struct", "ToolCall"), "[]api.ToolCall"), "tool_name": _S, "tool_call_id": _S}),
    "ToolCall": ("api.ToolCall", {"id": _S, "function": ("struct", "ToolCallFunction")}),
    "ToolCallFunction": ("api.ToolCallFunction", {
        "index": _I, "name": _S, "arguments": _map(_ANY, "api.ToolCallFunctionArguments")}),
    "Tool": ("api.Tool", {"type": _S, "items": _ANY, "function": ("struct", "ToolFunction")}),
    "ToolFunction": ("api.ToolFunction", {
        "name": _S, "description": _S, "parameters": ("struct", "ToolFunctionParameters")}),
    "ToolFunctionParameters": ("api.ToolFunctionParameters", {
        "type": _S, "$defs": _ANY, "items": _ANY, "required": _slice(_S, "[]string"),
        "properties": _map(("struct", "ToolProperty"), "map[string]api.ToolProperty")}),
    "ToolProperty": ("api.ToolProperty", {
        "anyOf": _slice(("struct", "ToolProperty"), "[]api.ToolProperty"), "type": ("ptype",), "items": _ANY,
        "description": _S, "enum": _slice(_ANY, "[]interface {}")}),
    "EmbedRequest": ("api.EmbedRequest", {
        "model": _S, "input": _ANY, "keep_alive": ("duration",), "truncate": _B, "dimensions": _I,
        "options": _OPTIONS}),
    "EmbeddingRequest": ("api.EmbeddingRequest", {
        "model": _S, "prompt": _S, "keep_alive": ("duration",), "options": _OPTIONS}),
    "CreateRequest": ("api.CreateRequest", {
        "model": _S, "stream": _B, "quantize": _S, "from": _S, "remote_host": _S,
        "files": _map(_S, "map[string]string"), "adapters": _map(_S, "map[string]string"), "template": _S,
        "license": _ANY, "system": _S, "parameters": _OPTIONS, "messages": _MESSAGES, "renderer": _S,
        "parser": _S, "info": _OPTIONS, "name": _S, "quantization": _S}),
    "DeleteRequest": ("api.DeleteRequest", {"model": _S, "name": _S}),
    "ShowRequest": ("api.ShowRequest", {
        "model": _S, "system": _S, "template": _S, "verbose": _B, "options": _OPTIONS, "name": _S}),
    "CopyRequest": ("api.CopyRequest", {"source": _S, "destination": _S}),
    "PullRequest": ("api.PullRequest", {
        "model": _S, "insecure": _B, "username": _S, "password": _S, "stream": _B, "name": _S}),
}


def _gotype(t) -> str:
    k = t[0]
    if k in ("slice", "map"):
        return t[2]
    if k == "struct":
        return STRUCTS[t[1]][0]
    return {"string": "string", "int": "int", "float64": "float64", "bool": "bool", "any": "interface {}",
            "image": "api.ImageData"}.get(k, k)


class _Decoder:
    """One Unmarshal: the first UnmarshalTypeError is saved (decoding goes on), a custom error stops it."""

    def __init__(self):
        self.saved: _TypeError | Exception | None = None
        self.struct = ""                 # errorContext.Struct's name
        self.stack: list[str] = []       # errorContext.FieldStack
        self.nesting = 0                 # structs being decoded, one inside the other

    def save(self, e) -> None:
        if self.saved is None:
            if isinstance(e, _TypeError) and (self.struct or self.stack):
                e.struct = self.struct
                e.field = ".".join(self.stack + ([e.field] if e.field else []))
            self.saved = e

    def mismatch(self, v, t, value: str | None = None) -> None:
        self.save(_TypeError(value or _json_kind(v), _gotype(t)))

    def decode(self, v, t):
        """The value v (a parsed JSON value, None for null) as type t; _UNSET when nothing is set."""
        k = t[0]
        if v is None:
            return _UNSET
        if k == "any":
            return _plain(v)
        if k == "raw":
            return v                       # the caller keeps the raw text
        if k == "string":
            if isinstance(v, str):
                return _fix_str(v)
            self.mismatch(v, t)
            return _UNSET
        if k == "bool":
            if isinstance(v, bool):
                return v
            self.mismatch(v, t)
            return _UNSET
        if k == "int":
            if isinstance(v, _Num):
                if re.fullmatch(r"-?\d+", v.text) and -(1 << 63) <= int(v.text) < (1 << 63):
                    return int(v.text)
                self.mismatch(v, t, "number " + v.text)
                return _UNSET
            self.mismatch(v, t)
            return _UNSET
        if k == "float64":
            if isinstance(v, _Num):
                f = float(v.text)
                if math.isinf(f):
                    self.mismatch(v, t, "number " + v.text)
                    return _UNSET
                return f
            self.mismatch(v, t)
            return _UNSET
        if k == "slice":
            if not isinstance(v, list):
                self.mismatch(v, t)
                return _UNSET
            out = []
            for x in v:
                d = self.decode(x, t[1])
                out.append(_zero(t[1]) if d is _UNSET else d)
            return out
        if k == "map":
            if not isinstance(v, dict):
                self.mismatch(v, t)
                return _UNSET
            out = {}
            for key, x in v.items():
                d = self.decode(x, t[1])
                out[_fix_str(key)] = _zero(t[1]) if d is _UNSET else d
            return out
        if k == "struct":
            return self.struct_value(v, t[1])
        if k == "message":
            return self.message(v)
        if k == "image":
            if not isinstance(v, str):
                self.mismatch(v, t)
                return _UNSET
            try:
                return _b64(v)
            except ValueError as e:
                self.save(e)
                return _UNSET
        if k == "ptype":
            if isinstance(v, str):
                return [_fix_str(v)]
            if isinstance(v, list) and all(isinstance(x, str) for x in v):
                return [_fix_str(x) for x in v]
            # PropertyType's UnmarshalJSON: the []string attempt's own error (a fresh Unmarshal)
            inner = _Decoder()
            inner.decode(v, _slice(_S, "[]string"))
            raise _Custom(_message_of(inner.saved, "[]string"))
        if k == "duration":
            from ..keep_alive import from_json
            try:
                from_json(_plain(v))
            except ValueError as e:
                raise _Custom(str(e)) from None
            return _plain(v)
        if k == "think":
            if isinstance(v, bool):
                return v
            if isinstance(v, str):
                s = _fix_str(v)
                if s not in ("high", "medium", "low"):
                    raise _Custom(f'invalid think value: {go_quote(s)} (must be "high", "medium", "low", true, '
                                  'or false)')
                return s
            raise _Custom('think must be a boolean or string ("high", "medium", "low", true, or false)')
        raise AssertionError(k)

    def struct_value(self, v, name: str, gname: str | None = None):
        self.nesting += 1
        try:
            if self.nesting > MAX_STRUCT_DEPTH:
                raise _Custom(STRUCT_DEPTH_MESSAGE)
            return self._struct_value(v, name, gname)
        finally:
            self.nesting -= 1

    def _struct_value(self, v, name: str, gname: str | None = None):
        gname, fields = gname or STRUCTS[name][0], STRUCTS[name][1]
        if not isinstance(v, dict):
            self.mismatch(v, ("struct", name))
            return _UNSET
        out: dict = {}
        for key, x in v.items():
            f = key if key in fields else next((n for n in fields if n.casefold() == key.casefold()), None)
            if f is None:
                continue                   # unknown fields are ignored
            saved_struct, depth = self.struct, len(self.stack)
            self.struct = gname.split(".", 1)[-1]
            self.stack.append(f)
            t = fields[f]
            d = _raw_text(x) if t == ("raw",) else self.decode(x, t)
            del self.stack[depth:]
            self.struct = saved_struct
            if d is _UNSET:
                if x is None:
                    out.pop(f, None)
                continue
            out[f] = d
        return out

    def message(self, v):
        # Message.UnmarshalJSON: a fresh json.Unmarshal into an Alias of Message; its error comes back at once,
        # with the outer decoder's context added (addErrorContext)
        inner = _Decoder()
        if not isinstance(v, dict):
            inner.mismatch(v, ("struct", "Message"))
            e = inner.saved
            e.gotype = "api.Alias"
            raise _Custom(self._with_context(e))
        m = inner.struct_value(v, "Message", "api.Alias")
        if inner.saved is not None:
            raise _Custom(self._with_context(inner.saved))
        m = dict(m)
        if "role" in m:
            m["role"] = m["role"].lower()
        return m

    def _with_context(self, e) -> str:
        if isinstance(e, _TypeError):
            if self.struct or self.stack:
                e.struct = self.struct
                e.field = ".".join(self.stack + ([e.field] if e.field else []))
            return e.text()
        return str(e)


class _Unset:
    pass


_UNSET = _Unset()


def _zero(t):
    if t[0] in ("message", "struct", "map"):
        return {}
    return {"string": "", "int": 0, "float64": 0.0, "bool": False}.get(t[0])


def _raw_text(x) -> str:
    """json.RawMessage: the value's JSON text, compact, numbers as the client wrote them (written from an explicit
    stack of pieces)."""
    import json
    out: list[str] = []
    todo: list = [x]
    while todo:
        item = todo.pop()
        if isinstance(item, _Piece):
            out.append(item.text)
        elif isinstance(item, _Num):
            out.append(item.text)
        elif isinstance(item, (list, dict)):
            pieces: list = [_Piece("[" if isinstance(item, list) else "{")]
            for i, (k, e) in enumerate(enumerate(item) if isinstance(item, list) else item.items()):
                if i:
                    pieces.append(_Piece(","))
                if isinstance(item, dict):
                    pieces.append(_Piece(json.dumps(k, ensure_ascii=False) + ":"))
                pieces.append(e)
            pieces.append(_Piece("]" if isinstance(item, list) else "}"))
            todo.extend(reversed(pieces))
        else:
            out.append(json.dumps(item, ensure_ascii=False))
    return "".join(out)


class _Piece:
    """literal text in _raw_text's stack (a str there is a JSON string value)"""
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _message_of(e, gotype: str) -> str:
    if e is None:
        return f"json: cannot unmarshal into Go value of type {gotype}"
    return e.text() if isinstance(e, _TypeError) else str(e)


def go_quote(s: str) -> str:
    """%q of a Go string (strconv.Quote), for the printable cases Ollama's messages meet."""
    out = []
    for c in s:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif not c.isprintable():
            o = ord(c)
            out.append("\\x%02x" % o if o < 0x80 else ("\\u%04x" % o if o < 0x10000 else "\\U%08x" % o))
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _b64(s: str) -> bytes:
    """base64.StdEncoding.Decode as encoding/json calls it (\\r and \\n skipped; the first bad byte's offset)."""
    data = s.replace("\r", "").replace("\n", "")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        pass
    alphabet = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")
    raw = s.encode("utf-8")
    pos = 0
    for i, c in enumerate(raw):
        if c in b"\r\n":
            continue
        if c not in alphabet:
            pos = i
            break
        pos = i + 1
    raise ValueError(f"illegal base64 data at input byte {pos}")


def bind(raw: bytes, struct_name: str) -> dict:
    """ShouldBindJSON(&req) for the api struct `struct_name`: the fields the body set (see the module doc)."""
    value, depth = _first_value(bytes(raw))
    parsed = _parse(value, depth)
    dec = _Decoder()
    gname = STRUCTS[struct_name][0]
    if not isinstance(parsed, dict):
        if parsed is None:
            return {}
        raise BindError(_TypeError(_json_kind(parsed), gname).text())
    try:
        out = dec.struct_value(parsed, struct_name)
    except _Custom as e:
        raise BindError(str(e)) from None
    except RecursionError:
        raise BindError(STRUCT_DEPTH_MESSAGE) from None
    if dec.saved is not None:
        e = dec.saved
        raise BindError(e.text() if isinstance(e, _TypeError) else str(e))
    return out
