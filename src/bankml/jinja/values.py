"""Values of llama.cpp b11192's Jinja runtime (common/jinja/value.{h,cpp}, string.{h,cpp}), re-derived.

Every value is an object (never a bare Python int or bytes) because the capability probe of chat.cpp watches
which input values a template touches (`used`, `ops`), as the reference's `stats` do.

Strings are lists of byte parts: the reference keeps the pieces of a concatenation apart, and `capitalize` and
`title` work on each piece on its own ("hello " ~ "world" | title is "Hello World" either way, but
("ab" ~ "cd") | capitalize is "AbCd"). Everything is bytes: `length` counts bytes, `s[i]` is one byte, case
changes touch ASCII letters only, `strip()` removes C isspace() bytes.
"""

from __future__ import annotations

import math

from .errors import TemplateRuntimeError

I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1


def fail(msg: bytes) -> TemplateRuntimeError:
    return TemplateRuntimeError(msg)


def to_i64(x: float) -> int:
    """static_cast<int64_t>(double) as x86-64 computes it (cvttsd2si: NaN and out of range give INT64_MIN)."""
    if x != x or x >= 9223372036854775808.0 or x < -9223372036854775808.0:
        return I64_MIN
    return int(x)


def wrap_i64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= (1 << 63) else v


def cpp_to_string_double(x: float) -> bytes:
    """std::to_string(double): printf("%f")."""
    if math.isnan(x):
        return b"-nan" if math.copysign(1.0, x) < 0 else b"nan"
    if math.isinf(x):
        return b"-inf" if x < 0 else b"inf"
    return b"%f" % x


def cpp_stream_double(x: float) -> bytes:
    """`std::ostream << double` with default flags: printf("%g")."""
    if math.isnan(x):
        return b"-nan" if math.copysign(1.0, x) < 0 else b"nan"
    if math.isinf(x):
        return b"-inf" if x < 0 else b"inf"
    return b"%g" % x


_SPACE = b" \t\n\v\f\r"


# ---------------------------------------------------------------------------------------------------------------
# strings made of parts

class JStr:
    """The reference's jinja::string: a sequence of parts (bytes). Immutable here: operations return new ones."""

    __slots__ = ("parts",)

    def __init__(self, parts=()):
        self.parts = tuple(parts)

    @staticmethod
    def of(b: bytes) -> "JStr":
        return JStr((b,))

    def str(self) -> bytes:
        return self.parts[0] if len(self.parts) == 1 else b"".join(self.parts)

    def length(self) -> int:
        return sum(len(p) for p in self.parts)

    def append(self, other: "JStr") -> "JStr":
        return JStr(self.parts + other.parts)

    def upper(self) -> "JStr":
        return JStr(p.upper() for p in self.parts)

    def lower(self) -> "JStr":
        return JStr(p.lower() for p in self.parts)

    def capitalize(self) -> "JStr":
        return JStr((p[:1].upper() + p[1:].lower()) if p else p for p in self.parts)

    def title(self) -> "JStr":
        out = []
        for p in self.parts:
            b = bytearray(p)
            nxt = True
            for i, c in enumerate(b):
                if c in _SPACE:
                    nxt = True
                elif nxt:
                    b[i] = ord(bytes([c]).upper())
                    nxt = False
                else:
                    b[i] = ord(bytes([c]).lower())
            out.append(bytes(b))
        return JStr(out)

    def strip(self, left: bool, right: bool, chars: bytes | None = None) -> "JStr":
        chars = _SPACE if chars is None else chars
        parts = list(self.parts)
        if not parts:
            return self
        if left:
            while parts:
                parts[0] = parts[0].lstrip(chars) if chars else parts[0]
                if parts[0]:
                    break
                parts.pop(0)
        if right:
            while parts:
                parts[-1] = parts[-1].rstrip(chars) if chars else parts[-1]
                if parts[-1]:
                    break
                parts.pop()
        return JStr(parts)

    def is_lower(self) -> bool:
        return not any(65 <= c <= 90 for p in self.parts for c in p)

    def is_upper(self) -> bool:
        return not any(97 <= c <= 122 for p in self.parts for c in p)


EMPTY = JStr()


# ---------------------------------------------------------------------------------------------------------------
# values

