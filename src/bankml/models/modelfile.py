"""Ollama's Modelfile (parser/parser.go at v0.13.3): the reader, with its exact errors, the writer (Command.String,
Modelfile.String) and the request a Modelfile makes (Modelfile.CreateRequest and api.FormatParams' types).

    mf = parse(text)                   # a Modelfile: .commands, [Command(name, args)]; raises ModelfileError
    str(mf)                            # Ollama's own spelling of it (FROM, PARAMETER k v, MESSAGE role text, ...)
    req = create_request(mf, base_dir) # {"from" | "files", "parameters", "system", "template", "messages", "license"}

The reader is parser.go's state machine (a name, then a value that runs to the end of the line unless it opens a
quote: `"..."` or `\"\"\"...\"\"\"` may span lines), so its errors are the same: `(line N): command must be one of
...`, `(line N): message role must be one of ...`, `unexpected EOF`, `unexpected EOF: <what was read>`,
`no FROM line`. Owns the text only: it must not know the models directory, the registry or HTTP.
"""

from __future__ import annotations

import codecs
import os
import re
from dataclasses import dataclass, field

COMMANDS = ("from", "license", "template", "system", "adapter", "renderer", "parser", "parameter", "message")
ROLES = ("system", "user", "assistant")
#: parser.go: deprecatedParameters (CreateRequest warns and drops them)
DEPRECATED = ("penalize_newline", "low_vram", "f16_kv", "logits_all", "vocab_only", "use_mlock", "mirostat",
              "mirostat_tau", "mirostat_eta")

ERR_COMMAND = ('command must be one of "from", "license", "template", "system", "adapter", "renderer", "parser", '
               '"parameter", or "message"')
ERR_ROLE = 'message role must be one of "system", "user", or "assistant"'
ERR_NO_FROM = "no FROM line"
ERR_EOF = "unexpected EOF"

#: api.Options' fields (api/types.go: Options and Runner) -> FormatParams' kind
PARAMETER_KINDS = {
    "num_keep": "int", "seed": "int", "num_predict": "int", "top_k": "int", "top_p": "float", "min_p": "float",
    "typical_p": "float", "repeat_last_n": "int", "temperature": "float", "repeat_penalty": "float",
    "presence_penalty": "float", "frequency_penalty": "float", "stop": "list",
    "num_ctx": "int", "num_batch": "int", "num_gpu": "int", "main_gpu": "int", "use_mmap": "boolptr",
    "num_thread": "int",
}


class ModelfileError(ValueError):
    """A Modelfile Ollama's parser refuses (the message is Ollama's)."""


@dataclass
class Command:
    name: str          # "model" for FROM, the parameter's own name for PARAMETER, else the command in lower case
    args: str          # MESSAGE: "role: text"

    def __str__(self) -> str:
        # parser.go: Command.String
        if self.name == "model":
            return f"FROM {self.args}"
        if self.name in ("license", "template", "system", "adapter", "renderer", "parser"):
            return f"{self.name.upper()} {quote(self.args)}"
        if self.name == "message":
            role, _, text = self.args.partition(": ")
            return f"MESSAGE {role} {quote(text)}"
        return f"PARAMETER {self.name} {quote(self.args)}"


@dataclass
class Modelfile:
    commands: list[Command] = field(default_factory=list)

    def __str__(self) -> str:
        return "".join(f"{c}\n" for c in self.commands)


def quote(s: str) -> str:
    if "\n" in s or s.startswith(" ") or s.endswith(" "):
        return f'"""{s}"""' if '"' in s else f'"{s}"'
    return s


def unquote(s: str) -> tuple[str, bool]:
    if s[:3] == '"""':
        if len(s) >= 6 and s[-3:] == '"""':
            return s[3:-3], True
        return "", False
    if s[:1] == '"':
        if len(s) >= 2 and s[-1] == '"':
            return s[1:-1], True
        return "", False
    return s, True


def _alpha(r: str) -> bool:
    return "a" <= r <= "z" or "A" <= r <= "Z"


def _space(r: str) -> bool:
    return r in " \t"


