"""`bankml chat-template`: print the prompt llama-server b11192 would build for a chat request.

    bankml chat-template -m MODEL.gguf < messages.json
    bankml chat-template -m MODEL.gguf --chat-template-file tmpl.jinja --json < body.json
    bankml chat-template -m MODEL.gguf --no-jinja --chat-template llama3 < messages.json   # a built-in template

stdin holds a list of messages or a whole /v1/chat/completions body. The prompt goes to stdout as is (no added
newline), or as `{"prompt": ...}` with --json (what /apply-template answers). Exit codes (bankml.cli's): 0 the
prompt, 1 the model or template file cannot be read, 2 refused: stdin is not JSON, a request llama-server
refuses (its error object on stderr), or a template llama-server would not start with.

`bankml.cli` mounts this with `add_parser(subparsers)`; `python -m bankml.chat.cli` runs it alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .request import ChatRequestError, ServerChatOptions, error_body, parse_chat_request
from ..errors import BankmlError
from ..models.gguf import read_header_file
from .errors import TemplateError, TemplateLoadError
from .template import ChatTemplates


def _model_path(name: str) -> Path:
    p = Path(name)
    if p.exists():
        return p
    models = Path(os.environ.get("BANKML_MODELS", Path.home() / ".local" / "share" / "bankml" / "models"))
    for cand in (models / name, models / (name + ".gguf")):
        if cand.exists():
            return cand
    raise FileNotFoundError(f"{name}: no such model file (nor in {models})")


def configure(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("-m", "--model", required=True, help="GGUF model file (its template and BOS/EOS texts)")
    p.add_argument("--chat-template-file", help="use this template file instead of the model's")
    p.add_argument("--chat-template", help="use this template text instead of the model's ('chatml' = built-in)")
    p.add_argument("--no-jinja", action="store_true",
                   help="llama.cpp's built-in templates (by name, or detected from the template), as --no-jinja")
    p.add_argument("--json", action="store_true", help='print {"prompt": ...} as /apply-template does')
    p.set_defaults(func=run)
    return p


def add_parser(subparsers) -> argparse.ArgumentParser:
    p = subparsers.add_parser("chat-template", help="render a chat request's prompt as llama-server does",
                              description=__doc__.split("\n\n")[0])
    return configure(p)


def _safe(s: str) -> str:
    return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def run(args: argparse.Namespace, stdin=None, stdout=None, stderr=None) -> int:
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        header = read_header_file(_model_path(args.model))
        override = None
        if args.chat_template_file:
            override = Path(args.chat_template_file).read_bytes()
        elif args.chat_template:
            override = args.chat_template
        templates = ChatTemplates.from_gguf(header, override=override)
        if args.no_jinja:
            from .legacy import startup_error, verify
            if override is not None and not verify(override):
                text = override.decode("utf-8", "surrogateescape") if isinstance(override, bytes) else override
                raise TemplateLoadError(startup_error(text).rstrip("\n"))
        else:
            templates.startup_check()
    except TemplateLoadError as e:
        print(f"bankml: llama-server would not start with this template: {_safe(e.message)}", file=stderr)
        return 2
    except OSError as e:
        print(f"bankml: {e}", file=stderr)
        return 1
    except BankmlError as e:
        print(f"bankml: {e}", file=stderr)
        return 2
    try:
        body = json.loads(stdin.read())
    except ValueError as e:
        print(f"bankml: stdin is not JSON: {e}", file=stderr)
        return 2
    if isinstance(body, list):
        body = {"messages": body}
    try:
        req = parse_chat_request(body, templates, ServerChatOptions(use_jinja=not args.no_jinja))
    except ChatRequestError as e:
        err = error_body(e)
        err["error"]["message"] = _safe(err["error"]["message"])
        print(json.dumps(err, ensure_ascii=False), file=stderr)
        return 2
    except TemplateError as e:
        print(f"bankml: {_safe(e.message)}", file=stderr)
        return 2
    if args.json:
        stdout.write(json.dumps({"prompt": _safe(req.prompt)}, ensure_ascii=False) + "\n")
    else:
        stdout.write(_safe(req.prompt))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = configure(argparse.ArgumentParser(prog="bankml chat-template", description=__doc__.split("\n\n")[0]))
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