def mangled(cls_name: str) -> bytes:
    """typeid(std::shared_ptr<jinja::X>).name() as GCC spells it, for ensure_val's message."""
    return b"St10shared_ptrIN5jinja%d%sEE" % (len(cls_name), cls_name.encode())


class Value:
    __slots__ = ("used", "ops")
    cpp_name = "value_t"

    def __init__(self):
        self.used = False
        self.ops = None

    # stats
    def add_op(self, name: str) -> None:
        if self.ops is None:
            self.ops = set()
        self.ops.add(name)

    def has_op(self, name: str) -> bool:
        return self.ops is not None and name in self.ops

    def type(self) -> bytes:
        return b""

    def _err(self, what: bytes):
        return fail(self.type() + b" " + what)

    def as_int(self) -> int:
        raise self._err(b"is not an int value")

    def as_float(self) -> float:
        raise self._err(b"is not a float value")

    def as_string(self) -> JStr:
        raise self._err(b"is not a string value")

    def as_bool(self) -> bool:
        raise self._err(b"is not a bool value")

    def as_array(self) -> list:
        raise self._err(b"is not an array value")

    def as_ordered_object(self) -> list:
        raise self._err(b"is not an object value")

    def builtins(self) -> dict:
        raise self._err(b"has no builtins")

    def is_none(self) -> bool:
        return False

    def is_undefined(self) -> bool:
        return False

    def is_numeric(self) -> bool:
        return False

    def is_hashable(self) -> bool:
        return False

    def is_immutable(self) -> bool:
        return True

    def equivalent(self, other: "Value") -> bool:
        raise NotImplementedError

    def as_repr(self) -> bytes:
        return self.as_string().str()

    # the key this value has in an object's hash map (only asked of hashable values)
    def hkey(self):
        raise NotImplementedError


class VInt(Value):
    __slots__ = ("v", "f")
    cpp_name = "value_int_t"

    def __init__(self, v: int):
        self.used = False
        self.ops = None
        self.v = v
        if -9007199254740992 <= v <= 9007199254740992:
            self.f = float(v)
        else:
            f = float(v)
            if to_i64(f) != v or f >= 9223372036854775808.0:
                f = -math.inf if v < 0 else math.inf
            self.f = f

    def type(self): return b"Integer"
    def as_int(self): return self.v
    def as_float(self): return self.f
    def as_string(self): return JStr.of(b"%d" % self.v)
    def as_bool(self): return self.v != 0
    def builtins(self): return BUILTINS_INT
    def is_numeric(self): return True
    def is_hashable(self): return True
    def equivalent(self, o): return o.is_numeric() and self.v == _ival(o) and self.f == _fval(o)
    def hkey(self): return ("n", self.v, self.f)


class VFloat(Value):
    __slots__ = ("f", "v")
    cpp_name = "value_float_t"

    def __init__(self, f: float):
        super().__init__()
        self.f = f
        self.v = to_i64(f) if math.isfinite(f) else 0

    def type(self): return b"Float"
    def as_int(self): return self.v
    def as_float(self): return self.f

    def as_string(self):
        out = cpp_to_string_double(self.f)
        out = out.rstrip(b"0")
        if out.endswith(b"."):
            out += b"0"
        return JStr.of(out)

    def as_bool(self): return self.f != 0.0
    def builtins(self): return BUILTINS_FLOAT
    def is_numeric(self): return True
    def is_hashable(self): return True
    def equivalent(self, o): return o.is_numeric() and self.v == _ival(o) and self.f == _fval(o)

    def hkey(self):
        if float(self.v) == self.f:
            return VInt(self.v).hkey()
        return ("n", self.v, self.f)


class VBool(Value):
    __slots__ = ("b",)
    cpp_name = "value_bool_t"

    def __init__(self, b: bool):
        super().__init__()
        self.b = bool(b)

    def type(self): return b"Boolean"
    def as_int(self): return int(self.b)
    def as_bool(self): return self.b
    def as_string(self): return JStr.of(b"True" if self.b else b"False")
    def builtins(self): return BUILTINS_BOOL
    def is_numeric(self): return True
    def is_hashable(self): return True
    def equivalent(self, o): return o.is_numeric() and int(self.b) == _ival(o) and float(self.b) == _fval(o)
    def hkey(self): return VInt(int(self.b)).hkey()


