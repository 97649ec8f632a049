"""Ollama's keep-alive (v0.13.3): how long a model stays loaded after its last request, as Ollama reads it.

    ns = from_json(body["keep_alive"])      # api.Duration's UnmarshalJSON: a number of seconds or a Go duration
    ns = default_ns()                       # envconfig.KeepAlive: $OLLAMA_KEEP_ALIVE, else 5 minutes
    residency.set_keep_alive(name, to_seconds(ns))

Rules (api/types.go, envconfig/config.go, server/sched.go of Ollama v0.13.3):
- A JSON number is seconds (fractions kept, truncated to whole nanoseconds); a negative one means forever.
- A JSON string is a Go duration (`time.ParseDuration`: "5m", "1h30m", "1.5s", "300ms", "0"; units ns, us, µs,
  μs, ms, s, m, h; a bare number other than 0 has no unit and is an error); a negative one means forever.
  Any other JSON type is refused: "Unsupported type: '<go type>'".
- $OLLAMA_KEEP_ALIVE (spaces and quotes trimmed) is a Go duration, else an integer number of seconds; anything
  else leaves the default, 5 minutes; negative means forever.
- Zero (or less, after a float's overflow) unloads the model as soon as no request holds it. "Forever" is Go's
  largest duration, math.MaxInt64 nanoseconds (`FOREVER`); `to_seconds` gives None for it (never unloaded).
Must not know: the residency or HTTP (the Ollama family turns ValueError into its 400).
"""

from __future__ import annotations

import os
import re

FOREVER = (1 << 63) - 1                    # math.MaxInt64 nanoseconds
DEFAULT = 5 * 60 * 10**9                   # 5 minutes

_UNITS = {"ns": 1, "us": 10**3, "\u00b5s": 10**3, "\u03bcs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9,
          "h": 3600 * 10**9}
_LIMIT = 1 << 63


def _quote(s: str) -> str:
    """Go's time.quote: ASCII printable as is (\" and \\ escaped), every other byte as \\xNN."""
    out = ['"']
    for c in s:
        if c < " " or ord(c) >= 0x80:
            out.extend(f"\\x{b:02x}" for b in c.encode("utf-8", "surrogateescape"))
        else:
            out.append("\\" + c if c in '"\\' else c)
    out.append('"')
    return "".join(out)


def _invalid(orig: str) -> ValueError:
    return ValueError("time: invalid duration " + _quote(orig))


def parse_go_duration(text: str) -> int:
    """Go's time.ParseDuration: nanoseconds, or ValueError with Go's message."""
    orig, s = text, text
    neg = False
    if s and s[0] in "+-":
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if s == "":
        raise _invalid(orig)
    total = 0
    while s:
        if not (s[0] == "." or "0" <= s[0] <= "9"):
            raise _invalid(orig)
        i = 0
        v = 0
        while i < len(s) and "0" <= s[i] <= "9":          # leadingInt
            if v > _LIMIT // 10:
                raise _invalid(orig)
            v = v * 10 + ord(s[i]) - 48
            if v > _LIMIT:
                raise _invalid(orig)
            i += 1
        pre = i > 0
        s = s[i:]
        f, scale, post = 0, 1.0, False
        if s and s[0] == ".":
            s = s[1:]
            i = 0
            overflow = False
            while i < len(s) and "0" <= s[i] <= "9":      # leadingFraction
                if not overflow:
                    if f > (_LIMIT - 1) // 10:
                        overflow = True
                    else:
                        y = f * 10 + ord(s[i]) - 48
                        if y > _LIMIT:
                            overflow = True
                        else:
                            f, scale = y, scale * 10
                i += 1
            post = i > 0
            s = s[i:]
        if not pre and not post:
            raise _invalid(orig)
        i = 0
        while i < len(s) and not (s[i] == "." or "0" <= s[i] <= "9"):
            i += 1
        if i == 0:
            raise ValueError("time: missing unit in duration " + _quote(orig))
        u, s = s[:i], s[i:]
        if u not in _UNITS:
            raise ValueError("time: unknown unit " + _quote(u) + " in duration " + _quote(orig))
        unit = _UNITS[u]
        if v > _LIMIT // unit:
            raise _invalid(orig)
        v *= unit
        if f > 0:
            v += int(float(f) * (float(unit) / scale))
            if v > _LIMIT:
                raise _invalid(orig)
        total += v
        if total > _LIMIT:
            raise _invalid(orig)
    if neg:
        return -total
    if total > _LIMIT - 1:
        raise _invalid(orig)
    return total


def _go_type(v) -> str:
    return {bool: "bool", list: "[]interface {}", dict: "map[string]interface {}"}.get(type(v), type(v).__name__)


def from_json(value) -> int:
    """api.Duration's UnmarshalJSON of a parsed JSON value: nanoseconds; ValueError with Ollama's message."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"Unsupported type: '{_go_type(value)}'")
    if isinstance(value, str):
        d = parse_go_duration(value)
        return FOREVER if d < 0 else d
    if value < 0:
        return FOREVER
    ns = float(value) * 1e9
    # Go's float64 -> int64 conversion on amd64: truncation, and the "integer indefinite" value past the range
    return int(ns) if ns < 2.0 ** 63 else -(1 << 63)


def default_ns(environ=None) -> int:
    """envconfig.KeepAlive: $OLLAMA_KEEP_ALIVE as a Go duration or whole seconds, else 5 minutes."""
    environ = os.environ if environ is None else environ
    d = DEFAULT
    s = environ.get("OLLAMA_KEEP_ALIVE", "").strip().strip("\"'")
    if s:
        try:
            d = parse_go_duration(s)
        except ValueError:
            n = int(s) if re.fullmatch(r"[+-]?[0-9]+", s) else None    # strconv.ParseInt(s, 10, 64)
            if n is not None and -(1 << 63) <= n < (1 << 63):
                d = _wrap(n * 10**9)
    return FOREVER if d < 0 else d


def _wrap(x: int) -> int:
    """int64 arithmetic (time.Duration(n) * time.Second wraps around)."""
    x &= (1 << 64) - 1
    return x - (1 << 64) if x >= 1 << 63 else x


def to_seconds(ns: int) -> float | None:
    """Seconds for bankml.server.residency (None: never unloaded; 0 or less: as soon as it is idle)."""
    if ns >= FOREVER:
        return None
    return max(ns, 0) / 1e9
