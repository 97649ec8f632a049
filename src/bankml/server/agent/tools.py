"""llama-server's built-in tools (tools/server/server-tools.cpp): `--tools a,b | all` (or `--agent`) enables them at
GET /tools (their descriptions, in build_tools() order) and POST /tools (a call). Without --tools both answer 403
"this feature is disabled"; an unknown name stops the server at start (`tools setup failed: unknown tool ...`).

    POST /tools {"tool": "read_file", "params": {"path": "a.txt"}, "stream": false}
    headers: x-tool-cwd (the directory relative paths resolve against; the tools' `cwd`), x-resp-type: base64
    (read_file's whole file as base64), x-tool-runtime (an isolate: refused, 501)

Tools: read_file, file_glob_search, grep_search, exec_shell_command (the only one that streams: SSE
`{"chunk": ...}` events, then `{"done": true}`), write_file, edit_file, get_info; each with llama-server's
parameters, defaults, limits, result objects and error texts (docs/tools.md). Errors of the call itself are
format_error_response bodies without the "error" wrapper: 400 for JSON errors (nlohmann's texts), 500 for the
rest; an unknown tool or stream on a tool that does not stream is a 404, whose body cpp-httplib's error handler
replaces with llama-server's "File Not Found".

bankml's departure (issue 19, finding 5): before anything else an enabled /tools asks bankml.server.agent.guard,
which refuses (403) a foreign Origin, a foreign Host on a loopback connection, a cross-site request without
Origin and a call whose body is not `Content-Type: application/json`; `--agent-open` turns that off.

MCP servers (`--mcp-servers-config` / `--mcp-servers-json`, bankml.server.agent.mcp, the app's `state.mcp`) add
their tools after the built-in ones as `<server>_<tool>` (type "mcp", never streamed); a configured MCP server
enables /tools without --tools. A call answers 200 with `{"plain_text_response": ...}` or `{"error": ...}`.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import re
import subprocess
import threading
import time

from starlette.requests import Request
from starlette.routing import Route

from ...cxx import nljson
from ...chat.request import _json_value as json_value
from ...errors import BankmlError
from ...cxx import ecma_regex
from . import guard
from .cors_proxy import ProxyAnswer
from ..http import JSON_TYPE, NOT_FOUND, dumps, error_body, error_response, feature_disabled, json_response

log = logging.getLogger("bankml.server")

#: build_tools()'s order
NAMES = ("read_file", "file_glob_search", "grep_search", "exec_shell_command", "write_file", "edit_file",
         "get_info")

READ_MAX = 16 * 1024
READ_MAX_BASE64 = 32 * 1024 * 1024
SEARCH_MAX = 100
GREP_MAX = 100
EXEC_MAX_OUTPUT = 16 * 1024
EXEC_MAX_TIMEOUT = 60
INFO_MAX_OUTPUT = 4096
INFO_TIMEOUT = 5
LIST_TIMEOUT = 15
GIT_LS_MAX = 8 * 1024 * 1024
NPOS = 2**64 - 1
JUNK_DIRS = frozenset((".git", ".svn", ".hg", "node_modules", "__pycache__", ".venv", "venv", "dist", "build",
                       "target", ".cache", ".idea", ".vscode"))


class ToolsSetupError(BankmlError):
    """server_tools::setup refuses the --tools list (llama-server: "tools setup failed: ...", exit 1)."""


class CallError(Exception):
    """An exception of a call: `status` 400 (a JSON error), 404 (std::invalid_argument) or 500."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def check(enabled: list[str]) -> None:
    for name in enabled:
        if name != "all" and name not in NAMES:
            raise ToolsSetupError(f"tools setup failed: unknown tool \"{name}\". available tools: " + ", ".join(NAMES))


def enabled_tools(cfg) -> list[str]:
    want = set(cfg.server_tools)
    return [n for n in NAMES if n in want or "all" in want]


# ---------------------------------------------------------------- definitions (get_definition, in order)

def _p(kind: str, text: str) -> dict:
    return {"type": kind, "description": text}


def _fn(name: str, text: str, props: dict, required: list | None) -> dict:
    params = {"type": "object", "properties": props}
    if required is not None:
        params["required"] = required
    return {"type": "function", "function": {"name": name, "description": text, "parameters": params}}


_GLOB_TEXT = (
    "Recursively search for files matching a glob pattern under a directory. "
    "Automatically skips files ignored by .gitignore (when the directory is inside a git repo) "
    "and common junk directories (.git, node_modules, build, dist, etc.) otherwise. "
    "A pattern with no '/' (e.g. \"*.cpp\") matches the file's basename at any depth. "
    "A pattern containing '/' matches the full relative path; unless already anchored with "
    "\"**/\" or a leading '/', it is automatically prefixed with \"**/\". "
    "Use type=\"dir\" or \"all\" to also list directories; directory entries are suffixed with '/' in the output. "
    "Note: directory listings do not apply .gitignore filtering.")