def _ival(v: Value) -> int:
    return v.v if isinstance(v, (VInt, VFloat)) else int(v.b)


def _fval(v: Value) -> float:
    return v.f if isinstance(v, (VInt, VFloat)) else float(v.b)


class VStr(Value):
    __slots__ = ("s",)
    cpp_name = "value_string_t"

    def __init__(self, s: JStr | bytes = EMPTY):
        super().__init__()
        self.s = JStr.of(s) if isinstance(s, bytes) else s

    def type(self): return b"String"
    def as_string(self): return self.s
    def as_bool(self): return self.s.length() > 0
    def builtins(self): return BUILTINS_STRING
    def is_hashable(self): return True
    def equivalent(self, o): return isinstance(o, VStr) and self.s.str() == o.s.str()
    def hkey(self): return ("s", self.s.str())

    def as_repr(self):
        return b"".join(b"TMPL:  " + p + b"\n" for p in self.s.parts)


class VArray(Value):
    __slots__ = ("items",)
    cpp_name = "value_array_t"

    def __init__(self, items=None):
        super().__init__()
        self.items = [] if items is None else list(items)

    def type(self): return b"Array"
    def is_immutable(self): return False
    def as_array(self): return self.items
    def as_bool(self): return bool(self.items)
    def builtins(self): return BUILTINS_ARRAY

    def push(self, v: Value) -> None:
        if self.is_immutable():
            raise fail(b"Attempting to modify immutable type")
        self.items.append(v)

    def pop_at(self, index: int) -> Value:
        if self.is_immutable():
            raise fail(b"Attempting to modify immutable type")
        n = len(self.items)
        if index < 0:
            index = n + index
        if index < 0 or index >= n:
            raise fail(b"Index %d out of bounds for array of size %d" % (index, n))
        return self.items.pop(index)

    def at(self, index: int, default: Value | None = None) -> Value:
        n = len(self.items)
        i = index + n if index < 0 else index
        if i < 0 or i >= n:
            if default is not None:
                return default
            raise fail(b"Index %d out of bounds for array of size %d" % (i, n))
        return self.items[i]

    def as_string(self):
        imm = self.is_immutable()
        out = [b"(" if imm else b"["]
        for i, v in enumerate(self.items):
            if i:
                out.append(b", ")
            out.append(string_repr(v))
        if imm and len(self.items) == 1:
            out.append(b",")
        out.append(b")" if imm else b"]")
        return JStr.of(b"".join(out))

    def is_hashable(self):
        return all(v.is_immutable() and v.is_hashable() for v in self.items)

    def equivalent(self, o):
        return (type(o) is type(self) and self.is_hashable() and o.is_hashable() and len(self.items) == len(o.items)
                and all(a.equivalent(b) for a, b in zip(self.items, o.items)))

    def hkey(self):
        return ("a" if not self.is_immutable() else "t", tuple(v.hkey() for v in self.items))


class VTuple(VArray):
    __slots__ = ()
    cpp_name = "value_tuple_t"

    def type(self): return b"Tuple"
    def is_immutable(self): return True