def _newline(r: str) -> bool:
    return r in "\r\n"


def _printable(r: str) -> bool:
    # strconv.IsPrint: letters, marks, numbers, punctuation, symbols and the ASCII space
    return r == " " or r.isprintable()


def _decode(data: bytes | str) -> str:
    # unicode.BOMOverride(UTF8 decoder): a UTF-8 or UTF-16 byte order mark chooses the encoding and is dropped;
    # invalid bytes become U+FFFD
    if isinstance(data, str):
        return data[1:] if data.startswith("\ufeff") else data
    if data.startswith(codecs.BOM_UTF8):
        return data[3:].decode("utf-8", "replace")
    if data.startswith(codecs.BOM_UTF16_LE):
        return data[2:].decode("utf-16-le", "replace")
    if data.startswith(codecs.BOM_UTF16_BE):
        return data[2:].decode("utf-16-be", "replace")
    return data.decode("utf-8", "replace")


NIL, NAME, VALUE, PARAMETER, MESSAGE, COMMENT = range(6)


class _Unexpected(Exception):
    pass


def _step(r: str, state: int) -> tuple[int, str]:
    """parseRuneForState: the next state and the rune to keep ("" for none)."""
    if state == NIL:
        if r == "#":
            return COMMENT, ""
        if _space(r) or _newline(r):
            return NIL, ""
        return NAME, r
    if state == NAME:
        if _alpha(r):
            return NAME, r
        if _space(r):
            return VALUE, ""
        raise ModelfileError(ERR_COMMAND)
    if state == VALUE:
        if _newline(r) or _space(r):
            return NIL, r
        return VALUE, r
    if state in (PARAMETER, MESSAGE):
        if _alpha(r) or (state == PARAMETER and ("0" <= r <= "9" or r == "_")):
            return state, r
        if _space(r):
            return VALUE, ""
        raise _Unexpected()
    # COMMENT
    return (NIL, "") if _newline(r) else (COMMENT, "")


def parse(data: bytes | str) -> Modelfile:
    """parser.ParseFile; raises ModelfileError with Ollama's message."""
    text = _decode(data)
    cmd_name, role, state, line = "", "", NIL, 1
    buf: list[str] = []
    out = Modelfile()
    for r in text:
        if _newline(r):
            line += 1
        try:
            nxt, r = _step(r, state)
        except _Unexpected:
            raise ModelfileError(f"{ERR_EOF}: {''.join(buf)}") from None
        except ModelfileError as e:
            raise ModelfileError(f"(line {line}): {e}") from None
        if nxt != state:
            if state == NAME:
                word = "".join(buf)
                if word.lower() not in COMMANDS:
                    raise ModelfileError(f"(line {line}): {ERR_COMMAND}")
                low = word.lower()
                if low == "from":
                    cmd_name = "model"
                elif low == "parameter":
                    nxt = PARAMETER
                else:
                    if low == "message":
                        nxt = MESSAGE
                    cmd_name = low
            elif state == PARAMETER:
                cmd_name = "".join(buf)
            elif state == MESSAGE:
                if "".join(buf) not in ROLES:
                    raise ModelfileError(f"(line {line}): {ERR_ROLE}")
                role = "".join(buf)
            elif state == VALUE:
                s, ok = unquote("".join(buf).strip(" \t\n\r\v\f\u0085\u00a0"))
                if not ok or _space(r):
                    buf.append(r)
                    continue
                if role:
                    s, role = f"{role}: {s}", ""
                out.commands.append(Command(cmd_name, s))
            buf = []
            state = nxt
        if r and _printable(r):
            buf.append(r)
    if state == VALUE:
        s, ok = unquote("".join(buf).strip(" \t\n\r\v\f\u0085\u00a0"))
        if not ok:
            raise ModelfileError(ERR_EOF)
        if role:
            s = f"{role}: {s}"
        out.commands.append(Command(cmd_name, s))
    elif state not in (NIL, COMMENT):
        raise ModelfileError(ERR_EOF)
    if not any(c.name == "model" for c in out.commands):
        raise ModelfileError(ERR_NO_FROM)
    return out


