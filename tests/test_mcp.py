"""MCP servers (bankml.server.agent.mcp) and their tools at /tools, against tests/mcp_echo.py (a tiny MCP server
of our own).

- llama-server b11192's /tools answers over the same MCP servers (tests/oracle/server/mcp.json, recorded by
  testing/record_mcp.py: listings, results, isError, content parts, noise before a reply, unknown tools, stream
  refused, params that are not an object, a server that refuses initialize, a name colliding with a built-in
  tool, bad bodies) replayed on bankml-serve: identical.
- What depends on timing, on bankml alone: timeouts and stale replies, respawn after a crash, the cooldown,
  cancel at shutdown, the process group killed; the config's entries and errors.
- llama.cpp's own test_mcp_servers.py runs under testing/llama_server_suite.py (21 of 21).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import server_replay as sr
from bankml.server.agent import mcp

ECHO = str(Path(__file__).parent / "mcp_echo.py")
sys.path.insert(0, str(Path(__file__).parent))
import mcp_echo  # noqa: E402


def server(name="e", *flags, **kw) -> mcp.ServerConfig:
    return mcp.ServerConfig(name, sys.executable, [ECHO, *flags], **kw)


@pytest.fixture
def manager():
    made = []

    def make(*configs):
        m = mcp.Manager(list(configs))
        made.append(m)
        m.start()
        return m
    yield make
    for m in made:
        m.close()


# --- the config -------------------------------------------------------------------------------------------------

def test_config_entries():
    text = json.dumps({"mcpServers": {
        "a": {"command": "x", "args": ["1", "2"], "env": {"K": "v"}, "cwd": "/tmp", "timeout_ms": 250.9},
        "b": {"args": ["no command"]},
        "c": {"command": "y", "timeout_ms": True, "args": "ignored", "env": []}}})
    assert mcp.parse_config(text) == [mcp.ServerConfig("a", "x", ["1", "2"], {"K": "v"}, "/tmp", 250),
                                      mcp.ServerConfig("c", "y", timeout_ms=1)]
    assert mcp.parse_config("[1]") == mcp.parse_config('{"mcpServers": []}') == []


@pytest.mark.parametrize("text, message", [
    ("not valid json", "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error while "
                       "parsing value - invalid literal; last read: 'no'"),
    ('{"mcpServers": {"a": 5}}', "[json.exception.type_error.306] cannot use value() with number"),
    ('{"mcpServers": {"a": {"command": 5}}}', "[json.exception.type_error.302] type must be string, but is number"),
    ('{"mcpServers": {"a": {"command": "x", "args": [1]}}}',
     "[json.exception.type_error.302] type must be string, but is number"),
    ('{"mcpServers": {"a": {"command": "x", "timeout_ms": "1"}}}',
     "[json.exception.type_error.302] type must be number, but is string"),
])
def test_config_errors_stop_the_server(text, message):
    with pytest.raises(mcp.McpConfigError) as e:
        mcp.read_configs("", text)
    assert str(e.value) == "MCP starting failed: failed to parse MCP config JSON: " + message


def test_config_file_and_duplicates(tmp_path):
    f = tmp_path / "mcp.json"
    f.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}, "b": {"command": "y"}}}))
    got = mcp.read_configs(str(f), json.dumps({"mcpServers": {"b": {"command": "z"}, "c": {"command": "w"}}}))
    assert [(c.name, c.command) for c in got] == [("a", "x"), ("b", "y"), ("c", "w")]
    with pytest.raises(mcp.McpConfigError, match="^MCP starting failed: failed to open MCP config file: /no/such$"):
        mcp.read_configs("/no/such", "")


# --- warmup and calls -------------------------------------------------------------------------------------------

def test_warmup_lists_each_servers_tools(manager):
    m = manager(server("e"), mcp.ServerConfig("bad", "no_such_command_bankml"), server("none", "--no-tools"),
                server("refuses", "--init-error"), server("e2"))
    names = [t.full_name for t in m.tools()]
    assert names == [f"{s}_{t['name']}" for s in ("e", "e2") for t in mcp_echo.TOOLS]
    say = m.tools()[0]
    assert (say.description, say.input_schema) == ("Says the text back", mcp_echo.TOOLS[0]["inputSchema"])
    assert m.tools()[2].input_schema is None           # no inputSchema
    assert m.live == {}                                # warmup stopped every process


def test_call_results(manager):
    m = manager(server("e"))
    assert m.call("e", "say", {"text": "hi"}) == {"plain_text_response": "said: hi"}
    assert m.call("e", "sum", {"a": 2, "b": 0.5}) == {"plain_text_response": "2.5"}
    assert m.call("e", "oops", {}) == {"error": "it went wrong"}
    assert m.call("e", "parts", {}) == {"plain_text_response": "one\ntwo"}
    assert m.call("e", "chatty", {}) == {"plain_text_response": "done"}       # the noise is skipped
    assert m.call("e", "missing", {}) == {"error": "Unknown tool: missing"}
    assert m.call("e", "count", {}) == {"plain_text_response": "7"}           # one process for every call
    assert m.call("nobody", "say", {}) == {"error": "MCP server unavailable: nobody"}
    refuses = manager(server("r", "--init-error"))
    assert refuses.call("r", "say", {}) == {"error": "initialize failed: not today"}


def test_timeout_then_the_stale_reply_is_skipped(manager):
    m = manager(server("e", timeout_ms=300))
    t0 = time.monotonic()
    assert m.call("e", "nap", {"seconds": 1}) == {"error": "request timed out"}
    assert time.monotonic() - t0 < 0.9
    time.sleep(0.8)                                   # the nap's reply arrives meanwhile, with the old id
    assert m.call("e", "count", {}) == {"plain_text_response": "2"}


def test_respawn_after_a_crash(manager):
    m = manager(server("e"))
    assert m.call("e", "count", {}) == {"plain_text_response": "1"}
    first = m.live["e"]
    assert m.call("e", "boom", {}) == {"plain_text_response": "bye"}
    deadline = time.monotonic() + 5
    while first.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not first.is_alive()
    assert m.call("e", "count", {}) == {"plain_text_response": "1"}          # a fresh process
    assert m.live["e"] is not first and first.proc is None                   # the dead one reaped


def test_spawn_failure_cooldown(manager):
    m = manager(mcp.ServerConfig("bad", "no_such_command_bankml"))
    assert m.call("bad", "x", {}) == {"error": "MCP server unavailable: bad"}
    assert "bad" in m.dead_until and m.dead_until["bad"] > time.monotonic() + 4
    assert m.call("bad", "x", {}) == {"error": "MCP server unavailable: bad"}


def _living(pgid: int) -> list[int]:
    """The processes of a group that are not zombies (/proc/PID/stat: state, then the group)."""
    out = []
    for d in os.listdir("/proc"):
        try:
            stat = (Path("/proc") / d / "stat").read_text()
        except (OSError, ValueError):
            continue
        state, _ppid, pgrp = stat.rsplit(")", 1)[1].split()[:3]
        if int(pgrp) == pgid and state != "Z":
            out.append(int(d))
    return out


def test_shutdown_cancels_calls_and_kills_the_process_group(manager):
    m = manager(server("gc", "--grandchild", timeout_ms=30000))
    got = {}
    th = threading.Thread(target=lambda: got.update(r=m.call("gc", "nap", {"seconds": 20})))
    th.start()
    time.sleep(0.5)
    pgid = m.live["gc"].proc.pid
    assert len(_living(pgid)) == 2               # the server and its grandchild
    t0 = time.monotonic()
    m.shutdown()
    th.join(2)
    assert got["r"] == {"error": "cancelled"}
    m.close()
    assert time.monotonic() - t0 < 2             # no read waits on the grandchild's copy of the pipes
    time.sleep(0.1)
    assert _living(pgid) == []                   # the grandchild went with its group
    assert m.call("gc", "say", {}) == {"error": "MCP server unavailable: gc"}


def test_a_reply_of_the_wrong_types_is_a_json_error(manager, tmp_path):
    bad = tmp_path / "bad_mcp.py"
    bad.write_text("import sys, json\nfor line in sys.stdin:\n    r = json.loads(line)\n    if 'id' not in r:\n"
                   "        continue\n    res = {'tools': []} if r['method'] != 'tools/call' else "
                   "{'content': [{'type': 'text', 'text': 5}]}\n"
                   "    print(json.dumps({'jsonrpc': '2.0', 'id': r['id'], 'result': res}), flush=True)\n")
    m = manager(mcp.ServerConfig("b", sys.executable, [str(bad)]))
    with pytest.raises(mcp.nljson.NLError, match=r"type_error.302\] type must be string, but is number"):
        m.call("b", "x", {})


# --- bankml-serve -----------------------------------------------------------------------------------------------

RECORDS = sr.load("mcp.json")


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize("session", RECORDS, ids=[s["name"] for s in RECORDS])
def test_mcp_session_replays_identically(session, smollm2_path):
    from testing.record_mcp import real_flags
    assert len(session["steps"]) >= 3
    problems = []
    with sr.BankmlServe(sr.server_argv(real_flags(session["flags"]), str(smollm2_path))) as srv:
        for i, step in enumerate(session["steps"]):
            got = sr.normalize(sr.exchange(srv.port, step["request"]), str(smollm2_path))
            problems += [f"step {i}: {d}" for d in sr.differences(sr.normalize(step["answer"], ""), got)]
    assert not problems, "\n".join(problems[:8])


def test_bad_config_ends_bankml_serve(smollm2_path):
    p = subprocess.run([sys.executable, "-m", "bankml.server.cli", "-m", str(smollm2_path), "--mcp-servers-json",
                        "not valid json"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert "MCP starting failed: failed to parse MCP config JSON: [json.exception.parse_error.101]" in p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.slow
def test_tools_route_with_mcp_servers(smollm2_path):
    cfg = json.dumps({"mcpServers": {"e": {"command": sys.executable, "args": [ECHO]},
                                     "slow": {"command": sys.executable, "args": [ECHO], "timeout_ms": 30000}}})
    argv = ["-m", str(smollm2_path), "-t", "1", "-c", "512", "--mcp-servers-json", cfg]
    with sr.BankmlServe(argv) as srv:
        got = srv.answer({"method": "GET", "path": "/tools"})
        assert got["status"] == 200
        listed = got["json"]
        assert [t["tool"] for t in listed] == [f"{s}_{t['name']}" for s in ("e", "slow") for t in mcp_echo.TOOLS]
        assert listed[0] == {"display_name": "e_say", "tool": "e_say", "type": "mcp", "permissions": {"write": False},
                             "uses_cwd": False, "definition": {"type": "function", "function": {
                                 "name": "e_say", "description": "Says the text back",
                                 "parameters": mcp_echo.TOOLS[0]["inputSchema"]}}}
        assert listed[3]["definition"]["function"]["parameters"] == {}          # "not an object"
        call = {"method": "POST", "path": "/tools", "headers": {"x-tool-cwd": "/tmp"},
                "body": {"tool": "e_say", "params": {"text": "hi"}}}
        assert srv.answer(call)["json"] == {"plain_text_response": "said: hi"}
        call["body"]["stream"] = True
        assert srv.answer(call)["status"] == 404                                # MCP tools do not stream
        # a call in flight does not hold up the shutdown
        th = threading.Thread(target=lambda: srv.answer({"method": "POST", "path": "/tools", "body": {
            "tool": "slow_nap", "params": {"seconds": 20}}}))
        th.start()
        time.sleep(1)
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        srv.proc.wait(10)
        assert time.monotonic() - t0 < 3
        th.join(5)
    assert srv.proc.returncode == 0