_GREP_TEXT = (
    "Search for a pattern in files under a path. Returns matching lines with file paths "
    "(and, unless searching a single file, paths relative to the given directory). "
    "Automatically skips files ignored by .gitignore (when the directory is inside a git repo) "
    "and common junk directories (.git, node_modules, build, dist, etc.) otherwise. "
    "include/exclude: a pattern with no '/' matches the basename at any depth; a pattern "
    "containing '/' matches the full relative path (auto-anchored with \"**/\" unless already anchored).")
_EDIT_TEXT = (
    "Edit a file using exact text replacement. Each edits[].old_text must be unique in the file "
    "and is matched against the original content, not incrementally. Merge nearby changes into "
    "one edit instead of overlapping edits. Use write_file to replace the whole file.")

DEFINITIONS = {
    "read_file": _fn("read_file", "Read the contents of a file. Optionally specify a 1-based line range. "
                     "If append_loc is true, each line is prefixed with its line number (e.g. \"1\u2192...\").", {
                         "path": _p("string", "Path to the file"),
                         "start_line": _p("integer", "First line to read, 1-based (default: 1)"),
                         "end_line": _p("integer", "Last line to read, 1-based inclusive (default: end of file)"),
                         "append_loc": _p("boolean", "Prefix each line with its line number")}, ["path"]),
    "file_glob_search": _fn("file_glob_search", _GLOB_TEXT, {
        "path": _p("string", "Base directory to search in"),
        "include": _p("string", "Glob pattern for files to include (e.g. \"*.cpp\" or \"src/**/*.cpp\"). Default: **"),
        "exclude": _p("string", "Glob pattern for files to exclude"),
        "type": _p("string", "Entry type to return: \"file\" (default), \"dir\" or \"all\""),
        "max_depth": _p("integer", "Maximum depth to descend into subdirectories (default: 0 = unlimited; "
                                   "1 = direct children only)"),
        "limit": _p("integer", f"Maximum number of results to return, capped at {SEARCH_MAX} (default {SEARCH_MAX})")},
        ["path"]),
    "grep_search": _fn("grep_search", _GREP_TEXT, {
        "path": _p("string", "File or directory to search in"),
        "pattern": _p("string", "Pattern to search for (regular expression unless literal is true)"),
        "include": _p("string", "Glob pattern to filter files (default: **)"),
        "exclude": _p("string", "Glob pattern to exclude files"),
        "return_line_numbers": _p("boolean", "If true, include line numbers in results"),
        "literal": _p("boolean", "Treat pattern as a literal string instead of a regular expression (default: false)"),
        "ignore_case": _p("boolean", "Case-insensitive search (default: false)"),
        "context_lines": _p("integer", "Number of lines of context to show before and after each match (default: 0)")},
        ["path", "pattern"]),
    "exec_shell_command": _fn("exec_shell_command",
                              "Execute a shell command and return its output (stdout and stderr combined).", {
                                  "command": _p("string", "Shell command to execute"),
                                  "timeout": _p("integer", f"Timeout in seconds (default 10, max {EXEC_MAX_TIMEOUT})"),
                                  "max_output_size": _p("integer",
                                                        f"Maximum output size in bytes (default {EXEC_MAX_OUTPUT})")},
                              ["command"]),
    "write_file": _fn("write_file", "Write content to a file, creating it (including parent directories) if it does "
                      "not exist. May use with edit_file for more complex edits.", {
                          "path": _p("string", "Path of the file to write"),
                          "content": _p("string", "Content to write")}, ["path", "content"]),
    "edit_file": _fn("edit_file", _EDIT_TEXT, {
        "path": _p("string", "Path to the file to edit"),
        "edits": {"type": "array", "description": "One or more exact text replacements to apply", "items": {
            "type": "object", "properties": {
                "old_text": _p("string", "Exact text to find; must be unique in the file and must not overlap with "
                                         "other edits"),
                "new_text": _p("string", "Text to replace old_text with")},
            "required": ["old_text", "new_text"]}}}, ["path", "edits"]),
    "get_info": _fn("get_info", "Returns runtime info: the OS name/version and the current working directory", {},
                    None),
}
_DISPLAY = {"read_file": "Read file", "file_glob_search": "File search", "grep_search": "Grep search",
            "exec_shell_command": "Execute shell command", "write_file": "Write file", "edit_file": "Edit file",
            "get_info": "Get Runtime Info"}
_WRITES = {"exec_shell_command", "write_file", "edit_file"}
STREAMS = {"exec_shell_command"}