class VObject(Value):
    """An ordered object; `d` maps each key's hash key to [key value, value] in insertion order."""

    __slots__ = ("d", "has_builtins")
    cpp_name = "value_object_t"

    def __init__(self, has_builtins: bool = True):
        super().__init__()
        self.d = {}
        self.has_builtins = has_builtins

    def type(self): return b"Object"
    def is_immutable(self): return False
    def as_bool(self): return bool(self.d)
    def as_ordered_object(self): return [(k, v) for k, v in self.d.values()]

    def builtins(self):
        return BUILTINS_OBJECT if self.has_builtins else {}

    def _key(self, key: Value):
        if not key.is_immutable() or not key.is_hashable():
            raise fail(b"Object key of unhashable type: " + key.type())
        return key.hkey()

    def has_key(self, key: Value) -> bool:
        return self._key(key) in self.d

    def insert(self, key: Value, val: Value) -> None:
        k = self._key(key)
        if k in self.d:
            self.d[k][1] = val
        else:
            self.d[k] = [key, val]

    def set(self, name: bytes, val: Value) -> None:
        k = ("s", name)
        e = self.d.get(k)
        if e is not None:
            e[1] = val
        else:
            self.d[k] = [VStr(name), val]

    def at(self, key: Value, default: Value | None = None) -> Value:
        k = self._key(key)
        if k not in self.d:
            if default is not None:
                return default
            raise fail(b"Key '" + key.as_string().str() + b"' not found in value of type " + self.type())
        return self.d[k][1]

    def get(self, name: bytes) -> Value | None:
        e = self.d.get(("s", name))
        return e[1] if e else None

    def as_string(self):
        out = [b"{"]
        for i, (k, v) in enumerate(self.d.values()):
            if i:
                out.append(b", ")
            out.append(string_repr(k) + b": " + string_repr(v))
        out.append(b"}")
        return JStr.of(b"".join(out))

    def is_hashable(self):
        return all(v.is_immutable() and v.is_hashable() for _, v in self.d.values())

    def equivalent(self, o):
        if type(o) is not type(self) or not self.is_hashable() or not o.is_hashable() or len(self.d) != len(o.d):
            return False
        return all(a[0].equivalent(b[0]) and a[1].equivalent(b[1]) for a, b in zip(self.d.values(), o.d.values()))

    def copy(self) -> "VObject":
        out = VObject()
        for k, e in self.d.items():
            out.d[k] = [e[0], e[1]]
        return out


class VNone(Value):
    __slots__ = ()
    cpp_name = "value_none_t"

    def type(self): return b"None"
    def is_none(self): return True
    def as_bool(self): return False
    def as_string(self): return JStr.of(b"None")
    def as_repr(self): return b"None"
    def builtins(self): return BUILTINS_NONE
    def is_hashable(self): return True
    def equivalent(self, o): return isinstance(o, VNone)
    def hkey(self): return ("none",)


class VUndefined(Value):
    __slots__ = ("hint",)
    cpp_name = "value_undefined_t"

    def __init__(self, hint: bytes = b""):
        super().__init__()
        self.hint = hint

    def type(self):
        return b"Undefined (hint: '" + self.hint + b"')" if self.hint else b"Undefined"

    def is_undefined(self): return True
    def as_bool(self): return False
    def as_repr(self): return self.type()
    def builtins(self): return BUILTINS_UNDEFINED
    def equivalent(self, o): return o.is_undefined()


class VFunc(Value):
    __slots__ = ("name", "fn", "this")
    cpp_name = "value_func_t"

    def __init__(self, name: bytes, fn, this: Value | None = None):
        super().__init__()
        self.name = name
        self.fn = fn
        self.this = this

    def type(self): return b"Function"

    def as_repr(self):
        return b"Function<" + self.name + b">(" + (self.this.as_repr() if self.this is not None else b"") + b")"

    def invoke(self, args: "Args") -> Value:
        a = Args(args.ctx, list(args.args))
        a.func_name = self.name
        if self.this is not None:
            a.args.insert(0, self.this)
        return self.fn(a)

    def equivalent(self, o):
        # the reference compares std::function targets as function pointers, which are null for every stored
        # handler: any two functions are "equal"
        return isinstance(o, VFunc)


class VKwarg(Value):
    __slots__ = ("key", "val")
    cpp_name = "value_kwarg_t"

    def __init__(self, key: bytes, val: Value):
        super().__init__()
        self.key = key
        self.val = val

    def type(self): return b"KwArg"
    def as_repr(self): return b"KwArg"
    def is_hashable(self): return True
    def equivalent(self, o): return isinstance(o, VKwarg) and o.key == self.key and o.val is self.val
    def hkey(self): return ("kw", self.key, id(self.val))


def equal(a: Value, b: Value) -> bool:
    """`a == b` in a template (the reference's operator==, 'equivalent')."""
    return a.equivalent(b)


def string_repr(v: Value) -> bytes:
    """value_to_string_repr: how items print inside a list's or object's string form."""
    if isinstance(v, VStr):
        s = v.s.str()
        if b"'" in s:
            return to_json(v)
        return b"'" + s + b"'"
    return v.as_repr()


