"""Global functions, tests, filters and methods of llama.cpp b11192's Jinja runtime (common/jinja/value.cpp).

A filter `x | f(a)` and a method `x.f(a)` are the same thing: the builtin `f` of x's type, called with x first.
Names, argument handling and error texts follow the reference, quirks included, e.g. `split()` without a
separator splits on single spaces; `'%s' | format(x)` is not printf-style (only `{}` placeholders);
`tojson(x, 2)` reads 2 as `ensure_ascii`; `5 | string` is `5 | tojson`; `list.append(x)` returns the list;
`x | default` without an argument is an error; objects have no `default`; undefined values answer most filters
with an empty result.
"""

from __future__ import annotations

import re
import time as _time

from . import values as V
from .errors import TemplateCrash, TemplateNotImplemented
from .values import (Args, JStr, VArray, VBool, VFloat, VFunc, VInt, VKwarg, VNone, VObject, VStr, VTuple,
                     VUndefined, Value, compare, cpp_sort, fail, mark_used)

_SPACE = b" \t\n\v\f\r"


def _ni(what: bytes) -> TemplateNotImplemented:
    return TemplateNotImplemented(what)


# ---------------------------------------------------------------------------------------------------------------
# helpers

def _slice(seq, start: int, stop: int, step: int):
    n = len(seq)
    d = 1 if step > 0 else (-1 if step < 0 else 0)
    if d >= 0:
        s = max(n + start, 0) if start < 0 else min(start, n)
        e = max(n + stop, 0) if stop < 0 else min(stop, n)
    else:
        s = max(n + start, 0) if start < 0 else min(start, n - 1)
        e = max(n + stop, -1) if stop < -1 else min(stop, n - 1)
    out = []
    if d == 0:
        return out
    i = s
    while d * i < d * e:
        if 0 <= i < n:
            out.append(seq[i])
        i += step
    return out


def _slice_bounds(a: Args) -> tuple[int, int, int]:
    arg0 = a.pos(1)
    arg1 = a.pos(2, VUndefined())
    arg2 = a.pos(3, VUndefined())
    if a.count() == 1:
        return 0, arg0.as_int(), 1
    if a.count() == 2:
        return arg0.as_int(), arg1.as_int(), 1
    return arg0.as_int(), arg1.as_int(), arg2.as_int()


def _stoi(s: bytes, base: int) -> int | None:
    """std::stoi: strtol's parse (leading spaces, sign, prefix), then the int range; None where it throws."""
    i, n = 0, len(s)
    while i < n and s[i] in _SPACE:
        i += 1
    neg = False
    if i < n and s[i] in b"+-":
        neg = s[i] == 45
        i += 1

    def digit(c: int) -> int:
        if 48 <= c <= 57:
            return c - 48
        if 97 <= c <= 122:
            return c - 87
        if 65 <= c <= 90:
            return c - 55
        return 99

    if base in (0, 16) and i + 1 < n and s[i] == 48 and s[i + 1] in b"xX" and i + 2 < n and digit(s[i + 2]) < 16:
        i += 2
        base = 16
    elif base == 0:
        base = 8 if i < n and s[i] == 48 else 10
    v = 0
    any_digit = False
    while i < n and digit(s[i]) < base:
        v = v * base + digit(s[i])
        any_digit = True
        i += 1
    if not any_digit:
        return None
    v = -v if neg else v
    if not -(1 << 63) <= v < (1 << 63) or not -(1 << 31) <= v < (1 << 31):
        return None
    return v


_FLOAT_RE = re.compile(
    rb"[ \t\n\v\f\r]*([+-]?)(?:"
    rb"(?P<hex>0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?)"
    rb"|(?P<inf>[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)"
    rb"|(?P<nan>[nN][aA][nN](?:\([0-9A-Za-z_]*\))?)"
    rb"|(?P<dec>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?))")


