"""nlohmann::json's text forms, for the messages llama-server builds from JSON values.

llama-server writes JSON values into some error messages (`Missing 'role' in message: {"content":"hi"}`) and
reports JSON type errors with nlohmann's own wording. This module reproduces those texts from Python values
decoded by `json.loads` (dict key order kept). Numbers: ints as decimal; floats with nlohmann's layout (at most
15 integer digits before switching to exponent form, "1.0" for integral values, two-digit exponents), with the
shortest round-trip digits (Python's repr; nlohmann's Grisu2 agrees but for rare doubles).
"""

from __future__ import annotations

import math


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


def _float(x: float) -> str:
    if not math.isfinite(x):
        return "null"
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    x = abs(x)
    if x == 0:
        return sign + "0.0"
    r = repr(x)
    mant, _, exp = r.partition("e")
    e10 = int(exp) if exp else 0
    if "." in mant:
        ip, fp = mant.split(".")
    else:
        ip, fp = mant, ""
    digits = (ip + fp).lstrip("0")
    # decimal exponent of the last digit: value = digits * 10^(n - k)
    point = len(ip) + e10                     # position of the decimal point counted from the first char of ip+fp
    lead_zeros = len(ip + fp) - len((ip + fp).lstrip("0"))
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    n = point - lead_zeros
    if k <= n <= 15:
        return sign + digits + "0" * (n - k) + ".0"
    if 0 < n <= 15:
        return sign + digits[:n] + "." + digits[n:]
    if -4 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    body = digits if k == 1 else digits[0] + "." + digits[1:]
    es = "-" if e < 0 else "+"
    return sign + body + "e" + es + ("%02d" % abs(e))


def _str(s: str) -> str:
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif o < 0x20:
            out.append("\\u%04x" % o)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def dump(v, indent: int = -1, _lvl: int = 0) -> str:
    """json::dump(indent): compact (',' ':') without indent, else one member a line and ': '."""
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, str):
        return _str(v)
    if isinstance(v, (list, tuple)):
        if not v:
            return "[]"
        if indent < 0:
            return "[" + ",".join(dump(x) for x in v) + "]"
        pad = " " * (indent * (_lvl + 1))
        items = ",\n".join(pad + dump(x, indent, _lvl + 1) for x in v)
        return "[\n" + items + "\n" + " " * (indent * _lvl) + "]"
    if isinstance(v, dict):
        if not v:
            return "{}"
        if indent < 0:
            return "{" + ",".join(_str(k) + ":" + dump(x) for k, x in v.items()) + "}"
        pad = " " * (indent * (_lvl + 1))
        items = ",\n".join(pad + _str(k) + ": " + dump(x, indent, _lvl + 1) for k, x in v.items())
        return "{\n" + items + "\n" + " " * (indent * _lvl) + "}"
    raise TypeError(f"not a JSON value: {type(v).__name__}")