def mark_used(v: Value, deep: bool = False) -> None:
    v.used = True
    if deep:
        if isinstance(v, VArray):
            for item in v.items:
                mark_used(item, True)
        elif isinstance(v, VObject):
            for k, item in v.d.values():
                mark_used(k, True)
                mark_used(item, True)


# ---------------------------------------------------------------------------------------------------------------
# JSON in and out

def from_json(j) -> Value:
    """A value from a decoded JSON document (dict / list / str / int / float / bool / None)."""
    if j is None:
        return VNone()
    if j is True or j is False:
        return VBool(j)
    if isinstance(j, int):
        if j > I64_MAX:
            return VInt(wrap_i64(j)) if j < (1 << 64) else VFloat(float(j))
        return VInt(j) if j >= I64_MIN else VFloat(float(j))
    if isinstance(j, float):
        return VFloat(j)
    if isinstance(j, str):
        return VStr(j.encode("utf-8", "surrogatepass"))
    if isinstance(j, bytes):
        return VStr(j)
    if isinstance(j, (list, tuple)):
        return VArray(from_json(x) for x in j)
    if isinstance(j, dict):
        out = VObject()
        for k, v in j.items():
            out.set(k.encode("utf-8", "surrogatepass") if isinstance(k, str) else k, from_json(v))
        return out
    if isinstance(j, Value):
        return j
    raise TypeError(f"not a JSON value: {type(j).__name__}")


def _json_string(s: bytes) -> bytes:
    out = bytearray(b'"')
    for c in s:
        if c == 34:
            out += b'\\"'
        elif c == 92:
            out += b"\\\\"
        elif c == 8:
            out += b"\\b"
        elif c == 12:
            out += b"\\f"
        elif c == 10:
            out += b"\\n"
        elif c == 13:
            out += b"\\r"
        elif c == 9:
            out += b"\\t"
        elif c < 0x20:
            out += b"\\u%04x" % c
        else:
            out.append(c)
    out += b'"'
    return bytes(out)


def to_json(v: Value, indent: int = -1, item_sep: bytes = b", ", key_sep: bytes = b": ", lvl: int = 0) -> bytes:
    """value_to_json: the reference's own serialiser (not nlohmann's): floats as `ostream << double`."""
    out: list[bytes] = []
    _to_json(out, v, lvl, indent, item_sep, key_sep)
    return b"".join(out)


def _to_json(out: list, v: Value, lvl: int, indent: int, item_sep: bytes, key_sep: bytes) -> None:
    ind = b" " * (lvl * indent) if indent > 0 else b""
    step = b" " * indent if indent > 0 else b""
    nl = b"\n" if indent >= 0 else b""
    if isinstance(v, VNone) or v.is_undefined():
        out.append(b"null")
    elif isinstance(v, VBool):
        out.append(b"true" if v.b else b"false")
    elif isinstance(v, VInt):
        out.append(b"%d" % v.v)
    elif isinstance(v, VFloat):
        out.append(cpp_stream_double(v.f))
    elif isinstance(v, VStr):
        out.append(_json_string(v.s.str()))
    elif isinstance(v, VArray):
        out.append(b"[")
        if v.items:
            out.append(nl)
            n = len(v.items)
            for i, item in enumerate(v.items):
                out.append(ind + step)
                _to_json(out, item, lvl + 1, indent, item_sep, key_sep)
                if i < n - 1:
                    out.append(item_sep)
                out.append(nl)
            out.append(ind)
        out.append(b"]")
    elif isinstance(v, VObject):
        out.append(b"{")
        if v.d:
            out.append(nl)
            n = len(v.d)
            for i, (k, item) in enumerate(v.d.values()):
                out.append(ind + step)
                out.append(_json_string(k.as_string().str()))
                out.append(key_sep)
                _to_json(out, item, lvl + 1, indent, item_sep, key_sep)
                if i < n - 1:
                    out.append(item_sep)
                out.append(nl)
            out.append(ind)
        out.append(b"}")
    else:
        out.append(b"null")