def _stod(s: bytes) -> float | None:
    """std::stod: strtod's longest valid prefix; None where it throws (nothing parsed, or out of range)."""
    m = _FLOAT_RE.match(s)
    if not m:
        return None
    sign = -1.0 if m.group(1) == b"-" else 1.0
    if m.group("inf"):
        return sign * float("inf")
    if m.group("nan"):
        return float("nan") if sign > 0 else -float("nan")
    if m.group("hex"):
        h = m.group("hex").decode()
        if "p" not in h and "P" not in h:
            h += "p0"
        v = float.fromhex(h)
        digits = re.sub(r"[^1-9a-fA-F]", "", h.split("p")[0].split("P")[0][2:])
    else:
        text = m.group("dec").decode()
        try:
            v = float(text)
        except OverflowError:
            return None
        digits = re.sub(r"[^1-9]", "", text.split("e")[0].split("E")[0])
    if v == float("inf"):
        return None
    if digits and (v == 0.0 or abs(v) < 2.2250738585072014e-308):
        return None
    return sign * v


def _strftime(fmt: bytes, t: float, localtime) -> bytes | None:
    """C strftime into a 100-byte buffer: None when the result is empty or does not fit."""
    fmt = fmt.split(b"\0", 1)[0]
    try:
        out = _time.strftime(fmt.decode("utf-8", "surrogateescape"), localtime(t))
        b = out.encode("utf-8", "surrogateescape")
    except (ValueError, UnicodeError):
        return None
    if not b or len(b) >= 100:
        return None
    return b


# ---------------------------------------------------------------------------------------------------------------
# global functions