def parse_file(path: str | os.PathLike) -> Modelfile:
    with open(path, "rb") as f:
        return parse(f.read())


# --- the request a Modelfile makes ----------------------------------------------------------------------------

def _go_parse_int(s: str) -> int | None:
    t = s[1:] if s[:1] in "+-" else s
    if not t or not t.isascii() or not t.isdigit():
        return None
    v = int(s)
    return v if -(1 << 63) <= v < (1 << 63) else None


_FLOAT = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
                    r"|0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+)\Z")
_SPECIAL = re.compile(r"(?:[+-]?(?:inf|infinity)|nan)\Z", re.IGNORECASE)


def _go_parse_float32(s: str) -> float | None:
    """strconv.ParseFloat(s, 32): decimal or hexadecimal, inf / infinity / nan; out of float32's range: None."""
    import numpy as np
    if _SPECIAL.match(s):
        return float(s.lower().replace("infinity", "inf"))
    if not _FLOAT.match(s):
        return None
    v = float.fromhex(s) if "x" in s.lower() else float(s)
    with np.errstate(over="ignore"):
        f = np.float32(v)
    # as the client's JSON spells a float32: its shortest decimal
    return None if np.isinf(f) else float(np.format_float_positional(f, unique=True, trim='-'))


def _go_parse_bool(s: str) -> bool | None:
    if s in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if s in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


def format_param(key: str, value: str):
    """api.FormatParams for one PARAMETER line: the typed value; ModelfileError with Ollama's message."""
    kind = PARAMETER_KINDS.get(key)
    if kind is None:
        raise ModelfileError(f"unknown parameter '{key}'")
    if kind == "int":
        v = _go_parse_int(value)
        if v is None:
            raise ModelfileError(f"invalid int value [{value}]")
        return v
    if kind == "float":
        v = _go_parse_float32(value)
        if v is None:
            raise ModelfileError(f"invalid float value [{value}]")
        return v                             # float32(floatVal)
    if kind == "boolptr":
        v = _go_parse_bool(value)
        if v is None:
            raise ModelfileError(f"invalid bool value [{value}]")
        return v
    return [value]


def expand_path(path: str, relative_dir: str) -> str:
    """parser.go's expandPath: absolute as is, `~` and `~user` from the home directories, else relative to the
    Modelfile's directory."""
    if os.path.isabs(path) or path.startswith("\\"):
        return os.path.abspath(path)
    if path.startswith("~"):
        return os.path.abspath(os.path.expanduser(path))
    return os.path.abspath(os.path.join(relative_dir, path))


def create_request(mf: Modelfile, relative_dir: str = ".", *, warn=None) -> dict:
    """Modelfile.CreateRequest: FROM a file or folder that exists -> `files` {path: None} (the caller hashes and
    uploads them: bankml keeps the path), else `from`; PARAMETERs typed (FormatParams), stop accumulating;
    MESSAGE lines as messages; LICENSE lines as a list."""
    req: dict = {}
    params: dict = {}
    messages, licenses = [], []
    for c in mf.commands:
        if c.name == "model":
            p = expand_path(c.args, relative_dir)
            if os.path.exists(p):
                req.setdefault("files", {})[p] = None
            else:
                req["from"] = c.args
        elif c.name == "adapter":
            req["adapters"] = {expand_path(c.args, relative_dir): None}
        elif c.name in ("template", "system", "renderer", "parser"):
            req[c.name] = c.args
        elif c.name == "license":
            licenses.append(c.args)
        elif c.name == "message":
            role, _, text = c.args.partition(": ")
            messages.append({"role": role, "content": text})
        elif c.name in DEPRECATED:
            if warn is not None:
                warn(f"warning: parameter {c.name} is deprecated")
        else:
            v = format_param(c.name, c.args)
            if isinstance(v, list) and isinstance(params.get(c.name), list):
                params[c.name] = params[c.name] + v
            else:
                params[c.name] = v
    if params:
        req["parameters"] = params
    if messages:
        req["messages"] = messages
    if licenses:
        req["license"] = licenses
    return req