def parse_utf8(s: bytes, i: int) -> tuple[str, int, int]:
    """common_parse_utf8_codepoint: (status, codepoint, bytes consumed); no check for overlongs or surrogates."""
    n = len(s)
    if i >= n:
        return "incomplete", 0, 0
    c = s[i]
    if not c & 0x80:
        return "ok", c, 1
    if not c & 0x40:
        return "invalid", 0, 1
    if not c & 0x20:
        if i + 1 >= n:
            return "incomplete", 0, 1
        if (s[i + 1] & 0xC0) != 0x80:
            return "invalid", 0, 1
        return "ok", ((c & 0x1F) << 6) | (s[i + 1] & 0x3F), 2
    for width, mask in ((3, 0x0F), (4, 0x07)):
        if width == 4 and c & 0x08:
            break
        if width == 3 and c & 0x10:
            continue
        for k in range(1, width):
            if i + k >= n:
                return "incomplete", 0, k
            if (s[i + k] & 0xC0) != 0x80:
                return "invalid", 0, k
        cp = c & mask
        for k in range(1, width):
            cp = (cp << 6) | (s[i + k] & 0x3F)
        return "ok", cp, width
    return "invalid", 0, 1


def json_ensure_ascii(js: bytes) -> bytes:
    out = bytearray()
    in_str = escaped = False
    i, n = 0, len(js)
    while i < n:
        c = js[i]
        if not in_str:
            out.append(c)
            if c == 34:
                in_str = True
            i += 1
            continue
        if escaped:
            out.append(c)
            escaped = False
            i += 1
            continue
        if c == 92:
            out.append(c)
            escaped = True
            i += 1
            continue
        if c == 34:
            out.append(c)
            in_str = False
            i += 1
            continue
        if c < 0x80:
            out.append(c)
            i += 1
            continue
        status, cp, used = parse_utf8(js, i)
        if status != "ok":
            out += b"\\ufffd"
            i += 1
            continue
        if cp <= 0xFFFF:
            out += b"\\u%04x" % cp
        else:
            cp -= 0x10000
            out += b"\\u%04x\\u%04x" % (0xD800 + ((cp >> 10) & 0x3FF), 0xDC00 + (cp & 0x3FF))
        i += used
    return bytes(out)


# ---------------------------------------------------------------------------------------------------------------
# function arguments

class Args:
    """func_args: positional and keyword values (kwargs stay in the list, in order), the calling context."""

    __slots__ = ("ctx", "args", "func_name")

    def __init__(self, ctx, args=None):
        self.ctx = ctx
        self.args = [] if args is None else args
        self.func_name = b""

    def count(self) -> int:
        return len(self.args)

    def get_kwarg(self, key: bytes, default: Value) -> Value:
        for a in self.args:
            if isinstance(a, VKwarg) and a.key == key:
                return a.val
        return default

    def kwarg_or_pos(self, key: bytes, pos: int) -> Value:
        v = self.get_kwarg(key, VUndefined())
        if v.is_undefined() and pos < len(self.args) and not isinstance(self.args[pos], VKwarg):
            return self.args[pos]
        return v

    def pos(self, i: int, default: Value | None = None) -> Value:
        if i < len(self.args):
            return self.args[i]
        if default is not None:
            return default
        raise fail(b"Function '" + self.func_name + b"' expected at least %d arguments, got %d"
                   % (i + 1, len(self.args)))

    def ensure_count(self, lo: int, hi: int = 999) -> None:
        n = len(self.args)
        if n < lo or n > hi:
            raise fail(b"Function '" + self.func_name + b"' expected between %d and %d arguments, got %d"
                       % (lo, hi, n))

    def ensure_vals(self, *spec) -> None:
        """spec: (class, required) pairs, as ensure_vals<T0, T1, ...>(required0, required1, ...)."""
        self.ensure_count(sum(1 for _, req in spec if req))
        for i, (cls, req) in enumerate(spec):
            if req and i < len(self.args):
                v = self.args[i]
                if not isinstance(v, cls):
                    raise fail(b"Function '" + self.func_name + b"' expected value of type " + mangled(cls.cpp_name)
                               + b", got " + v.type())


# ---------------------------------------------------------------------------------------------------------------
# comparisons (tests, sort, min/max, dictsort)

EQ, GE, GT, LT, NE = "eq", "ge", "gt", "lt", "ne"


def _num(v: Value) -> bool:
    return isinstance(v, (VInt, VFloat))