def raise_exception(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    raise fail(b"Jinja Exception: " + a.pos(0).as_string().str())


def namespace(a: Args) -> Value:
    out = VObject()
    for arg in a.args:
        if not isinstance(arg, VKwarg):
            raise fail(b"namespace() arguments must be kwargs")
        out.set(arg.key, arg.val)
    return out


def strftime_now(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    out = _strftime(a.pos(0).as_string().str(), a.ctx.current_time, a.ctx.localtime)
    if out is None:
        raise fail(b"strftime_now: failed to format time")
    return VStr(out)


def range_(a: Args) -> Value:
    a.ensure_count(1, 3)
    a.ensure_vals((VInt, True), (VInt, False), (VInt, False))
    arg0 = a.pos(0)
    arg1 = a.pos(1, VUndefined())
    arg2 = a.pos(2, VUndefined())
    if a.count() == 1:
        start, stop, step = 0, arg0.as_int(), 1
    elif a.count() == 2:
        start, stop, step = arg0.as_int(), arg1.as_int(), 1
    else:
        start, stop, step = arg0.as_int(), arg1.as_int(), arg2.as_int()
    if step == 0:
        raise fail(b"range() step argument must not be zero")
    return VArray(VInt(i) for i in range(start, stop, step))


def tojson(a: Args) -> Value:
    a.ensure_count(1, 5)
    ensure_ascii = a.kwarg_or_pos(b"ensure_ascii", 1)
    indent_v = a.kwarg_or_pos(b"indent", 2)
    separators = a.kwarg_or_pos(b"separators", 3)
    sort_keys = a.kwarg_or_pos(b"sort_keys", 4)
    if a.ctx.get_stats:
        mark_used(a.pos(0), True)
    indent = int(V.wrap_i64(indent_v.v) & 0xFFFFFFFF) if isinstance(indent_v, VInt) else -1
    if indent >= (1 << 31):
        indent -= 1 << 32
    if sort_keys.as_bool():
        raise _ni(b"tojson sort_keys=true not implemented")
    ascii_ = ensure_ascii.as_bool()
    seps = separators.items if isinstance(separators, VArray) else []
    item_sep = seps[0].as_string().str() if len(seps) > 0 else (b", " if indent < 0 else b",")
    key_sep = seps[1].as_string().str() if len(seps) > 1 else b": "
    out = V.to_json(a.pos(0), indent, item_sep, key_sep)
    if ascii_:
        out = V.json_ensure_ascii(out)
    return VStr(out)


# ---------------------------------------------------------------------------------------------------------------
# tests

def _type_test(*classes):
    def test(a: Args) -> Value:
        a.ensure_count(1)
        return VBool(isinstance(a.pos(0), classes))
    return test


def _cmp_test(op: str):
    def test(a: Args) -> Value:
        a.ensure_count(2, 2)
        return VBool(compare(a.pos(0), a.pos(1), op))
    return test


def test_odd(a: Args) -> Value:
    a.ensure_vals((VInt, True))
    return VBool(a.pos(0).as_int() % 2 != 0)


def test_even(a: Args) -> Value:
    a.ensure_vals((VInt, True))
    return VBool(a.pos(0).as_int() % 2 == 0)


def test_false(a: Args) -> Value:
    a.ensure_count(1)
    v = a.pos(0)
    return VBool(isinstance(v, VBool) and not v.b)


def test_true(a: Args) -> Value:
    a.ensure_count(1)
    v = a.pos(0)
    return VBool(isinstance(v, VBool) and v.b)


def test_divisibleby(a: Args) -> Value:
    a.ensure_vals((VInt, True), (VInt, True))
    x, y = a.pos(0).v, a.pos(1).v
    if y == 0 or (y == -1 and x == V.I64_MIN):
        raise TemplateCrash(b"divisibleby(0): an integer division by zero, which stops llama-server")
    return VBool(x % y == 0)


def test_lower(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    return VBool(a.pos(0).s.is_lower())


def test_upper(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    return VBool(a.pos(0).s.is_upper())


def test_defined(a: Args) -> Value:
    a.ensure_count(1)
    return VBool(not a.pos(0).is_undefined())


def test_in(a: Args) -> Value:
    a.ensure_count(2)
    needle, hay = a.pos(0), a.pos(1)
    if isinstance(hay, VUndefined):
        return VBool(False)
    if isinstance(hay, VArray):
        return VBool(any(needle.equivalent(item) for item in hay.items))
    if isinstance(hay, VStr):
        if not isinstance(needle, VStr):
            raise fail(b"'in' test expects args[1] as string when args[0] is string, got args[1] as "
                       + needle.type())
        return VBool(needle.s.str() in hay.s.str())
    if isinstance(hay, VObject):
        return VBool(hay.has_key(needle))
    raise fail(b"'in' test expects iterable as first argument, got " + hay.type())


def test_test(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    return VBool(b"test_is_" + a.pos(0).s.str() in V.GLOBALS)


def _not_implemented(what: bytes):
    def f(a: Args) -> Value:
        raise _ni(what)
    return f


# ---------------------------------------------------------------------------------------------------------------
# shared methods

def default_value(a: Args) -> Value:
    a.ensure_count(2, 3)
    check_bool = a.kwarg_or_pos(b"boolean", 2).as_bool()
    v = a.pos(0)
    no_value = (not v.as_bool()) if check_bool else (v.is_undefined() or v.is_none())
    return a.pos(1) if no_value else v


def _empty(kind):
    def f(a: Args) -> Value:
        if kind == "int":
            return VInt(0)
        if kind == "str":
            return VStr()
        if kind == "array":
            return VArray()
        return VUndefined()
    return f


def selectattr(reject: bool):
    def f(a: Args) -> Value:
        a.ensure_count(2, 4)
        a.ensure_vals((VArray, True), (VStr, True), (VStr, False), (VStr, False))
        arr = list(a.pos(0).items)
        attribute = a.pos(1)
        out = VArray()
        missing = VUndefined()
        n = a.count()
        if n == 2:
            for item in arr:
                if not isinstance(item, VObject):
                    raise fail(b"selectattr: item is not an object")
                sel = item.at(attribute, missing).as_bool()
                if sel != reject:
                    out.push(item)
            return out
        if n == 3:
            test_name = a.pos(1).as_string().str()
            test_val = a.pos(2)
            fn = V.GLOBALS.get(b"test_is_" + test_name)
            if fn is None:
                raise fail(b"selectattr: unknown test '" + test_name + b"'")
            for item in arr:
                sel = fn(Args(a.ctx, [item, test_val])).as_bool()
                if sel != reject:
                    out.push(item)
            return out
        test_name = a.pos(2).as_string().str()
        extra = a.pos(3)
        fn = V.GLOBALS.get(b"test_is_" + test_name)
        if fn is None:
            raise fail(b"selectattr: unknown test '" + test_name + b"'")
        for item in arr:
            if not isinstance(item, VObject):
                raise fail(b"selectattr: item is not an object")
            attr = item.at(attribute, missing)
            sel = fn(Args(a.ctx, [attr, extra])).as_bool()
            if sel != reject:
                out.push(item)
        return out
    return f


# ---------------------------------------------------------------------------------------------------------------
# numbers and booleans

def int_abs(a: Args) -> Value:
    a.ensure_vals((VInt, True))
    v = a.pos(0).v
    return VInt(V.wrap_i64(-v) if v < 0 else v)


def int_int(a: Args) -> Value:
    a.ensure_vals((VInt, True))
    return VInt(a.pos(0).v)


def int_float(a: Args) -> Value:
    a.ensure_vals((VInt, True))
    return VFloat(float(a.pos(0).v))


def float_abs(a: Args) -> Value:
    a.ensure_vals((VFloat, True))
    f = a.pos(0).f
    return VFloat(-f if f < 0.0 else f)


def float_int(a: Args) -> Value:
    a.ensure_vals((VFloat, True))
    return VInt(V.to_i64(a.pos(0).f))


def float_float(a: Args) -> Value:
    a.ensure_vals((VFloat, True))
    return VFloat(a.pos(0).f)


def _bool_str(a: Args) -> Value:
    a.ensure_vals((VBool, True))
    return VStr(b"True" if a.pos(0).b else b"False")


def bool_int(a: Args) -> Value:
    a.ensure_vals((VBool, True))
    return VInt(1 if a.pos(0).b else 0)


def bool_float(a: Args) -> Value:
    a.ensure_vals((VBool, True))
    return VFloat(1.0 if a.pos(0).b else 0.0)


# ---------------------------------------------------------------------------------------------------------------
# strings

def _str_arg0(a: Args, fname: bytes) -> VStr:
    v = a.pos(0)
    if not isinstance(v, VStr):
        raise fail(fname + b"() first argument must be a string")
    return v


def s_upper(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    return VStr(a.pos(0).s.upper())


def s_lower(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    return VStr(a.pos(0).s.lower())


def _strip_fn(left: bool, right: bool, name: bytes):
    def f(a: Args) -> Value:
        if name == b"strip":
            _str_arg0(a, b"strip")
        else:
            a.ensure_vals((VStr, True))
        chars = a.kwarg_or_pos(b"chars", 1)
        if chars.is_undefined():
            return VStr(a.pos(0).s.strip(left, right))
        return VStr(a.pos(0).s.strip(left, right, chars.as_string().str()))
    return f


def s_title(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    return VStr(a.pos(0).s.title())


def s_capitalize(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    return VStr(a.pos(0).s.capitalize())


def s_length(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    return VInt(a.pos(0).s.length())


def s_startswith(a: Args) -> Value:
    a.ensure_vals((VStr, True), (VStr, True))
    return VBool(a.pos(0).s.str().startswith(a.pos(1).s.str()))


def s_endswith(a: Args) -> Value:
    a.ensure_vals((VStr, True), (VStr, True))
    return VBool(a.pos(0).s.str().endswith(a.pos(1).s.str()))


def _split(reverse: bool):
    def f(a: Args) -> Value:
        a.ensure_count(1, 3)
        s = _str_arg0(a, b"rsplit" if reverse else b"split").s.str()
        delim = a.pos(1).as_string().str() if a.count() > 1 else b" "
        if not delim:
            raise fail(b"empty separator")
        maxsplit = a.pos(2).as_int() if a.count() > 2 else -1
        out = []
        while maxsplit != 0:
            p = s.rfind(delim) if reverse else s.find(delim)
            if p < 0:
                break
            if reverse:
                out.append(s[p + len(delim):])
                s = s[:p]
            else:
                out.append(s[:p])
                s = s[p + len(delim):]
            maxsplit -= 1
        out.append(s)
        if reverse:
            out.reverse()
        return VArray(VStr(x) for x in out)
    return f


def s_replace(a: Args) -> Value:
    a.ensure_vals((VStr, True), (VStr, True), (VStr, True), (VInt, False))
    s = a.pos(0).s.str()
    old = a.pos(1).as_string().str()
    new = a.pos(2).as_string().str()
    count = a.pos(3).as_int() if a.count() > 3 else -1
    if count > 0:
        raise _ni(b"String replace with count argument not implemented")
    if old != new:
        if not old:
            s = new + b"".join(bytes([c]) + new for c in s)
        else:
            s = s.replace(old, new)
    return VStr(s)


def s_format(a: Args) -> Value:
    fmt = _str_arg0(a, b"format").s.str()
    parts: list = []
    lit = bytearray()
    idx = 1
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c != 123:
            lit.append(c)
            i += 1
            continue
        if i + 1 >= len(fmt) or fmt[i + 1] != 125:
            raise _ni(b"format() only supports simple '{}' placeholders")
        i += 2
        if lit:
            parts.append(bytes(lit))
            lit = bytearray()
        parts.extend(a.pos(idx).as_string().parts)
        idx += 1
    if lit:
        parts.append(bytes(lit))
    return VStr(JStr(parts))


def s_int(a: Args) -> Value:
    v = a.pos(0)
    default = a.kwarg_or_pos(b"default", 1)
    base_v = a.kwarg_or_pos(b"base", 2)
    base = 10 if base_v.is_undefined() else base_v.as_int()
    base = ((base + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    if base != 0 and (base < 2 or base > 36):
        raise fail(b"int() base must be 0 or between 2 and 36")
    if not isinstance(v, VStr):
        raise fail(b"int() first argument must be a string")
    r = _stoi(v.s.str(), base)
    if r is None:
        return VInt(0 if default.is_undefined() else default.as_int())
    return VInt(r)


def s_float(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    default = a.kwarg_or_pos(b"default", 1)
    r = _stod(a.pos(0).s.str())
    if r is None:
        return VFloat(0.0 if default.is_undefined() else default.as_float())
    return VFloat(r)


def s_string(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    return VStr(a.pos(0).s)


def s_slice(a: Args) -> Value:
    a.ensure_count(1, 4)
    a.ensure_vals((VStr, True), (VInt, True), (VInt, False), (VInt, False))
    start, stop, step = _slice_bounds(a)
    if step == 0:
        raise fail(b"slice step cannot be zero")
    return VStr(bytes(_slice(a.pos(0).s.str(), start, stop, step)))


def s_safe(a: Args) -> Value:
    a.ensure_vals((VStr, True))
    return a.pos(0)


def s_indent(a: Args) -> Value:
    a.ensure_count(1, 4)
    inp = a.pos(0)
    width = a.kwarg_or_pos(b"width", 1)
    first = a.kwarg_or_pos(b"first", 2).as_bool()
    blank = a.kwarg_or_pos(b"blank", 3).as_bool()
    if not isinstance(inp, VStr):
        raise fail(b"indent() first argument must be a string")
    if isinstance(width, VInt):
        if width.v < 0:
            raise fail(b"basic_string::_M_replace_aux")
        ind = b" " * width.v
    elif isinstance(width, VStr):
        ind = width.s.str()
    else:
        ind = b"    "
    s = inp.s.str()
    lines = s.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()                                   # std::getline yields no empty line after the last '\n'
    out = bytearray()
    for line in lines:
        if out:
            out.append(10)
        if (first if not out else (line != b"" or blank)):
            out += ind
        out += line
    if s.endswith(b"\n"):
        out.append(10)
        if blank:
            out += ind
    return VStr(bytes(out))


# ---------------------------------------------------------------------------------------------------------------
# arrays

def _arr_arg0(a: Args, msg: bytes) -> VArray:
    v = a.pos(0)
    if not isinstance(v, VArray):
        raise fail(msg)
    return v


def a_list(a: Args) -> Value:
    a.ensure_vals((VArray, True))
    return VArray(a.pos(0).items)


def a_first(a: Args) -> Value:
    a.ensure_vals((VArray, True))
    items = a.pos(0).items
    return items[0] if items else VUndefined()


def a_last(a: Args) -> Value:
    a.ensure_vals((VArray, True))
    items = a.pos(0).items
    return items[-1] if items else VUndefined()


def a_length(a: Args) -> Value:
    a.ensure_vals((VArray, True))
    return VInt(len(a.pos(0).items))


def a_slice(a: Args) -> Value:
    a.ensure_count(1, 4)
    a.ensure_vals((VArray, True), (VInt, True), (VInt, False), (VInt, False))
    v = a.pos(0)
    start, stop, step = _slice_bounds(a)
    if step == 0:
        raise fail(b"slice step cannot be zero")
    items = _slice(v.items, start, stop, step)
    return VTuple(items) if isinstance(v, VTuple) else VArray(items)


def a_join(a: Args) -> Value:
    a.ensure_count(1, 3)
    arr = _arr_arg0(a, b"join() first argument must be an array")
    delim = a.kwarg_or_pos(b"d", 1)
    attribute = a.kwarg_or_pos(b"attribute", 2)
    attr_is_int = isinstance(attribute, VInt)
    if not attribute.is_undefined() and not isinstance(attribute, VStr) and not attr_is_int:
        raise fail(b"join() attribute must be string or integer")
    d = b"" if delim.is_undefined() else delim.as_string().str()
    out = []
    for item in arr.items:
        if not attribute.is_undefined():
            if attr_is_int and isinstance(item, VArray):
                item = item.at(attribute.v)
            elif not attr_is_int and isinstance(item, VObject):
                item = item.at(attribute)
        if not isinstance(item, (VStr, VInt, VFloat)):
            raise fail(b"join() can only join arrays of strings or numerics")
        out.append(item.as_string().str())
    return VStr(d.join(out))


def a_string(a: Args) -> Value:
    a.ensure_vals((VArray, True))
    if a.ctx.get_stats:
        mark_used(a.pos(0), True)
    return VStr(a.pos(0).as_string())


def a_map(a: Args) -> Value:
    a.ensure_count(2)
    v = _arr_arg0(a, b"map: first argument must be an array")
    if not isinstance(a.args[1], VKwarg):
        raise _ni(b"map: filter-mapping not implemented")
    attribute = a.kwarg_or_pos(b"attribute", 1)
    attr_is_int = isinstance(attribute, VInt)
    if not isinstance(attribute, VStr) and not attr_is_int:
        raise fail(b"map: attribute must be string or integer")
    default = a.get_kwarg(b"default", VUndefined())
    out = []
    for item in list(v.items):
        if attr_is_int:
            out.append(item.at(attribute.v, default) if isinstance(item, VArray) else default)
        else:
            out.append(item.at(attribute, default) if isinstance(item, VObject) else default)
    return VTuple(out) if isinstance(v, VTuple) else VArray(out)


def a_append(a: Args) -> Value:
    a.ensure_count(2)
    arr = _arr_arg0(a, b"append: first argument must be an array")
    arr.push(a.pos(1))
    return arr


def a_pop(a: Args) -> Value:
    a.ensure_count(1, 2)
    a.ensure_vals((VArray, True), (VInt, False))
    index = a.pos(1).as_int() if a.count() == 2 else -1
    return a.pos(0).pop_at(index)


def _sort_less(op: str, attribute: Value):
    attr_is_int = isinstance(attribute, VInt)

    def less(x: Value, y: Value) -> bool:
        vx, vy = x, y
        if not attribute.is_undefined():
            if attr_is_int and isinstance(x, VArray) and isinstance(y, VArray):
                vx, vy = x.at(attribute.v), y.at(attribute.v)
            elif not attr_is_int and isinstance(x, VObject) and isinstance(y, VObject):
                vx, vy = x.at(attribute), y.at(attribute)
            else:
                raise fail(b"sort: unsupported object attribute comparison between " + x.type() + b" and "
                           + y.type())
        return compare(vx, vy, op)
    return less


def _run_sort(items: list, less) -> list:
    try:
        return cpp_sort(items, less)
    except IndexError:
        raise TemplateCrash(b"sort with an inconsistent order runs past the array in llama-server") from None


def a_sort(a: Args) -> Value:
    a.ensure_count(1, 4)
    v = _arr_arg0(a, b"sort: first argument must be an array")
    reverse = a.kwarg_or_pos(b"reverse", 1).as_bool()
    a.kwarg_or_pos(b"case_sensitive", 2)
    attribute = a.kwarg_or_pos(b"attribute", 3)
    items = _run_sort(v.items, _sort_less(V.GT if reverse else V.LT, attribute))
    return VTuple(items) if isinstance(v, VTuple) else VArray(items)


def a_reverse(a: Args) -> Value:
    a.ensure_vals((VArray, True))
    v = a.pos(0)
    items = list(reversed(v.items))
    return VTuple(items) if isinstance(v, VTuple) else VArray(items)


def _minmax(op: str, name: bytes):
    def f(a: Args) -> Value:
        a.ensure_count(1, 4)
        a.ensure_vals((VArray, True))
        a.kwarg_or_pos(b"case_sensitive", 1)
        attribute = a.kwarg_or_pos(b"attribute", 2)
        if not attribute.is_undefined():
            raise _ni(name + b": attribute not implemented")
        items = a.pos(0).items
        if not items:
            return VUndefined()
        best = items[0]
        for item in items[1:]:
            if compare(item, best, op):
                best = item
        return best
    return f


# ---------------------------------------------------------------------------------------------------------------
# objects

def o_get(a: Args) -> Value:
    a.ensure_count(2, 3)
    if not isinstance(a.pos(0), VObject):
        raise fail(b"get: first argument must be an object")
    if not isinstance(a.pos(1), VStr):
        raise fail(b"get: second argument must be a string (key)")
    default = a.pos(2) if a.count() == 3 else VNone()
    return a.pos(0).at(a.pos(1), default)


def o_keys(a: Args) -> Value:
    a.ensure_vals((VObject, True))
    return VArray(k for k, _ in a.pos(0).d.values())


def o_values(a: Args) -> Value:
    a.ensure_vals((VObject, True))
    return VArray(v for _, v in a.pos(0).d.values())


def o_items(a: Args) -> Value:
    a.ensure_vals((VObject, True))
    return VArray(VTuple([k, v]) for k, v in a.pos(0).d.values())


def o_string(a: Args) -> Value:
    a.ensure_vals((VObject, True))
    if a.ctx.get_stats:
        mark_used(a.pos(0), True)
    return VStr(a.pos(0).as_string())


def o_length(a: Args) -> Value:
    a.ensure_vals((VObject, True))
    return VInt(len(a.pos(0).d))


def o_dictsort(a: Args) -> Value:
    v = a.pos(0)
    a.kwarg_or_pos(b"case_sensitive", 1)
    by = a.kwarg_or_pos(b"by", 2)
    reverse = a.kwarg_or_pos(b"reverse", 3).as_bool()
    by_value = isinstance(by, VStr) and by.s.str() == b"value"
    op = V.GT if reverse else V.LT
    if not isinstance(v, VObject):
        raise fail(v.type() + b" is not an object value")
    pairs = list(v.d.items())
    idx = 1 if by_value else 0
    pairs = _run_sort(pairs, lambda x, y: compare(x[1][idx], y[1][idx], op))
    out = VObject()
    for k, e in pairs:
        out.d[k] = [e[0], e[1]]
    return out


# ---------------------------------------------------------------------------------------------------------------
# the tables

def _none_str(a: Args) -> Value:
    return VStr(b"None")


V.GLOBALS.update({
    b"raise_exception": raise_exception,
    b"namespace": namespace,
    b"strftime_now": strftime_now,
    b"range": range_,
    b"tojson": tojson,
    b"test_is_boolean": _type_test(VBool),
    b"test_is_callable": _type_test(VFunc),
    b"test_is_odd": test_odd,
    b"test_is_even": test_even,
    b"test_is_false": test_false,
    b"test_is_true": test_true,
    b"test_is_divisibleby": test_divisibleby,
    b"test_is_string": _type_test(VStr),
    b"test_is_integer": _type_test(VInt),
    b"test_is_float": _type_test(VFloat),
    b"test_is_number": _type_test(VInt, VFloat),
    b"test_is_iterable": _type_test(VArray, VStr, VUndefined),
    b"test_is_sequence": _type_test(VArray, VStr, VUndefined),
    b"test_is_mapping": _type_test(VObject),
    b"test_is_lower": test_lower,
    b"test_is_upper": test_upper,
    b"test_is_none": _type_test(VNone),
    b"test_is_defined": test_defined,
    b"test_is_undefined": _type_test(VUndefined),
    b"test_is_eq": _cmp_test(V.EQ),
    b"test_is_equalto": _cmp_test(V.EQ),
    b"test_is_ge": _cmp_test(V.GE),
    b"test_is_gt": _cmp_test(V.GT),
    b"test_is_greaterthan": _cmp_test(V.GT),
    b"test_is_lt": _cmp_test(V.LT),
    b"test_is_lessthan": _cmp_test(V.LT),
    b"test_is_ne": _cmp_test(V.NE),
    b"test_is_in": test_in,
    b"test_is_test": test_test,
    b"test_is_sameas": _not_implemented(b"sameas test not implemented"),
    b"test_is_escaped": _not_implemented(b"escaped test not implemented"),
    b"test_is_filter": _not_implemented(b"filter test not implemented"),
})

V.BUILTINS_INT.update({
    b"default": default_value, b"abs": int_abs, b"int": int_int, b"float": int_float,
    b"safe": tojson, b"string": tojson, b"tojson": tojson,
})

V.BUILTINS_FLOAT.update({
    b"default": default_value, b"abs": float_abs, b"int": float_int, b"float": float_float,
    b"safe": tojson, b"string": tojson, b"tojson": tojson,
})

V.BUILTINS_STRING.update({
    b"default": default_value,       # the table lists "default" twice; std::map keeps the first
    b"upper": s_upper, b"lower": s_lower,
    b"strip": _strip_fn(True, True, b"strip"), b"rstrip": _strip_fn(False, True, b"rstrip"),
    b"lstrip": _strip_fn(True, False, b"lstrip"),
    b"title": s_title, b"capitalize": s_capitalize, b"length": s_length,
    b"startswith": s_startswith, b"endswith": s_endswith,
    b"split": _split(False), b"rsplit": _split(True),
    b"replace": s_replace, b"format": s_format, b"int": s_int, b"float": s_float, b"string": s_string,
    b"slice": s_slice, b"safe": s_safe, b"tojson": tojson, b"indent": s_indent,
    b"join": _not_implemented(b"String join builtin not implemented"),
})

V.BUILTINS_BOOL.update({
    b"default": default_value, b"int": bool_int, b"float": bool_float,
    b"safe": _bool_str, b"string": _bool_str, b"tojson": tojson,
})

V.BUILTINS_ARRAY.update({
    b"default": default_value, b"list": a_list, b"first": a_first, b"last": a_last, b"length": a_length,
    b"slice": a_slice, b"selectattr": selectattr(False), b"select": selectattr(False),
    b"rejectattr": selectattr(True), b"reject": selectattr(True), b"join": a_join, b"string": a_string,
    b"tojson": tojson, b"map": a_map, b"append": a_append, b"pop": a_pop, b"sort": a_sort,
    b"reverse": a_reverse, b"min": _minmax(V.LT, b"min"), b"max": _minmax(V.GT, b"max"),
    b"unique": _not_implemented(b"Array unique builtin not implemented"),
})

V.BUILTINS_OBJECT.update({
    b"get": o_get, b"keys": o_keys, b"values": o_values, b"items": o_items, b"tojson": tojson,
    b"string": o_string, b"length": o_length, b"dictsort": o_dictsort,
    b"join": _not_implemented(b"object join not implemented"),
})

V.BUILTINS_NONE.update({
    b"default": default_value, b"tojson": tojson, b"string": _none_str, b"safe": _none_str,
    b"items": _empty("array"), b"map": _empty("array"), b"reject": _empty("array"),
    b"rejectattr": _empty("array"), b"select": _empty("array"), b"selectattr": _empty("array"),
    b"unique": _empty("array"),
})

V.BUILTINS_UNDEFINED.update({
    b"default": default_value, b"capitalize": _empty("str"), b"first": _empty("undef"),
    b"items": _empty("array"), b"join": _empty("str"), b"last": _empty("undef"), b"length": _empty("int"),
    b"list": _empty("array"), b"lower": _empty("str"), b"map": _empty("array"), b"max": _empty("undef"),
    b"min": _empty("undef"), b"reject": _empty("array"), b"rejectattr": _empty("array"),
    b"replace": _empty("str"), b"reverse": _empty("array"), b"safe": _empty("str"),
    b"select": _empty("array"), b"selectattr": _empty("array"), b"sort": _empty("array"),
    b"string": _empty("str"), b"strip": _empty("str"), b"sum": _empty("int"), b"title": _empty("str"),
    b"truncate": _empty("str"), b"unique": _empty("array"), b"upper": _empty("str"),
    b"wordcount": _empty("int"),
})
