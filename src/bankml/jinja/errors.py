"""Exceptions of the Jinja engine, with llama.cpp b11192's message texts.

Messages are bytes, as in the reference (a template may hold any byte, and error excerpts cut the source at byte
offsets); `text` gives them as str with invalid UTF-8 kept through 'surrogateescape'.
"""

from __future__ import annotations

from ..errors import BankmlError


class JinjaError(BankmlError):
    """Base class: `message` is the reference's what() string, as bytes."""

    def __init__(self, message: bytes):
        self.message = bytes(message)
        super().__init__(self.text)

    @property
    def text(self) -> str:
        return self.message.decode("utf-8", "surrogateescape")


class TemplateSyntaxError(JinjaError):
    """The template could not be lexed or parsed (llama-server refuses to start with it)."""


class TemplateRuntimeError(JinjaError):
    """Rendering failed: a std::exception inside the reference's runtime (raise_exception() included).

    `wrapped` is True once a statement has added its "While executing ..." frame (the reference's
    rethrown_exception), so that outer statements pass it on unchanged."""

    def __init__(self, message: bytes, wrapped: bool = False):
        self.wrapped = wrapped
        super().__init__(message)


class TemplateNotImplemented(JinjaError):
    """The reference's not_implemented_exception: passed through statements without a source frame."""

    def __init__(self, what: bytes):
        super().__init__(b"NotImplemented: " + what)


class TemplateCrash(JinjaError):
    """Something on which the reference has undefined behaviour or crashes (division by zero in a test, recursion
    deeper than a C++ stack): bankml refuses instead of guessing."""


class BreakSignal(Exception):
    pass


class ContinueSignal(Exception):
    pass


def peak_source(source: bytes, pos: int, max_chars: int = 40) -> bytes:
    """The reference's excerpt around `pos`: 40 bytes either side, newlines shown as U+21B5, then a caret."""
    if not source:
        return b"(no source available)"
    start = pos - max_chars if pos >= max_chars else 0
    end = min(pos + max_chars, len(source))
    if start > len(source):
        raise TemplateRuntimeError(b"basic_string::substr: __pos (which is %d) > this->size() (which is %d)"
                                   % (start, len(source)))
    sub = source[start:end].replace(b"\n", "\u21b5".encode())
    return b"..." + sub + b"...\n" + b" " * (pos - start + 3) + b"^"


def line_col(source: bytes, pos: int) -> bytes:
    line, col = 1, 1
    for c in source[:pos]:
        if c == 10:
            line += 1
            col = 1
        else:
            col += 1
    return b"line %d, column %d" % (line, col)