def tool_json(name: str) -> dict:
    return {"display_name": _DISPLAY[name], "tool": name, "type": "server",
            "permissions": {"write": name in _WRITES}, "uses_cwd": True, "definition": DEFINITIONS[name]}


# ---------------------------------------------------------------- parameters (json_value and at().get<T>())

def _value(params, key: str, default, kind: str):
    """json_value: the default when missing, null or of a type get<T> refuses (chat_request's json_value)."""
    return json_value(params, key, default, {"str": str, "bool": bool, "int": int}[kind])


def _at_str(obj, key: str) -> str:
    try:
        return nljson.get_str(nljson.at(obj, key))
    except nljson.NLError as e:
        raise CallError(str(e), 400) from None


def _b(s: str) -> bytes:
    """A JSON string as the bytes nlohmann holds (raw UTF-8; bytes kept as surrogates go back as they were)."""
    return s.encode("utf-8", "surrogateescape")


def _s(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


# ---------------------------------------------------------------- tools_io_basic

class HostIO:
    """tools_io_basic: paths resolved against `cwd` (the x-tool-cwd header) or the server's working directory."""

    def __init__(self, cwd: str = ""):
        self.cwd = cwd

    def resolve(self, path: str) -> str:
        p = path
        if p.startswith("~") and (len(p) == 1 or p[1] in "/\\"):
            home = os.environ.get("HOME")
            if home:
                p = home + p[1:]
        if not p.startswith("/"):
            base = self.cwd
            if not base:
                try:
                    base = os.getcwd()
                except OSError:
                    return p
            p = base.rstrip("/") + "/" + p if base else p
        return _lexically_normal(p)

    def is_file(self, path: str) -> bool:
        return os.path.isfile(_b(self.resolve(path)))

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(_b(self.resolve(path)))

    def file_size(self, path: str) -> int | None:
        full = _b(self.resolve(path))
        if not os.path.isfile(full):
            return None
        try:
            return os.path.getsize(full)
        except OSError:
            return None

    def read(self, path: str) -> bytes | None:
        try:
            with open(_b(self.resolve(path)), "rb") as f:
                return f.read()
        except OSError:
            return None

    def write(self, path: str, content: bytes) -> bool:
        full = _b(self.resolve(path))
        parent = os.path.dirname(full)
        try:
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(full, "wb") as f:
                f.write(content)
            return True
        except OSError:
            return False

    def run(self, args, max_output: int, timeout: int, on_chunk=None):
        return run_subprocess(args, max_output, timeout, on_chunk, self.cwd)

    def list_entries(self, base: str, max_depth: int, kind: str):
        """(entries [(rel, is_dir)], err, truncated), as tools_io_basic::list_entries: git ls-files for files in
        a repository, else the walker (readdir order, depth first from the last directory found)."""
        if not os.path.isdir(_b(base)):
            return [], "path does not exist or is not a directory", False
        deadline = time.monotonic() + LIST_TIMEOUT
        if kind == "file":
            out, code, timed_out = self.run(["git", "-C", base, "ls-files", "--cached", "--others",
                                             "--exclude-standard"], GIT_LS_MAX, LIST_TIMEOUT)
            if code == 0 and not timed_out:
                entries = []
                for line in _b(out).split(b"\n"):
                    if line.endswith(b"\r"):
                        line = line[:-1]
                    if not line:
                        continue
                    line = line.replace(b"\\", b"/")
                    if max_depth > 0 and 1 + line.count(b"/") > max_depth:
                        continue
                    if os.path.isfile(_b(base).rstrip(b"/") + b"/" + line):
                        entries.append((_s(line), False))
                return entries, "", False
        return self._walk(base, max_depth, kind, deadline)

    @staticmethod
    def _walk(base: str, max_depth: int, kind: str, deadline: float):
        result, truncated = [], False
        stack = [(_b(base), b"", 0)]
        while stack:
            if time.monotonic() >= deadline:
                return result, "", True
            d, rel, depth = stack.pop()
            try:
                it = os.scandir(d)
            except PermissionError:
                continue
            except OSError:
                truncated = True
                continue
            with it:
                for entry in it:
                    name = entry.name
                    r = rel + b"/" + name if rel else name
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        continue
                    if is_dir:
                        if kind in ("dir", "all"):
                            result.append((_s(r), True))
                        if _s(name) in JUNK_DIRS:
                            continue
                        if not entry.is_symlink() and (max_depth == 0 or depth + 1 < max_depth):
                            stack.append((entry.path, r, depth + 1))
                    else:
                        try:
                            regular = entry.is_file()
                        except OSError:
                            regular = False
                        if regular and kind in ("file", "all"):
                            result.append((_s(r), False))
        return result, "", truncated


def _lexically_normal(p: str) -> str:
    """fs::path::lexically_normal for an absolute POSIX path, then a trailing separator dropped (not the root)."""
    parts = []
    for part in p.split("/")[1:]:
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def run_subprocess(args, max_output: int, timeout: int, on_chunk=None, cwd: str = ""):
    """run_subprocess: stdout and stderr together, stdin closed, killed (SIGKILL) past `timeout` seconds (checked
    every 100 ms), output cut at `max_output` bytes (+ "\\n[output truncated]"); (output, exit code, timed out).
    A child killed by a signal exits 1 (subprocess.h's EXIT_FAILURE); one that cannot start: -1."""
    try:
        proc = subprocess.Popen([_b(a) for a in args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, cwd=_b(cwd) if cwd else None)
    except (OSError, ValueError):
        return "failed to spawn process", -1, False
    done = threading.Event()
    timed_out = threading.Event()

    def watch():
        deadline = time.monotonic() + timeout
        while not done.is_set():
            if time.monotonic() >= deadline:
                timed_out.set()
                proc.kill()
                return
            done.wait(0.1)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    out, truncated = bytearray(), False
    fd = proc.stdout.fileno()
    while True:
        try:
            buf = os.read(fd, 4096)
        except InterruptedError:
            continue
        except OSError:
            break
        if not buf:
            break
        if truncated:
            continue
        if len(out) + len(buf) <= max_output:
            out += buf
            if on_chunk is not None and not on_chunk(bytes(buf)):
                proc.kill()
                break
        else:
            rest = max_output - len(out)
            out += buf[:rest]
            if on_chunk is not None and rest > 0:
                on_chunk(bytes(buf[:rest]))
            truncated = True
    done.set()
    t.join()
    proc.stdout.close()
    code = proc.wait()
    if code < 0:
        code = 1
    text = bytes(out) + (b"\n[output truncated]" if truncated else b"")
    return _s(text), code, timed_out.is_set()


# ---------------------------------------------------------------- glob (common/common.cpp glob_match)

def _sc(b: int) -> int:
    return b - 256 if b >= 128 else b


def _class_match(c: int, pat: bytes, start: int, end: int) -> bool:
    negated = False
    if start < end + 1 and pat[start:start + 1] == b"!":
        negated = True
        start += 1
    if pat[start:start + 1] in (b"]", b"-"):
        if start < end and pat[start] == c:
            return not negated
        start += 1
    matched = False
    while start < end:
        if start + 2 < end and pat[start + 1] == 0x2D and pat[start + 2] != 0x5D:
            if _sc(pat[start]) <= _sc(c) <= _sc(pat[start + 2]):
                matched = True
                break
            start += 3
        else:
            if pat[start] == c:
                matched = True
                break
            start += 1
    return not matched if negated else matched


def glob_match(pat: bytes, s: bytes, i: int = 0, j: int = 0) -> bool:
    while True:
        if i >= len(pat):
            return j >= len(s)
        if pat[i:i + 2] == b"**":
            p = i + 2
            while True:
                if glob_match(pat, s, p, j):
                    return True
                if j >= len(s):
                    return False
                j += 1
        if pat[i] == 0x2A:
            p = i + 1
            while j < len(s) and s[j] != 0x2F:
                if glob_match(pat, s, p, j):
                    return True
                j += 1
            i = p
            continue
        if pat[i] == 0x3F and j < len(s) and s[j] != 0x2F:
            i, j = i + 1, j + 1
            continue
        if pat[i] == 0x5B:
            end = i + 1
            if pat[end:end + 1] in (b"]", b"-"):
                end += 1
            while end < len(pat) and pat[end] != 0x5D:
                end += 1
            if end < len(pat):
                if j >= len(s):
                    return False
                if not _class_match(s[j], pat, i + 1, end):
                    return False
                i, j = end + 1, j + 1
                continue
            if j < len(s) and s[j] == 0x5B:
                i, j = i + 1, j + 1
                continue
            return False
        if j < len(s) and pat[i] == s[j]:
            i, j = i + 1, j + 1
            continue
        return False


def path_glob_match(pattern: str, rel: str) -> bool:
    pat, r = _b(pattern), _b(rel)
    if b"/" not in pat:
        return glob_match(pat, r.rsplit(b"/", 1)[-1])
    if pat == b"**" or pat.startswith(b"**/") or pat.startswith(b"/"):
        return glob_match(pat, r)
    return glob_match(b"**/" + pat, r)


# ---------------------------------------------------------------- the tools

def _getlines(content: bytes) -> list[bytes]:
    """std::getline over the content: lines at '\\n', no empty last line after a final newline."""
    lines = content.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def t_read_file(params, io: HostIO, st=None):
    path = _at_str(params, "path")
    start = _value(params, "start_line", 1, "int")
    end = _value(params, "end_line", -1, "int")
    loc = _value(params, "append_loc", False, "bool")
    as_b64 = _value(params, "resp_type", "", "str") == "base64"
    size = io.file_size(path)
    if size is None:
        return {"error": "cannot stat file: " + path}
    if as_b64:
        if size > READ_MAX_BASE64:
            return {"error": f"file too large ({size} bytes, max {READ_MAX_BASE64})"}
        content = io.read(path)
        if content is None:
            return {"error": "failed to open file: " + path}
        return {"base64": base64.b64encode(content).decode(), "size_bytes": len(content)}
    if size > READ_MAX and end == -1:
        return {"error": f"file too large ({size} bytes, max {READ_MAX}). Use start_line/end_line to read a portion."}
    content = io.read(path)
    if content is None:
        return {"error": "failed to open file: " + path}
    out = bytearray()
    for n, line in enumerate(_getlines(content), 1):
        if n < start:
            continue
        if end != -1 and n > end:
            break
        piece = (str(n).encode() + "\u2192".encode() if loc else b"") + line + b"\n"
        if len(out) + len(piece) > READ_MAX:
            out += b"[output truncated]"
            break
        out += piece
    return {"plain_text_response": _s(bytes(out))}


def t_file_glob_search(params, io: HostIO, st=None):
    path = _at_str(params, "path")
    base = io.resolve(path)
    include = _value(params, "include", "**", "str")
    exclude = _value(params, "exclude", "", "str")
    kind = _value(params, "type", "file", "str")
    max_depth = max(0, _value(params, "max_depth", 0, "int"))
    limit = _value(params, "limit", SEARCH_MAX, "int")
    if limit < 1:
        return {"error": f"invalid limit: {limit} (expected 1 or more)"}
    limit = min(limit, SEARCH_MAX)
    if kind not in ("file", "dir", "all"):
        return {"error": f"invalid type: {kind} (expected \"file\", \"dir\" or \"all\")"}
    entries, err, truncated = io.list_entries(base, max_depth, kind)
    if err:
        return {"error": err + ": " + path}
    matches = [(r, d) for r, d in entries
               if path_glob_match(include, r) and not (exclude and path_glob_match(exclude, r))]
    shown = matches[:limit]
    text = "".join(r + ("/" if d else "") + "\n" for r, d in shown)
    text += f"\n---\nTotal matches: {len(matches)}\n"
    if len(matches) > len(shown):
        text += (f"[{len(shown)} results limit reached ({len(matches)} total matches). Refine the glob pattern to "
                 "narrow the search.]\n")
    if truncated:
        text += "[results truncated: time budget or unreadable directory]\n"
    return {"plain_text_response": text, "entries": [{"path": r, "type": "dir" if d else "file"} for r, d in shown],
            "base": base}


GREP_REFUSED = ("grep_search with this regular expression is not reproduced by bankml (llama-server reads it with "
                "std::regex ECMAScript)")
_RE_SPECIALS = "\\^$.|?*+()[]{}"


def t_grep_search(params, io: HostIO, st=None):
    path = _at_str(params, "path")
    pat = _at_str(params, "pattern")
    include = _value(params, "include", "**", "str")
    exclude = _value(params, "exclude", "", "str")
    show_num = _value(params, "return_line_numbers", False, "bool")
    literal = _value(params, "literal", False, "bool")
    icase = _value(params, "ignore_case", False, "bool")
    ctx = max(0, _value(params, "context_lines", 0, "int"))
    src = "".join("\\" + c if c in _RE_SPECIALS else c for c in pat) if literal else pat
    try:
        py = ecma_regex.translate(_b(src))
    except ecma_regex.RegexError as e:
        return {"error": "invalid regex: " + str(e)}
    try:
        rx = re.compile(py, re.IGNORECASE if icase else 0) if py is not None else None
    except re.error:
        rx = None
    if rx is None:
        raise BankmlError(GREP_REFUSED)
    files = []
    absolute = io.resolve(path)
    if io.is_file(absolute):
        files.append((absolute, path))
    elif io.is_dir(absolute):
        entries, err, _ = io.list_entries(absolute, 0, "file")
        if err:
            return {"error": err + ": " + path}
        for r, _d in entries:
            if path_glob_match(include, r) and not (exclude and path_glob_match(exclude, r)):
                files.append((absolute.rstrip("/") + "/" + r, r))
    else:
        return {"error": "path does not exist: " + path}
    out, total, limit_reached = [], 0, False
    show_num = show_num or ctx > 0
    for fpath, shown in files:
        if limit_reached:
            break
        content = io.read(fpath)
        if content is None:
            continue
        lines = _getlines(content)
        name = _b(shown)
        for i, line in enumerate(lines):
            if total >= GREP_MAX:
                limit_reached = True
                break
            if not rx.search(line):
                continue
            lo, hi = (max(0, i - ctx), min(len(lines) - 1, i + ctx)) if ctx > 0 else (i, i)
            for j in range(lo, hi + 1):
                mark = b":" if j == i else b"-"
                out.append(name + mark + ((str(j + 1).encode() + mark) if show_num else b"") + lines[j] + b"\n")
            if ctx > 0:
                out.append(b"--\n")
            total += 1
    text = b"".join(out) + f"\n---\nTotal matches: {total}\n".encode()
    if limit_reached:
        text += f"[{GREP_MAX} matches limit reached. Narrow the path/pattern/include to see more.]\n".encode()
    return {"plain_text_response": _s(text)}


def t_exec_shell_command(params, io: HostIO, st=None):
    command = _at_str(params, "command")
    timeout = min(_value(params, "timeout", 10, "int"), EXEC_MAX_TIMEOUT)
    max_out = _value(params, "max_output_size", EXEC_MAX_OUTPUT, "int")
    max_out = min(max_out if max_out >= 0 else 1 << 64, EXEC_MAX_OUTPUT)
    args = ["sh", "-c", command]
    if st is not None:
        out, code, timed_out = io.run(args, max_out, timeout, lambda chunk: st.push(_s(chunk)))
        if not st.alive():
            return None
        st.push(f"\n[exit code: {code}]" + (" [exit due to timed out]" if timed_out else ""))
        return None
    out, code, timed_out = io.run(args, max_out, timeout)
    return {"plain_text_response": out + f"\n[exit code: {code}]" + (" [exit due to timed out]" if timed_out else "")}


def t_write_file(params, io: HostIO, st=None):
    path = _at_str(params, "path")
    content = _b(_at_str(params, "content"))
    if not io.write(path, content):
        return {"error": "failed to write file: " + path}
    return {"result": "file written successfully", "path": path, "bytes": len(content)}


_FUZZY = ([("\u2018\u2019\u201a\u201b", "'"), ("\u201c\u201d\u201e\u201f", '"'),
           ("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
           ("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " ")])


def _fuzzy_line(line: bytes) -> bytes:
    line = line.rstrip(b" \t\r")
    for chars, to in _FUZZY:
        for ch in chars:
            line = line.replace(ch.encode(), to.encode())
    return line


def _fuzzy(content: bytes) -> bytes:
    return b"\n".join(_fuzzy_line(x) for x in content.split(b"\n"))


def _split_keep(content: bytes) -> list[bytes]:
    out, start = [], 0
    while start < len(content):
        nl = content.find(b"\n", start)
        if nl < 0:
            out.append(content[start:])
            break
        out.append(content[start:nl + 1])
        start = nl + 1
    return out


def _count(content: bytes, needle: bytes) -> int:
    if not needle:
        return 0
    n = pos = 0
    while (pos := content.find(needle, pos)) >= 0:
        n += 1
        pos += len(needle)
    return n


def _apply(content: bytes, reps, offset: int) -> bytes:
    for _i, idx, length, new in reversed(reps):
        local = idx - offset
        content = content[:local] + new + content[local + length:]
    return content


def _apply_keeping_lines(original: bytes, base: bytes, reps) -> bytes:
    orig_lines = _split_keep(original)
    spans, off = [], 0
    for line in _split_keep(base):
        spans.append((off, off + len(line)))
        off += len(line)
    groups = []
    for rep in reps:
        start_r, end_r = rep[1], rep[1] + rep[2]
        first = next((i for i, (a, b) in enumerate(spans) if a <= start_r < b), None)
        lo = hi = 0
        if first is not None:
            last = first
            while last < len(spans) and spans[last][1] < end_r:
                last += 1
            if last < len(spans):
                lo, hi = first, last + 1
        if groups and lo < groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], hi)
            groups[-1][2].append(rep)
        else:
            groups.append([lo, hi, [rep]])
    out, k = bytearray(), 0
    for lo, hi, grp in groups:
        out += b"".join(orig_lines[k:lo])
        a, b = spans[lo][0], spans[hi - 1][1]
        out += _apply(base[a:b], grp, a)
        k = hi
    out += b"".join(orig_lines[k:])
    return bytes(out)


def t_edit_file(params, io: HostIO, st=None):
    path = _at_str(params, "path")
    try:
        edits_json = nljson.at(params, "edits")
    except nljson.NLError as e:
        raise CallError(str(e), 400) from None
    if not isinstance(edits_json, list) or not edits_json:
        return {"error": "\"edits\" must be a non-empty array"}
    edits = []
    for e in edits_json:
        old, new = _b(_at_str(e, "old_text")), _b(_at_str(e, "new_text"))
        if not old:
            return {"error": f"edits[{len(edits)}].old_text must not be empty"}
        edits.append((old, new))
    original = io.read(path)
    if original is None:
        return {"error": "failed to open file: " + path}
    any_fuzzy = False
    for i, (old, _new) in enumerate(edits):
        if old in original:
            continue
        if _fuzzy(old) not in _fuzzy(original):
            return {"error": f"could not find edits[{i}].old_text in {path}, it must match the file's current "
                             "content exactly"}
        any_fuzzy = True
    base = _fuzzy(original) if any_fuzzy else original
    matched = []
    for i, (old, new) in enumerate(edits):
        needle = _fuzzy(old) if any_fuzzy else old
        n = _count(_fuzzy(original), _fuzzy(old))
        if n > 1:
            return {"error": f"found {n} occurrences of edits[{i}].old_text in {path}, it must be unique"}
        idx = base.find(needle)
        matched.append((i, idx if idx >= 0 else NPOS, len(needle), new))
    matched.sort(key=lambda m: m[1])
    for a, b in zip(matched, matched[1:]):
        if (a[1] + a[2]) % (NPOS + 1) > b[1]:
            return {"error": f"edits[{a[0]}] and edits[{b[0]}] overlap in {path}; merge them into one edit or "
                             "target disjoint regions"}
    new_content = _apply_keeping_lines(original, base, matched) if any_fuzzy else _apply(base, matched, 0)
    if new_content == original:
        return {"error": "no changes made: the replacement(s) produced identical content"}
    if not io.write(path, new_content):
        return {"error": "failed to write file: " + path}
    return {"result": "file edited successfully", "path": path, "edits_applied": len(matched)}


def t_get_info(params, io: HostIO, st=None):
    out, code, timed_out = io.run(["uname", "-a"], INFO_MAX_OUTPUT, INFO_TIMEOUT)
    os_info = out.strip(" \t\n\r\f\v") if code == 0 and not timed_out else "unknown"
    cwd = _value(params, "cwd", "", "str")
    if not cwd:
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = ""
    return {"os": os_info, "cwd": cwd}


TOOLS = {"read_file": t_read_file, "file_glob_search": t_file_glob_search, "grep_search": t_grep_search,
         "exec_shell_command": t_exec_shell_command, "write_file": t_write_file, "edit_file": t_edit_file,
         "get_info": t_get_info}


# ---------------------------------------------------------------- the routes

class _Stream:
    """server_tool::stream: pushes chunks from the worker thread to the SSE answer."""

    def __init__(self, loop, queue, alive):
        self.loop, self.queue, self.alive_flag = loop, queue, alive

    def alive(self) -> bool:
        return self.alive_flag.is_set()

    def push(self, chunk: str) -> bool:
        if chunk:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, {"chunk": chunk})
        return self.alive()


def _call_error(message: str, status: int):
    """handle_post's error answer: format_error_response without the "error" wrapper. A 404 (unknown tool,
    stream refused) then goes through cpp-httplib's error handler, which puts llama-server's 404 body instead."""
    from starlette.responses import Response
    if status == 404:
        return Response(NOT_FOUND, status_code=404, media_type=JSON_TYPE)
    etype = "invalid_request_error" if status == 400 else "server_error"
    return Response(dumps(error_body(message, status, etype)["error"]), status_code=status, media_type=JSON_TYPE)


def _header(request: Request, name: str) -> str:
    return request.headers.get(name, "").encode("latin-1").decode("utf-8", "surrogateescape")


async def _sse(queue, alive):
    try:
        while True:
            ev = await queue.get()
            yield b"data: " + dumps(ev) + b"\n\n"
            if ev.get("done"):
                return
    finally:
        alive.clear()


def mcp_tool_json(d) -> dict:
    """server_mcp_tool::to_json: an MCP tool as /tools lists it (`<server>_<tool>`, type mcp, its input schema
    as the parameters, {} when it has none or it is not an object)."""
    schema = d.input_schema if isinstance(d.input_schema, dict) else {}
    return {"display_name": d.full_name, "tool": d.full_name, "type": "mcp", "permissions": {"write": False},
            "uses_cwd": False, "definition": {"type": "function", "function": {
                "name": d.full_name, "description": d.description, "parameters": schema}}}


def mcp_listed(mgr, names: list[str]) -> dict:
    """The MCP tools /tools serves after the built-in ones, by `<server>_<tool>`: a name taken by a built-in tool
    or an earlier MCP tool is skipped (server_tools::setup, with its warning)."""
    out: dict = {}
    if mgr is None:
        return out
    for d in mgr.tools():
        if d.full_name in names or d.full_name in out:
            log.warning('MCP tool "%s" from server "%s" collides with an existing tool, skipping', d.full_name,
                        d.server)
            continue
        out[d.full_name] = d
    return out


async def tools_route(request: Request):
    cfg = request.app.state.cfg
    mgr = getattr(request.app.state, "mcp", None)
    if not cfg.server_tools and (mgr is None or mgr.empty):
        return feature_disabled()
    refused = guard.refusal(request, "/tools")     # bankml's: a foreign page's request, before any body is read
    if refused is not None:
        return refused
    names = enabled_tools(cfg)
    mcp_tools = mcp_listed(mgr, names)
    if request.method != "POST":
        return json_response([tool_json(n) for n in names] + [mcp_tool_json(d) for d in mcp_tools.values()])
    try:
        raw = await request.body()
        try:
            body = nljson.loads(raw)
        except nljson.JSONParseError as e:
            raise CallError(str(e), 400) from None
        try:
            tool = nljson.get_str(nljson.at(body, "tool"))
            params = nljson.value(body, "params", {})
            stream = nljson.value(body, "stream", False)
            if not isinstance(stream, bool):
                raise nljson.type_must_be("boolean", stream)
        except nljson.NLError as e:
            raise CallError(str(e), 400) from None
        params = _with_headers(params, request)
        if tool not in names and tool not in mcp_tools:
            raise CallError(f"unknown tool \"{tool}\"", 404)
        if stream and tool not in STREAMS:
            raise CallError(f"tool \"{tool}\" does not support stream = true", 404)
        if tool in mcp_tools:
            # server_mcp_tool::invoke: the params (headers applied) are the call's arguments; a JSON type error
            # in the server's reply is a common_json_error (400)
            d = mcp_tools[tool]
            try:
                result = await asyncio.get_running_loop().run_in_executor(None, mgr.call, d.server, d.name, params)
            except nljson.NLError as e:
                raise CallError(str(e), 400) from None
            return json_response(result)
        io = _io(params)
        fn = TOOLS[tool]
        if not stream:
            result = await asyncio.get_running_loop().run_in_executor(None, fn, params, io)
            return json_response(result)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        alive = threading.Event()
        alive.set()
        st = _Stream(loop, queue, alive)

        def work():
            done = {"done": True}
            try:
                fn(params, io, st)
            except Exception as e:           # the tool's exception ends the stream with its text
                done["error"] = str(e) or "An unknown error occurred"
            loop.call_soon_threadsafe(queue.put_nowait, done)

        loop.run_in_executor(None, work)
        return ProxyAnswer(200, [(b"X-Accel-Buffering", b"no")], "text/event-stream", _sse(queue, alive))
    except CallError as e:
        return _call_error(str(e), e.status)
    except BankmlError as e:
        return error_response(str(e), 501)
    except Exception as e:                   # what the tool threw: 500 with its text
        return _call_error(str(e), 500)


def _with_headers(params, request: Request):
    """x-tool-cwd / x-tool-runtime / x-resp-type replace the params' cwd / runtime / resp_type."""
    if isinstance(params, dict):
        params = {k: v for k, v in params.items() if k not in ("cwd", "runtime", "resp_type")}
    for header, key in (("x-tool-cwd", "cwd"), ("x-tool-runtime", "runtime"), ("x-resp-type", "resp_type")):
        v = _header(request, header)
        if v:
            if not isinstance(params, dict):
                if params is None:
                    params = {}
                else:
                    raise CallError("[json.exception.type_error.305] cannot use operator[] with a string argument "
                                    f"with {nljson.type_name(params)}", 400)
            params[key] = v
    return params


def _io(params) -> HostIO:
    """make_tools_io: the host, or an isolate named by the runtime (its spec's errors as llama-server's; a valid
    isolate is refused: bankml runs tools on the host only)."""
    runtime = _value(params, "runtime", "", "str")
    if not runtime:
        return HostIO(_value(params, "cwd", "", "str"))
    for engine in ("docker", "podman"):
        if runtime.startswith(engine + "-container:"):
            cid = runtime[len(engine) + 11:]
            if not (cid and cid[0].isascii() and cid[0].isalnum()
                    and all(c.isascii() and (c.isalnum() or c in ".-_") for c in cid)):
                raise RuntimeError("invalid container id: " + cid)
            break
        if runtime.startswith(engine + ":"):
            raise RuntimeError("tool runtime must name a running container: " + runtime)
    else:
        if not runtime.startswith("ssh:"):
            raise RuntimeError("unknown tool runtime: " + runtime)
        target = runtime[4:]
        if not target or target[0] == "-" or not all(c.isascii() and (c.isalnum() or c in ".-_@") for c in target):
            raise RuntimeError("invalid ssh target: " + target)
    raise BankmlError("tool runtimes (x-tool-runtime) are not reproduced by bankml")


routes = [Route("/tools", tools_route, methods=["GET", "POST"])]
