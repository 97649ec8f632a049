"""llama.cpp b11192's own Jinja dialect (common/jinja/), re-derived in Python.

llama-server renders chat templates with its own engine, not with Jinja2, and the two disagree in many places
that change prompts (operator precedence, whitespace rules, what `none` or a list prints as, scoping, filters'
argument handling, error texts). bankml therefore runs templates through this engine, which follows the
reference's lexer, parser, runtime and builtins; see docs/template.md for the list of differences from Jinja2.
It is sandboxed by construction: templates reach only the values they are given and the builtins below (no
Python attribute access, no imports, no file or network access).

    prog = Program.parse(source_bytes)
    out = prog.render({"messages": [...], "bos_token": "<s>"})        # bytes

Only the package's own callers need more than `Program`, `probe_caps` and the error classes.
"""

from __future__ import annotations

from . import builtins as _builtins  # noqa: F401  (fills the builtin tables)
from . import values
from .caps import Caps, apply_preserve_reasoning, apply_reasoning_effort, probe
from .errors import (JinjaError, TemplateCrash, TemplateNotImplemented, TemplateRuntimeError,
                     TemplateSyntaxError)
from .parser import parse
from .runtime import Context, execute_program


class Program:
    """A parsed template: `source` is the normalised source that error positions refer to."""

    def __init__(self, statements: list, source: bytes):
        self.statements = statements
        self.source = source

    @classmethod
    def parse(cls, source: bytes | str) -> "Program":
        if isinstance(source, str):
            source = source.encode("utf-8", "surrogateescape")
        stmts, src = parse(source)
        return cls(stmts, src)

    def new_context(self, now: float | None = None, localtime=None) -> Context:
        ctx = Context(self.source)
        if now is not None:
            ctx.current_time = int(now)
        if localtime is not None:
            ctx.localtime = localtime
        return ctx

    def render_context(self, ctx: Context) -> bytes:
        return execute_program(self.statements, ctx)

    def render(self, variables: dict, now: float | None = None, localtime=None) -> bytes:
        """Render with `variables` (JSON-like Python values, set in order). Raises JinjaError subclasses."""
        ctx = self.new_context(now, localtime)
        for k, v in variables.items():
            ctx.set(k.encode() if isinstance(k, str) else k, values.from_json(v))
        return self.render_context(ctx)

    def caps(self) -> Caps:
        return probe(self.statements)


__all__ = ["Program", "Caps", "Context", "JinjaError", "TemplateSyntaxError", "TemplateRuntimeError",
           "TemplateNotImplemented", "TemplateCrash", "apply_preserve_reasoning", "apply_reasoning_effort",
           "values"]
