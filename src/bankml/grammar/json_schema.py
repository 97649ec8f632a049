"""JSON schema -> GBNF, as llama.cpp b11192 converts it (common/json-schema.cpp builds a schema document,
common/json-schema-to-grammar.cpp turns it into rules).

    to_gbnf({"type": "object", "properties": {"a": {"type": "integer"}}})   # the oracle's text, to the letter
    to_gbnf(schema) raises SchemaError("JSON schema conversion failed:\\n...") where the oracle throws

Two stages, as in the oracle:
1. `build_document(schema)`: the supported subset as typed nodes (any, ref, anyOf, allOf, const, enum, null,
   boolean, number, integer with inclusive bounds, string with pattern / format / lengths, array, tuple,
   object with ordered properties). Anything outside it fails with "JSON schema error at <path>: <reason>".
   The keywords are read in the oracle's order ($ref, then oneOf/anyOf, then a type array, const, enum, ...),
   so a schema with several of them converts as the oracle converts it.
2. `Converter`: rules named after the schema path (`root`, `<name>-<prop>`, `<name>-item`, ...), the
   primitive rules (space, value, object, array, string, char, number, integer, integral-part, decimal-part,
   boolean, null, uuid, date, time, date-time and their -string forms), deduplicated by content (same
   content, same name; else a numbered name), printed sorted by name. Patterns go through its regex-to-GBNF
   translation; integer ranges through its digit-range construction.

Values are dumped as nlohmann::json dumps them (compact, raw UTF-8, its float format), because const and enum
values and property names become literals of that text. Objects keep their key order (a duplicated key keeps
its first position and its last value, as both parsers do).

`build_grammar(builder_fn)` is the oracle's `build_grammar`, the converter behind the chat template's
response-format grammar (bankml.grammar.chat).

Depth: a schema nested deeper than MAX_SCHEMA_DEPTH (100) is refused with a message naming the limit (the
oracle converts deeper ones); values inside a schema, and the width of an object, have no limit (docs/json_schema.md,
"Depth and size limits").
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from bankml.cxx import nljson
from bankml.errors import SchemaError

INT_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1

# -- JSON values with nlohmann's types and text ------------------------------------------------------------


def is_int(v) -> bool:
    """nlohmann is_number_integer (signed or unsigned), not a bool"""
    return type(v) is int and INT64_MIN <= v <= UINT64_MAX


def is_number(v) -> bool:
    return (type(v) is int) or (type(v) is float)


def _scalar(v):
    if type(v) is int:
        return v if INT64_MIN <= v <= UINT64_MAX else float(v)
    return v


def normalize(v):
    """A parsed JSON value as nlohmann holds it: integers outside int64/uint64 become doubles (a copy, made on
    an explicit stack: any nesting depth)."""
    if not isinstance(v, (dict, list)):
        return _scalar(v)
    root = {} if isinstance(v, dict) else []
    todo = [(v, root)]
    while todo:
        src, dst = todo.pop()
        for k, x in (src.items() if isinstance(src, dict) else enumerate(src)):
            if isinstance(x, (dict, list)):
                y = {} if isinstance(x, dict) else []
                todo.append((x, y))
            else:
                y = _scalar(x)
            if isinstance(dst, dict):
                dst[k] = y
            else:
                dst.append(y)
    return root


def dump(v) -> str:
    """nlohmann::json::dump(): compact, UTF-8 kept raw, control characters escaped, nlohmann's number forms
    (bankml.cxx.nljson); integers beyond int64/uint64 are doubles, as nlohmann parsed them."""
    return nljson.dump(normalize(v))


def _to_int32(v: int) -> int:
    """static_cast<int> of an int64/uint64 (the low 32 bits, signed)"""
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= (1 << 31) else v


def _to_int64(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >= (1 << 63) else v


def _double_to_int64(d: float) -> int:
    """(int64_t) of a double on x86-64: truncation, INT64_MIN when out of range"""
    if math.isnan(d) or not (-9.223372036854775808e18 <= d < 9.223372036854775808e18):
        return INT64_MIN
    return int(d)


# -- the schema document (common/json-schema.cpp) -----------------------------------------------------------

ANY, REF, ANY_OF, ALL_OF, CONST, ENUM, NULL, BOOLEAN, NUMBER, INTEGER, STRING, ARRAY, TUPLE, OBJECT = (
    "any", "ref", "anyOf", "allOf", "const", "enum", "null", "boolean", "number", "integer", "string", "array",
    "tuple", "object")
FORMAT_NONE, FORMAT_UUID, FORMAT_DATE, FORMAT_TIME, FORMAT_DATE_TIME = range(5)


@dataclass(eq=False)
class Node:
    kind: str
    children: list = field(default_factory=list)       # anyOf / allOf alternatives, tuple items
    value: Any = None                                   # const value
    values: list = field(default_factory=list)          # enum values
    ref: str = ""                                       # $ref text
    target: "Node | None" = None
    minimum: int = INT64_MIN
    maximum: int = INT64_MAX
    pattern: str = ""
    format: int = FORMAT_NONE
    min_length: int = 0
    max_length: int = -1
    items: "Node | None" = None
    min_items: int = 0
    max_items: int = -1
    properties: list = field(default_factory=list)      # [(name, Node, required)]
    additional: "Node | None" = None

    def may_be_string(self, visited=None) -> bool:
        visited = set() if visited is None else visited
        k = self.kind
        if k == STRING:
            return True
        if k == CONST:
            return isinstance(self.value, str)
        if k == ENUM:
            return any(isinstance(v, str) for v in self.values)
        if k == REF:
            t = self.target
            if t is None or id(t) in visited:
                return False
            visited.add(id(t))
            r = t.may_be_string(visited)
            visited.discard(id(t))
            return r
        if k == ANY_OF:
            return any(c.may_be_string(visited) for c in self.children)
        if k == ALL_OF:
            any_string = False
            for c in self.children:
                if c.kind == ANY:
                    continue
                if not c.may_be_string(visited):
                    return False
                any_string = True
            return any_string
        return False


class _SchemaFail(Exception):
    pass


# The converter walks a schema recursively, as the oracle's does (which crashes on a stack overflow somewhere past
# a few thousand levels; rule names also grow with the depth, so the grammar text grows with its square). bankml
# refuses a schema nested deeper than this, counting every schema inside another (properties, items, anyOf /
# allOf / oneOf alternatives, tuple items, additionalProperties) and every $ref followed: docs/json_schema.md,
# "Depth and size limits".
MAX_SCHEMA_DEPTH = 100
DEPTH_MESSAGE = f"JSON schema nesting deeper than {MAX_SCHEMA_DEPTH} levels is not supported (bankml's limit)"


class _RuntimeSchemaError(SchemaError):
    """a std::runtime_error thrown while converting (json_schema_to_grammar adds its prefix to those)"""


def _fail(path: str, msg: str):
    raise _SchemaFail(f"JSON schema error at {path}: {msg}")


class _Builder:
    def __init__(self, root):
        self.root = root
        self.refs: dict[str, Node | None] = {}
        self.pending: list[Node] = []
        self.depth = 0

    @staticmethod
    def count(schema: dict, key: str, path: str, default: int) -> int:
        if key not in schema:
            return default
        v = schema[key]
        if not is_int(v) or _to_int32(v) < 0:
            _fail(path, key + " must be a non-negative integer")
        return _to_int32(v)

    @staticmethod
    def bound(schema: dict, key: str, path: str, round_up: bool) -> int:
        v = schema[key]
        if is_int(v):
            return _to_int64(v)
        if not is_number(v):
            _fail(path, key + " must be a number")
        d = float(v)
        return _double_to_int64(math.ceil(d) if round_up else math.floor(d)) if math.isfinite(d) else INT64_MIN

    @staticmethod
    def fmt(schema: dict, path: str) -> int:
        if "format" not in schema:
            return FORMAT_NONE
        v = schema["format"]
        if not isinstance(v, str):
            _fail(path, "format must be a string")
        if v == "date":
            return FORMAT_DATE
        if v == "time":
            return FORMAT_TIME
        if v == "date-time":
            return FORMAT_DATE_TIME
        if v == "uuid" or (len(v.encode()) == 5 and v.startswith("uuid") and "1" <= v[4] <= "5"):
            return FORMAT_UUID
        return FORMAT_NONE

    def resolve(self, ref: str, path: str):
        target = self.root
        tokens = ref[1:].split("/")
        for sel in tokens[1:]:
            if isinstance(target, dict) and sel in target:
                target = target[sel]
            elif isinstance(target, list):
                idx = _stoull(sel)
                if idx is None:
                    idx = len(target)
                if idx >= len(target):
                    _fail(path, f"cannot resolve $ref {ref}, {sel} is out of range")
                target = target[idx]
            else:
                _fail(path, f"cannot resolve $ref {ref}, {sel} not found")
        return target

    def build_ref(self, value, path: str) -> Node:
        if not isinstance(value, str):
            _fail(path, "$ref must be a string")
        if not value.startswith("#/"):
            _fail(path, f"unsupported $ref {value}, only references into the same document are supported")
        if value not in self.refs:
            self.refs[value] = None
            self.refs[value] = self.node(self.resolve(value, path), value)
        node = Node(REF, ref=value)
        self.pending.append(node)
        return node

    def alternatives(self, kind: str, alts, path: str) -> Node:
        if not isinstance(alts, list):
            _fail(path, "must be an array of schemas")
        if not alts:
            _fail(path, "must not be empty")
        return Node(kind, children=[self.node(a, f"{path}/{i}") for i, a in enumerate(alts)])

    def obj(self, schema: dict, path: str) -> Node:
        node = Node(OBJECT)
        required = set()
        if isinstance(schema.get("required"), list):
            required = {n for n in schema["required"] if isinstance(n, str)}
        if "properties" in schema:
            props = schema["properties"]
            if not isinstance(props, dict):
                _fail(path, "properties must be an object")
            for name, prop in props.items():
                node.properties.append((name, self.node(prop, f"{path}/properties/{name}"), name in required))
        if "additionalProperties" in schema:
            ap = schema["additionalProperties"]
            if isinstance(ap, bool):
                if ap:
                    node.additional = Node(ANY)
            elif isinstance(ap, dict):
                node.additional = self.node(ap, path + "/additionalProperties")
            else:
                _fail(path, "additionalProperties must be a boolean or a schema")
        elif "properties" not in schema:
            node.additional = Node(ANY)
        return node

    def array(self, schema: dict, path: str) -> Node:
        node = Node(ARRAY)
        if "items" in schema or "prefixItems" in schema:
            key = "items" if "items" in schema else "prefixItems"
            items = schema[key]
            if isinstance(items, list):
                return Node(TUPLE, children=[self.node(it, f"{path}/{key}/{i}") for i, it in enumerate(items)])
            node.items = self.node(items, f"{path}/{key}")
        else:
            node.items = Node(ANY)
        node.min_items = self.count(schema, "minItems", path, 0)
        node.max_items = self.count(schema, "maxItems", path, -1)
        return node

    def string(self, schema: dict, path: str) -> Node:
        node = Node(STRING)
        if "pattern" in schema:
            if not isinstance(schema["pattern"], str):
                _fail(path, "pattern must be a string")
            node.pattern = schema["pattern"]
        node.format = self.fmt(schema, path)
        node.min_length = self.count(schema, "minLength", path, 0)
        node.max_length = self.count(schema, "maxLength", path, -1)
        return node

    def integer(self, schema: dict, path: str) -> Node:
        node = Node(INTEGER)
        if "minimum" in schema:
            node.minimum = self.bound(schema, "minimum", path, True)
        elif "exclusiveMinimum" in schema:
            node.minimum = _to_int64(self.bound(schema, "exclusiveMinimum", path, False) + 1)
        if "maximum" in schema:
            node.maximum = self.bound(schema, "maximum", path, False)
        elif "exclusiveMaximum" in schema:
            node.maximum = _to_int64(self.bound(schema, "exclusiveMaximum", path, True) - 1)
        return node

    def node(self, schema, path: str) -> Node:
        self.depth += 1
        try:
            if self.depth > MAX_SCHEMA_DEPTH:
                raise _SchemaFail(DEPTH_MESSAGE)
            return self._node(schema, path)
        finally:
            self.depth -= 1

    def _node(self, schema, path: str) -> Node:
        if not isinstance(schema, dict):
            _fail(path, "schema must be an object")
        if "$ref" in schema:
            return self.build_ref(schema["$ref"], path)
        if "oneOf" in schema or "anyOf" in schema:
            key = "oneOf" if "oneOf" in schema else "anyOf"
            return self.alternatives(ANY_OF, schema[key], f"{path}/{key}")
        t = schema.get("type")
        if isinstance(t, list):
            if not t:
                _fail(path, "type must not be empty")
            alts = []
            for i, one in enumerate(t):
                alt = dict(schema)
                alt["type"] = one
                alts.append(self.node(alt, f"{path}/type/{i}"))
            return Node(ANY_OF, children=alts)
        if "const" in schema:
            return Node(CONST, value=schema["const"])
        if "enum" in schema:
            vals = schema["enum"]
            if not isinstance(vals, list) or not vals:
                _fail(path, "enum must be a non-empty array")
            return Node(ENUM, values=list(vals))
        if t is not None and not isinstance(t, str):
            _fail(path, "type must be a string or an array of strings")
        name = t if isinstance(t, str) else ""
        ap = schema.get("additionalProperties", True) if "additionalProperties" in schema else True
        has_props = "properties" in schema or ("additionalProperties" in schema and ap is not True)
        if not name:
            if has_props:
                return self.obj(schema, path)
            if "allOf" in schema:
                return self.alternatives(ALL_OF, schema["allOf"], path + "/allOf")
            if "items" in schema or "prefixItems" in schema:
                return self.array(schema, path)
            if ("pattern" in schema or "minLength" in schema or "maxLength" in schema
                    or self.fmt(schema, path) != FORMAT_NONE):
                return self.string(schema, path)
            return Node(ANY)
        if name == "object":
            if not has_props and "allOf" in schema:
                return self.alternatives(ALL_OF, schema["allOf"], path + "/allOf")
            return self.obj(schema, path)
        if name == "string":
            if "allOf" in schema:
                return self.alternatives(ALL_OF, schema["allOf"], path + "/allOf")
            return self.string(schema, path)
        if name == "array":
            return self.array(schema, path)
        if name == "integer":
            return self.integer(schema, path)
        if name == "number":
            return Node(NUMBER)
        if name == "boolean":
            return Node(BOOLEAN)
        if name == "null":
            return Node(NULL)
        _fail(path, "unrecognized type " + name)

    def build(self) -> Node:
        root = self.node(self.root, "#")
        for node in self.pending:
            node.target = self.refs[node.ref]
        return root


def _stoull(s: str) -> int | None:
    """std::stoull: leading spaces, optional sign, digits; None where it throws"""
    m = re.match(r"[ \t\n\v\f\r]*([+-]?)([0-9]+)", s)
    if not m:
        return None
    v = int(m.group(2))
    if v > UINT64_MAX:
        return None
    return (UINT64_MAX + 1 - v) % (UINT64_MAX + 1) if m.group(1) == "-" else v


def build_document(schema) -> Node:
    """common_chat_schema_from_json; raises SchemaError("JSON schema error at ...") like the oracle's
    runtime_error (without the converter's prefix)."""
    try:
        return _Builder(normalize(schema)).build()
    except _SchemaFail as e:
        raise SchemaError(str(e)) from None
    except RecursionError:  # a caller already deep in the stack: the same refusal, never Python's text
        raise SchemaError(DEPTH_MESSAGE) from None


# -- the converter (common/json-schema-to-grammar.cpp) ------------------------------------------------------

SPACE_RULE = '| " " | "\\n"{1,2} [ \\t]{0,20}'

PRIMITIVE_RULES = {
    "boolean": ('("true" | "false")', []),
    "decimal-part": ("[0-9]{1,16}", []),
    "integral-part": ("[0] | [1-9] [0-9]{0,15}", []),
    "number": ('("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)?',
               ["integral-part", "decimal-part"]),
    "integer": ('("-"? integral-part)', ["integral-part"]),
    "value": ("object | array | string | number | boolean | null",
              ["object", "array", "string", "number", "boolean", "null"]),
    "object": ('"{" space ( string ":" space value ("," space string ":" space value)* )? space "}"',
               ["string", "value"]),
    "array": ('"[" space ( value ("," space value)* )? space "]"', ["value"]),
    "uuid": ('"\\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" '
             '[0-9a-fA-F]{12} "\\""', []),
    "char": ('[^"\\\\\\x7F\\x00-\\x1F] | [\\\\] (["\\\\bfnrt] | "u" [0-9a-fA-F]{4})', []),
    "string": ('"\\"" char* "\\""', ["char"]),
    "null": ('"null"', []),
}

STRING_FORMAT_RULES = {
    "date": ('[0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] )', []),
    "time": ('([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ( "Z" | ( "+" | "-" ) '
             '( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] )', []),
    "date-time": ('date "T" time', ["date", "time"]),
    "date-string": ('"\\"" date "\\""', ["date"]),
    "time-string": ('"\\"" time "\\""', ["time"]),
    "date-time-string": ('"\\"" date-time "\\""', ["date-time"]),
}

RESERVED_NAMES = {"root"} | set(PRIMITIVE_RULES) | set(STRING_FORMAT_RULES)

_INVALID_RULE_CHARS = re.compile(r"[^a-zA-Z0-9-]+")
_LITERAL_ESCAPE = re.compile(r'[\r\n"\\]')
_LITERAL_ESCAPES = {"\r": "\\r", "\n": "\\n", '"': '\\"', "-": "\\-", "]": "\\]", "\\": "\\\\"}
NON_LITERAL_SET = set("|.()[]{}*+?^$")
ESCAPED_IN_REGEXPS_BUT_NOT_IN_LITERALS = set("^$.[]()|{}*+?")
MAX_PATTERN_DEPTH = 100


def format_literal(literal: str) -> str:
    """gbnf_format_literal: a GBNF string literal (only CR, LF, quote and backslash are escaped)."""
    return '"' + _LITERAL_ESCAPE.sub(lambda m: _LITERAL_ESCAPES[m.group(0)], literal) + '"'


def build_repetition(item: str, min_items: int, max_items: int, separator: str = "") -> str:
    has_max = max_items != INT_MAX
    if max_items == 0:
        return ""
    if min_items == 0 and max_items == 1:
        return item + "?"
    if not separator:
        if min_items == 1 and not has_max:
            return item + "+"
        if min_items == 0 and not has_max:
            return item + "*"
        return item + "{" + str(min_items) + "," + (str(max_items) if has_max else "") + "}"
    result = item + " " + build_repetition("(" + separator + " " + item + ")", 0 if min_items == 0 else min_items - 1,
                                           max_items - 1 if has_max else max_items)
    if min_items == 0:
        result = "(" + result + ")?"
    return result


def _digit_range(out: list, a: str, b: str) -> None:
    out.append("[")
    out.append(a if a == b else a + "-" + b)
    out.append("]")


def _more_digits(out: list, min_digits: int, max_digits: int) -> None:
    out.append("[0-9]")
    if min_digits == max_digits == 1:
        return
    out.append("{")
    out.append(str(min_digits))
    if max_digits != min_digits:
        out.append(",")
        if max_digits != INT_MAX:
            out.append(str(max_digits))
    out.append("}")


def _uniform_range(out: list, frm: str, to: str) -> None:
    i = 0
    while i < len(frm) and i < len(to) and frm[i] == to[i]:
        i += 1
    if i > 0:
        out.append('"' + frm[:i] + '"')
    if i < len(frm) and i < len(to):
        if i > 0:
            out.append(" ")
        sub_len = len(frm) - i - 1
        if sub_len > 0:
            from_sub, to_sub = frm[i + 1:], to[i + 1:]
            zeros, nines = "0" * sub_len, "9" * sub_len
            to_reached = False
            out.append("(")
            if from_sub == zeros:
                _digit_range(out, frm[i], chr(ord(to[i]) - 1))
                out.append(" ")
                _more_digits(out, sub_len, sub_len)
            else:
                out.append("[" + frm[i] + "] ")
                out.append("(")
                _uniform_range(out, from_sub, nines)
                out.append(")")
                if ord(frm[i]) < ord(to[i]) - 1:
                    out.append(" | ")
                    if to_sub == nines:
                        _digit_range(out, chr(ord(frm[i]) + 1), to[i])
                        to_reached = True
                    else:
                        _digit_range(out, chr(ord(frm[i]) + 1), chr(ord(to[i]) - 1))
                    out.append(" ")
                    _more_digits(out, sub_len, sub_len)
            if not to_reached:
                out.append(" | ")
                _digit_range(out, to[i], to[i])
                out.append(" ")
                _uniform_range(out, zeros, to_sub)
            out.append(")")
        else:
            out.append("[" + frm[i] + "-" + to[i] + "]")


def build_min_max_int(min_value: int, max_value: int, out: list, decimals_left: int = 16,
                      top_level: bool = True) -> None:
    """The integer-range regex of the oracle, appended to `out` (a list of strings)."""
    has_min = min_value != INT64_MIN
    has_max = max_value != INT64_MAX
    if has_min and has_max:
        if min_value < 0 and max_value < 0:
            out.append('"-" (')
            build_min_max_int(-max_value, -min_value, out, decimals_left, True)
            out.append(")")
            return
        if min_value < 0:
            out.append('"-" (')
            build_min_max_int(0, -min_value, out, decimals_left, True)
            out.append(") | ")
            min_value = 0
        min_s, max_s = str(min_value), str(max_value)
        for digits in range(len(min_s), len(max_s)):
            _uniform_range(out, min_s, "9" * digits)
            min_s = "1" + "0" * digits
            out.append(" | ")
        _uniform_range(out, min_s, max_s)
        return
    less_decimals = max(decimals_left - 1, 1)
    if has_min:
        if min_value < 0:
            out.append('"-" (')
            build_min_max_int(INT64_MIN, -min_value, out, decimals_left, False)
            out.append(") | [0] | [1-9] ")
            _more_digits(out, 0, decimals_left - 1)
        elif min_value == 0:
            if top_level:
                out.append("[0] | [1-9] ")
                _more_digits(out, 0, less_decimals)
            else:
                _more_digits(out, 1, decimals_left)
        elif min_value <= 9:
            c = chr(ord("0") + min_value)
            range_start = "1" if top_level else "0"
            if c > range_start:
                _digit_range(out, range_start, chr(ord(c) - 1))
                out.append(" ")
                _more_digits(out, 1, less_decimals)
                out.append(" | ")
            _digit_range(out, c, "9")
            out.append(" ")
            _more_digits(out, 0, less_decimals)
        else:
            min_s = str(min_value)
            length = len(min_s)
            c = min_s[0]
            if c > "1":
                _digit_range(out, "1" if top_level else "0", chr(ord(c) - 1))
                out.append(" ")
                _more_digits(out, length, less_decimals)
                out.append(" | ")
            _digit_range(out, c, c)
            out.append(" (")
            build_min_max_int(int(min_s[1:]), INT64_MAX, out, less_decimals, False)
            out.append(")")
            if c < "9":
                out.append(" | ")
                _digit_range(out, chr(ord(c) + 1), "9")
                out.append(" ")
                _more_digits(out, length - 1, less_decimals)
        return
    if has_max:
        if max_value >= 0:
            if top_level:
                out.append('"-" [1-9] ')
                _more_digits(out, 0, less_decimals)
                out.append(" | ")
            build_min_max_int(0, max_value, out, decimals_left, True)
        else:
            out.append('"-" (')
            build_min_max_int(-max_value, INT64_MAX, out, decimals_left, False)
            out.append(")")
        return
    raise _RuntimeSchemaError("At least one of min_value or max_value must be set")


def _gbnf_escape_length(p: str, pos: int) -> int:
    """length of a GBNF-compatible escape at p[pos] (\\xHH, \\uHHHH, \\UHHHHHHHH, \\t \\r \\n \\\\ \\" \\[ \\] \\-),
    0 if none"""
    if pos + 1 >= len(p) or p[pos] != "\\":
        return 0
    c = p[pos + 1]
    n_hex = {"x": 2, "u": 4, "U": 8}.get(c)
    if n_hex is None:
        return 2 if c in 'trn\\"[]-' else 0
    if pos + 2 + n_hex > len(p):
        return 0
    if not all(h in "0123456789abcdefABCDEF" for h in p[pos + 2:pos + 2 + n_hex]):
        return 0
    return 2 + n_hex


def _stoi(s: str) -> int:
    """std::stoi; ValueError where it throws"""
    m = re.match(r"[ \t\n\v\f\r]*([+-]?[0-9]+)", s)
    if not m:
        raise ValueError(s)
    v = int(m.group(1))
    if not -(2**31) <= v <= INT_MAX:
        raise ValueError(s)
    return v


class _Unsupported(Exception):
    pass


class _Invalid(Exception):
    pass


def _from_bytes(s: str) -> str:
    """latin-1 text of pattern bytes -> UTF-8 text (invalid sequences kept as surrogate escapes)"""
    return s.encode("latin-1").decode("utf-8", "surrogateescape")


def _to_bytes(s: str) -> str:
    return s.encode("utf-8", "surrogateescape").decode("latin-1")


class Converter:
    """common_chat_schema_converter: rules by name, errors, warnings."""

    def __init__(self, dotall: bool = False):
        self.dotall = dotall
        self.rules: dict[str, str] = {"space": SPACE_RULE}
        self.refs_being_resolved: set[str] = set()
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.depth = 0

    def add_rule(self, name: str, rule: str) -> str:
        esc = _INVALID_RULE_CHARS.sub("-", name)
        if esc not in self.rules or self.rules[esc] == rule:
            self.rules[esc] = rule
            return esc
        i = 0
        while f"{esc}{i}" in self.rules and self.rules[f"{esc}{i}"] != rule:
            i += 1
        key = f"{esc}{i}"
        self.rules[key] = rule
        return key

    def add_primitive(self, name: str, rule) -> str:
        content, deps = rule
        n = self.add_rule(name, content)
        for dep in deps:
            dep_rule = PRIMITIVE_RULES.get(dep) or STRING_FORMAT_RULES.get(dep)
            if dep_rule is None:
                self.errors.append(f"Rule {dep} not known")
                continue
            if dep not in self.rules:
                self.add_primitive(dep, dep_rule)
        return n

    def union_rule(self, name: str, alts: list) -> str:
        return " | ".join(self.visit(a, name + ("alternative-" if not name else "-") + str(i))
                          for i, a in enumerate(alts))

    def visit_pattern(self, pattern: str, name: str) -> str:
        snapshot = dict(self.rules)
        try:
            return self.pattern_to_rule(pattern, name)
        except _Unsupported as e:
            self.rules = snapshot
            self.warnings.append(f"pattern {pattern} is not supported ({e}), accepting any string")
            return self.add_rule(name, self.add_primitive("string", PRIMITIVE_RULES["string"]))
        except _Invalid as e:
            self.rules = snapshot
            self.errors.append(f"Invalid pattern {pattern}: {e}")
            return ""

    def pattern_to_rule(self, pattern: str, name: str) -> str:
        # the oracle reads the pattern byte by byte (a multi-byte character can be split between literals),
        # so it is read here as bytes too: one latin-1 character a byte, turned back into UTF-8 text (invalid
        # bytes as surrogate escapes) wherever a rule is stored
        raw = pattern.encode("utf-8", "surrogateescape").decode("latin-1")
        if len(raw) < 2 or raw[0] != "^" or raw[-1] != "$":
            raise _Unsupported("not anchored with '^' and '$'")
        sub = raw[1:-1]
        sub_rule_ids: dict[str, str] = {}
        n = len(sub)
        st = {"i": 0, "depth": 0}

        def to_rule(ls) -> str:
            s, is_literal = ls
            return '"' + s + '"' if is_literal else s

        def get_dot() -> str:
            rule = "[\\U00000000-\\U0010FFFF]" if self.dotall else "[^\\x0A\\x0D]"
            return self.add_rule("dot", rule)

        def add(rule_name: str, rule: str) -> str:
            return self.add_rule(rule_name, _from_bytes(rule))

        def transform():
            seq: list[list] = []

            def join_seq():
                ret = []
                literal = ""
                for s, is_lit in seq:
                    if is_lit:
                        literal += s
                    else:
                        if literal:
                            ret.append((literal, True))
                            literal = ""
                        ret.append((s, False))
                if literal:
                    ret.append((literal, True))
                return " ".join(to_rule(x) for x in ret), False

            while st["i"] < n:
                i = st["i"]
                c = sub[i]
                if c == ".":
                    seq.append([get_dot(), False])
                    st["i"] += 1
                elif c == "(":
                    st["i"] += 1
                    if st["i"] < n and sub[st["i"]] == "?":
                        if st["i"] + 1 < n and sub[st["i"] + 1] == ":":
                            st["i"] += 2
                        else:
                            raise _Unsupported("unsupported group syntax")
                    st["depth"] += 1
                    if st["depth"] > MAX_PATTERN_DEPTH:
                        raise _Unsupported("pattern nesting too deep")
                    seq.append(["(" + to_rule(transform()) + ")", False])
                elif c == ")":
                    st["i"] += 1
                    if st["depth"] == 0:
                        raise _Invalid("unbalanced parentheses")
                    st["depth"] -= 1
                    return join_seq()
                elif c in "^$":
                    raise _Unsupported("anchor inside the pattern")
                elif c == "[":
                    sq = c
                    st["i"] += 1
                    while st["i"] < n and sub[st["i"]] != "]":
                        if sub[st["i"]] == "\\":
                            el = _gbnf_escape_length(sub, st["i"])
                            if el == 0:
                                raise _Unsupported("unsupported escape in character class: " + sub[st["i"]:st["i"] + 2])
                            sq += sub[st["i"]:st["i"] + el]
                            st["i"] += el
                        else:
                            sq += sub[st["i"]]
                            st["i"] += 1
                    if st["i"] >= n:
                        raise _Invalid("unterminated character class")
                    sq += "]"
                    st["i"] += 1
                    seq.append([sq, False])
                elif c == "|":
                    seq.append(["|", False])
                    st["i"] += 1
                elif c in "*+?":
                    if not seq:
                        raise _Invalid("nothing to repeat")
                    seq[-1] = [to_rule(seq[-1]) + c, False]
                    st["i"] += 1
                elif c == "{":
                    curly = c
                    st["i"] += 1
                    while st["i"] < n and sub[st["i"]] != "}":
                        curly += sub[st["i"]]
                        st["i"] += 1
                    if st["i"] >= n:
                        raise _Unsupported("unterminated curly brackets")
                    curly += "}"
                    st["i"] += 1
                    nums = curly[1:-1].split(",")
                    min_times, max_times = 0, INT_MAX
                    if len(nums) not in (1, 2):
                        raise _Unsupported("wrong number of values in curly brackets")
                    try:
                        if len(nums) == 1:
                            min_times = max_times = _stoi(nums[0])
                        else:
                            if nums[0]:
                                min_times = _stoi(nums[0])
                            if nums[1]:
                                max_times = _stoi(nums[1])
                    except ValueError:
                        raise _Unsupported("invalid number in curly brackets") from None
                    if not seq:
                        raise _Invalid("nothing to repeat")
                    sub_s, sub_is_literal = seq[-1]
                    if not sub_is_literal:
                        if sub_s not in sub_rule_ids:
                            sub_rule_ids[sub_s] = ""
                        if not sub_rule_ids[sub_s]:
                            sub_rule_ids[sub_s] = _to_bytes(add(f"{name}-{len(sub_rule_ids)}", sub_s))
                        sub_s = sub_rule_ids[sub_s]
                    seq[-1] = [build_repetition('"' + sub_s + '"' if sub_is_literal else sub_s, min_times,
                                                max_times, ""), False]
                else:
                    literal = ""
                    while st["i"] < n:
                        j = st["i"]
                        if sub[j] == "\\":
                            if j == n - 1:
                                raise _Invalid("trailing backslash")
                            nxt = sub[j + 1]
                            if nxt in ESCAPED_IN_REGEXPS_BUT_NOT_IN_LITERALS:
                                literal += nxt
                                st["i"] += 2
                            else:
                                el = _gbnf_escape_length(sub, j)
                                if el == 0:
                                    raise _Unsupported("unsupported escape: " + sub[j:j + 2])
                                literal += sub[j:j + el]
                                st["i"] += el
                        elif sub[j] == '"':
                            literal += '\\"'
                            st["i"] += 1
                        elif sub[j] not in NON_LITERAL_SET and (j == n - 1 or not literal or sub[j + 1] == "."
                                                                or sub[j + 1] not in NON_LITERAL_SET):
                            literal += sub[j]
                            st["i"] += 1
                        else:
                            break
                    if not literal:
                        raise _Unsupported("unsupported character: " + c)
                    seq.append([literal, True])
            return join_seq()

        rule = to_rule(transform())
        if st["depth"] != 0:
            raise _Invalid("unbalanced parentheses")
        return add(name, '"\\"" (' + rule + ') "\\""')

    def not_strings(self, strings: list[str]) -> str:
        # a trie of the names, children in code point order
        nodes = [{"children": {}, "end": False}]
        for w in strings:
            cur = 0
            for ch in _codepoints(w):
                nxt = nodes[cur]["children"].get(ch)
                if nxt is None:
                    nodes.append({"children": {}, "end": False})
                    nxt = len(nodes) - 1
                    nodes[cur]["children"][ch] = nxt
                cur = nxt
            nodes[cur]["end"] = True
        char_rule = self.add_primitive("char", PRIMITIVE_RULES["char"])
        out = ['["] ( ']
        # the oracle's recursive visit of the trie, on an explicit stack: (node, its sorted children, next child)
        frames = [(0, sorted(nodes[0]["children"]), [0])]
        while frames:
            idx, kids, at = frames[-1]
            if at[0] < len(kids):
                cpt = kids[at[0]]
                child = nodes[idx]["children"][cpt]
                if at[0]:
                    out.append(" | ")
                at[0] += 1
                out.append("[" + chr(cpt) + "]")
                if nodes[child]["children"]:
                    out.append(" (")
                    frames.append((child, sorted(nodes[child]["children"]), [0]))
                else:
                    out.append(" " + char_rule + "+")
                continue
            if kids:
                out.append(' | [^"' + "".join(chr(k) for k in kids) + "] " + char_rule + "*")
            frames.pop()
            if frames:
                out.append(")")
        out.append(" )")
        if not nodes[0]["end"]:
            out.append("?")
        out.append(' ["]')
        return "".join(out)

    def resolve_ref(self, node: Node) -> str:
        ref = node.ref
        frag = ref[ref.index("#") + 1:] if "#" in ref else ref
        ref_name = "ref" + _INVALID_RULE_CHARS.sub("-", frag)
        if ref_name not in self.rules and ref not in self.refs_being_resolved:
            if node.target is None:
                self.errors.append("Unresolved $ref " + ref)
                return ""
            self.refs_being_resolved.add(ref)
            ref_name = self.visit(node.target, ref_name)
            self.refs_being_resolved.discard(ref)
        return ref_name

    def object_rule(self, properties: list, required: set, name: str, additional: Node | None) -> str:
        required_props: list[str] = []
        optional_props: list[str] = []
        kv_names: dict[str, str] = {}
        prop_names: list[str] = []
        sep = "" if not name else "-"
        for prop_name, prop_schema in properties:
            prop_rule = self.visit(prop_schema, name + sep + prop_name)
            kv_names[prop_name] = self.add_rule(name + sep + prop_name + "-kv",
                                                format_literal(dump(prop_name)) + ' space ":" space ' + prop_rule)
            (required_props if prop_name in required else optional_props).append(prop_name)
            prop_names.append(prop_name)
        if additional is not None:
            sub_name = name + sep + "additional"
            value_rule = (self.visit(additional, sub_name + "-value") if additional.kind != ANY
                          else self.add_primitive("value", PRIMITIVE_RULES["value"]))
            key_rule = (self.add_primitive("string", PRIMITIVE_RULES["string"]) if not prop_names
                        else self.add_rule(sub_name + "-k", self.not_strings(prop_names)))
            kv_names["*"] = self.add_rule(sub_name + "-kv", key_rule + ' ":" space ' + value_rule)
            optional_props.append("*")
        if not required_props and not optional_props:
            return '"{" space "}"'
        rule = '"{" space '
        rule += ' "," space '.join(kv_names[p] for p in required_props)
        if optional_props:
            rule += " ("
            if required_props:
                rule += ' "," space ( '

            # The oracle's get_recursive_refs, computed once per position instead of once per alternate: the
            # rule after optional property j ("<name>-<k_j>-rest") depends on j only, and the oracle's first
            # alternate adds these rules from the last one back (the later alternates add them again, which
            # changes nothing: add_rule is idempotent). Same rules, same order, linear time, no recursion.
            n_opt = len(optional_props)

            def comma_ref(k: str) -> str:
                return '( "," space ' + kv_names[k] + " )"

            rest_refs = [""] * n_opt
            for j in range(n_opt - 2, -1, -1):
                nxt = optional_props[j + 1]
                content = comma_ref(nxt) + ("*" if nxt == "*" else "?")
                if j + 1 < n_opt - 1:
                    content += " " + rest_refs[j + 1]
                rest_refs[j] = self.add_rule(name + sep + optional_props[j] + "-rest", content)
            alts = []
            for i, k in enumerate(optional_props):
                alt = kv_names[k] + (" " + comma_ref(k) + "*" if k == "*" else "")
                if i < n_opt - 1:
                    alt += " " + rest_refs[i]
                alts.append(alt)
            rule += " | ".join(alts)
            if required_props:
                rule += " )"
            rule += " )?"
        rule += ' space "}"'
        return rule

    def visit_primitive(self, rule_name: str, type_name: str) -> str:
        return self.add_primitive("root" if rule_name == "root" else type_name, PRIMITIVE_RULES[type_name])

    def visit_all_of(self, node: Node, name: str, rule_name: str) -> str:
        required: set[str] = set()
        properties: list = []
        enum_values: dict[str, int] = {}

        def add_component(comp: Node, is_required: bool) -> None:
            if comp.kind == REF:
                if comp.target is not None:
                    add_component(comp.target, is_required)
            elif comp.kind == OBJECT:
                for pname, pschema, _ in comp.properties:
                    properties.append((pname, pschema))
                    if is_required:
                        required.add(pname)
            elif comp.kind == ENUM:
                for v in comp.values:
                    key = format_literal(dump(v))
                    enum_values[key] = enum_values.get(key, 0) + 1

        for child in node.children:
            if child.kind == ANY_OF:
                for alt in child.children:
                    add_component(alt, False)
            else:
                add_component(child, True)
        if enum_values:
            inter = [k for k in sorted(enum_values, key=_cpp_key) if enum_values[k] == len(node.children)]
            if inter:
                return self.add_rule(rule_name, "(" + " | ".join(inter) + ")")
        return self.add_rule(rule_name, self.object_rule(properties, required, name, None))

    def visit(self, node: Node, name: str) -> str:
        self.depth += 1
        try:
            if self.depth > MAX_SCHEMA_DEPTH:
                raise _RuntimeSchemaError(DEPTH_MESSAGE)
            return self._visit(node, name)
        except RecursionError:
            raise _RuntimeSchemaError(DEPTH_MESSAGE) from None
        finally:
            self.depth -= 1

    def _visit(self, node: Node, name: str) -> str:
        rule_name = name + "-" if name in RESERVED_NAMES else (name or "root")
        sub_name = name + ("-" if name else "")
        k = node.kind
        if k == REF:
            return self.add_rule(rule_name, self.resolve_ref(node))
        if k == ANY_OF:
            return self.add_rule(rule_name, self.union_rule(name, node.children))
        if k == ALL_OF:
            return self.visit_all_of(node, name, rule_name)
        if k == CONST:
            return self.add_rule(rule_name, format_literal(dump(node.value)))
        if k == ENUM:
            return self.add_rule(rule_name, "(" + " | ".join(format_literal(dump(v)) for v in node.values) + ")")
        if k == OBJECT:
            if not node.properties and node.additional is not None and node.additional.kind == ANY:
                return self.add_rule(rule_name, self.add_primitive("object", PRIMITIVE_RULES["object"]))
            props = [(n, s) for n, s, _ in node.properties]
            required = {n for n, _, r in node.properties if r}
            return self.add_rule(rule_name, self.object_rule(props, required, name, node.additional))
        if k == TUPLE:
            rule = '"[" space '
            rule += ' "," space '.join(self.visit(it, f"{sub_name}tuple-{i}") for i, it in enumerate(node.children))
            rule += ' space "]"'
            return self.add_rule(rule_name, rule)
        if k == ARRAY:
            if node.items.kind == ANY and node.min_items == 0 and node.max_items < 0:
                return self.visit_primitive(rule_name, "array")
            item = self.visit(node.items, sub_name + "item")
            max_items = INT_MAX if node.max_items < 0 else node.max_items
            return self.add_rule(rule_name, '"[" space ' + build_repetition(item, node.min_items, max_items,
                                                                            '"," space') + ' space "]"')
        if k == STRING:
            if node.pattern:
                return self.visit_pattern(node.pattern, rule_name)
            if node.format == FORMAT_UUID:
                return self.visit_primitive(rule_name, "uuid")
            if node.format != FORMAT_NONE:
                prim = {FORMAT_DATE: "date", FORMAT_TIME: "time"}.get(node.format, "date-time") + "-string"
                return self.add_rule(rule_name, self.add_primitive(prim, STRING_FORMAT_RULES[prim]))
            if node.min_length > 0 or node.max_length >= 0:
                char_rule = self.add_primitive("char", PRIMITIVE_RULES["char"])
                max_len = INT_MAX if node.max_length < 0 else node.max_length
                return self.add_rule(rule_name, '"\\"" ' + build_repetition(char_rule, node.min_length, max_len)
                                     + ' "\\""')
            return self.visit_primitive(rule_name, "string")
        if k == INTEGER:
            if node.minimum == INT64_MIN and node.maximum == INT64_MAX:
                return self.visit_primitive(rule_name, "integer")
            out = ["("]
            build_min_max_int(node.minimum, node.maximum, out)
            out.append(")")
            return self.add_rule(rule_name, "".join(out))
        if k == NUMBER:
            return self.visit_primitive(rule_name, "number")
        if k == BOOLEAN:
            return self.visit_primitive(rule_name, "boolean")
        if k == NULL:
            return self.visit_primitive(rule_name, "null")
        return self.add_rule(rule_name, self.add_primitive("value", PRIMITIVE_RULES["value"]))

    def check_errors(self) -> None:
        if self.errors:
            raise SchemaError("JSON schema conversion failed:\n" + "\n".join(self.errors))

    def format_grammar(self) -> str:
        return "".join(f"{k} ::= {v}\n" for k, v in sorted(self.rules.items(), key=lambda kv: _cpp_key(kv[0])))


def _cpp_key(s: str) -> bytes:
    """std::string ordering: bytes"""
    return s.encode("utf-8", "surrogatepass")


def _codepoints(s: str) -> list[int]:
    """common_trie::insert: code points until the first that does not decode (a valid str decodes fully)"""
    return [ord(c) for c in s]


def to_gbnf(schema) -> str:
    """json_schema_to_grammar(schema) of b11192 (GBNF mode). Raises SchemaError with the oracle's message."""
    doc = build_document_for_converter(schema)
    conv = Converter(False)
    try:
        conv.visit(doc, "")
    except _RuntimeSchemaError as e:
        raise SchemaError("JSON schema conversion failed:\n" + e.message) from None
    conv.check_errors()
    return conv.format_grammar()


def build_document_for_converter(schema) -> Node:
    """The document as json_schema_to_grammar(json) builds it: a refusal is reported with the converter's
    prefix ("JSON schema conversion failed:\\n" + "JSON schema error at ...")."""
    try:
        return build_document(schema)
    except SchemaError as e:
        raise SchemaError("JSON schema conversion failed:\n" + e.message) from None


def build_grammar(fn: Callable[["GrammarBuilder"], None], dotall: bool = False) -> str:
    """The oracle's build_grammar: `fn` adds rules and schemas through a builder; errors as in to_gbnf."""
    conv = Converter(dotall)
    fn(GrammarBuilder(conv))
    conv.check_errors()
    return conv.format_grammar()


class GrammarBuilder:
    """common_grammar_builder: add_rule(name, rule) -> name; add_schema(name, node) -> rule name."""

    def __init__(self, conv: Converter):
        self.conv = conv

    def add_rule(self, name: str, rule: str) -> str:
        return self.conv.add_rule(name, rule)

    def add_schema(self, name: str, node: Node) -> str:
        return self.conv.visit(node, "" if name == "root" else name)
