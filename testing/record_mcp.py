"""Records llama-server b11192's /tools answers over MCP servers (tests/mcp_echo.py, bankml's own tiny MCP server)
into tests/oracle/server/mcp.json, replayed by tests/test_mcp.py. Developer tool: needs the oracle build.

    PYTHONPATH=. python testing/record_mcp.py [--no-check] [--port-base 8211]

The flags write the interpreter as `$PYTHON` and the echo server as `$ECHO` inside --mcp-servers-json (the
replay puts its own in). Only answers that do not depend on timing are recorded (no timeouts, crashes or
cooldowns: tests/test_mcp.py checks those on bankml alone). Each session is played twice (unless --no-check).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from testing.oracle import LlamaServer  # noqa: E402
from testing.record_server import record_file  # noqa: E402
from testing.server_sessions import flags, get, post  # noqa: E402
import server_replay as sr  # noqa: E402

ECHO = str(REPO / "tests" / "mcp_echo.py")


def mcp_json(servers: dict) -> str:
    return json.dumps({"mcpServers": {name: {"command": "$PYTHON", "args": ["$ECHO", *args], **kw}
                                      for name, (args, kw) in servers.items()}})


def real_flags(fl: list[str]) -> list[str]:
    """The flags with the placeholders replaced by this machine's interpreter and echo server."""
    return [f.replace("$PYTHON", sys.executable).replace("$ECHO", ECHO) for f in fl]


def call(tool, params=None, **kw) -> dict:
    body = {"tool": tool} if params is None else {"tool": tool, "params": params}
    return post("/tools", {**body, **kw.pop("body", {})}, **kw)


def sessions() -> list[dict]:
    servers = mcp_json({"e": ([], {}), "bad": ([], {}), "refuses": (["--init-error"], {}),
                        "none": (["--no-tools"], {}), "get": ([], {})})
    servers = servers.replace('"bad": {"command": "$PYTHON", "args": ["$ECHO"]}',
                              '"bad": {"command": "no_such_command_bankml"}')
    steps = [
        get("/tools"),
        call("e_say", {"text": "hi"}),
        call("e_sum", {"a": 2, "b": 3.5}),
        call("e_oops"),
        call("e_parts", {}),
        call("e_chatty", {}),
        call("e_count", {}),
        call("e_missing", {}),
        call("e_say", {}, body={"stream": True}),
        call("e_say", "a string", headers={"x-tool-cwd": "/tmp"}),
        call("e_say", {"text": 1, "cwd": "x"}, headers={"x-tool-cwd": "/tmp"}),
        call("e_say", None),
        call("refuses_say", {}),
        call("get_info", {}),
        call("get_say", {"text": "from get"}),
        post("/tools", {"params": {}}),
        post("/tools", None, raw="{nope"),
    ]
    return [
        {"name": "mcp_tools", "flags": flags("--mcp-servers-json", servers), "note": "MCP servers without --tools",
         "steps": steps},
        {"name": "mcp_with_builtin", "flags": flags("--tools", "get_info,read_file", "--mcp-servers-json", servers),
         "note": "MCP tools after the built-in ones; get_info (MCP server get, tool info) collides and is skipped",
         "steps": [get("/tools"), call("get_say", {"text": "x"}), call("e_count", {})]},
    ]


def play(sess: dict, model: str, port: int) -> list[dict]:
    base = sr.server_argv(real_flags(sess["flags"]), model)[2:]
    steps = []
    with LlamaServer(model, port=port, base_args=base, log=f"/tmp/record_mcp_{sess['name']}.log") as srv:
        for r in sess["steps"]:
            steps.append({"request": r, "answer": sr.substitute_model(sr.exchange(srv.port, r), model)})
    return steps


def main() -> None:
    record_file("mcp.json", sessions(), __doc__, 8211, play)


if __name__ == "__main__":
    main()