def compare(a: Value, b: Value, op: str) -> bool:
    """value_compare."""
    if _num(a) and _num(b):
        x, y = a.as_float(), b.as_float()
        return {EQ: x == y, GE: x >= y, GT: x > y, LT: x < y, NE: x != y}[op]
    if (isinstance(b, VStr) and _num(a)) or (isinstance(a, VStr) and _num(b)) or \
            (isinstance(a, VStr) and isinstance(b, VStr)):
        x, y = a.as_string().str(), b.as_string().str()
        return {EQ: x == y, GE: x >= y, GT: x > y, LT: x < y, NE: x != y}[op]
    if isinstance(a, VBool) and isinstance(b, VBool):
        if op == EQ:
            return a.b == b.b
        if op == NE:
            return a.b != b.b
        raise fail(b"Unsupported comparison operator for bool type")
    return False


def cpp_sort(items: list, less) -> list:
    """std::sort as libstdc++ does it (introsort, median-of-three, final insertion sort), so that equal elements
    end up where the reference puts them."""
    a = list(items)
    n = len(a)
    if n < 2:
        return a

    def sift_down(first: int, hole: int, length: int, value) -> None:
        top = hole
        child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if less(a[first + child], a[first + child - 1]):
                child -= 1
            a[first + hole] = a[first + child]
            hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            a[first + hole] = a[first + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and less(a[first + parent], value):
            a[first + hole] = a[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[first + hole] = value

    def heap_sort(first: int, last: int) -> None:
        length = last - first
        if length >= 2:
            parent = (length - 2) // 2
            while True:
                sift_down(first, parent, length, a[first + parent])
                if parent == 0:
                    break
                parent -= 1
        while last - first > 1:
            last -= 1
            value = a[last]
            a[last] = a[first]
            sift_down(first, 0, last - first, value)

    def move_median_to_first(result: int, x: int, y: int, z: int) -> None:
        if less(a[x], a[y]):
            if less(a[y], a[z]):
                a[result], a[y] = a[y], a[result]
            elif less(a[x], a[z]):
                a[result], a[z] = a[z], a[result]
            else:
                a[result], a[x] = a[x], a[result]
        elif less(a[x], a[z]):
            a[result], a[x] = a[x], a[result]
        elif less(a[y], a[z]):
            a[result], a[z] = a[z], a[result]
        else:
            a[result], a[y] = a[y], a[result]

    def unguarded_partition(first: int, last: int, pivot: int) -> int:
        while True:
            while less(a[first], a[pivot]):
                first += 1
            last -= 1
            while less(a[pivot], a[last]):
                last -= 1
            if not first < last:
                return first
            a[first], a[last] = a[last], a[first]
            first += 1

    def introsort_loop(first: int, last: int, depth: int) -> None:
        while last - first > 16:
            if depth == 0:
                heap_sort(first, last)
                return
            depth -= 1
            mid = first + (last - first) // 2
            move_median_to_first(first, first + 1, mid, last - 1)
            cut = unguarded_partition(first + 1, last, first)
            introsort_loop(cut, last, depth)
            last = cut

    def insertion_sort(first: int, last: int) -> None:
        for i in range(first + 1, last):
            val = a[i]
            if less(val, a[first]):
                a[first + 1:i + 1] = a[first:i]
                a[first] = val
            else:
                j = i
                while less(val, a[j - 1]):
                    a[j] = a[j - 1]
                    j -= 1
                a[j] = val

    def unguarded_insertion_sort(first: int, last: int) -> None:
        for i in range(first, last):
            val = a[i]
            j = i
            while less(val, a[j - 1]):
                a[j] = a[j - 1]
                j -= 1
            a[j] = val

    introsort_loop(0, n, 2 * (n.bit_length() - 1))
    if n > 16:
        insertion_sort(0, 16)
        unguarded_insertion_sort(16, n)
    else:
        insertion_sort(0, n)
    return a


# the builtin tables are filled in by builtins.py (imported by the package)
BUILTINS_INT: dict = {}
BUILTINS_FLOAT: dict = {}
BUILTINS_STRING: dict = {}
BUILTINS_BOOL: dict = {}
BUILTINS_ARRAY: dict = {}
BUILTINS_OBJECT: dict = {}
BUILTINS_NONE: dict = {}
BUILTINS_UNDEFINED: dict = {}
GLOBALS: dict = {}

