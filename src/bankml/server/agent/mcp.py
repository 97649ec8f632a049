"""MCP servers as llama-server b11192 runs them (tools/server/server-mcp.cpp): stdio JSON-RPC clients of the
processes that `--mcp-servers-config PATH` and `--mcp-servers-json JSON` name, whose tools join GET/POST /tools
as `<server>_<tool>` (bankml.server.agent.tools).

    mgr = Manager.from_flags(cfg)      # the config read and checked (McpConfigError: llama-server exits with 1)
    mgr.start()                         # warmup: each server spawned once, its tools listed, then stopped
    mgr.tools()                         # [ToolDef]: the registry, in config order
    mgr.call("echo", "add", {"a": 1})   # {"plain_text_response": text} or {"error": text}
    mgr.shutdown(); mgr.close()         # the cancel flag (in-flight calls return), then every process killed

The config is Cursor's `{"mcpServers": {NAME: {"command", "args", "env", "cwd", "timeout_ms"}}}`; an entry without
a command is skipped, a name given twice (across both sources) is kept once, and a type error in an entry, JSON
that does not parse or a file that cannot be opened stop the server (`MCP starting failed: ...`).

A server is a child process speaking NDJSON JSON-RPC 2.0 on stdin/stdout (MCP 2024-11-05): `initialize`, then
the `notifications/initialized` notification, `tools/list` (once per process) and `tools/call`. Replies are
matched by id; notifications and stale replies (of a call that timed out) are skipped, as are lines that are
not JSON. Each call waits at most the server's `timeout_ms` (default 30000); warmup at most 10 s per server. A
server that is not alive when a call comes (it exited, or closed its stdout) is spawned again; one that cannot be
spawned is not tried again for 5 s (`MCP server unavailable: NAME`). Calls to one server run one at a time.

The pipes are read by threads that poll (50 ms) and stop when the transport closes, so a grandchild that
inherited the child's stdout cannot hold a read open forever (llama-server's polled reader); stderr is drained
into the debug log, its last 4 KiB kept for diagnostics. bankml's departure: each server starts in a session of
its own and is stopped with its whole process group (SIGKILL), grandchildren included, where llama-server kills
the direct child only; a server whose spawn fails is a warning, never an exception out of a request.

This module knows JSON-RPC and processes; it does not know HTTP, the routes or the built-in tools.
"""

from __future__ import annotations

import logging
import os
import queue
import select
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from ...cxx import nljson
from ...errors import BankmlError

log = logging.getLogger("bankml.server")

PROTOCOL_VERSION = "2024-11-05"
COOLDOWN_S = 5              # a server that cannot be spawned is not tried again for this long
WARMUP_TIMEOUT_S = 10       # the tool discovery of one server at start
POLL_S = 0.05
MAX_LINE = 8 * 1024 * 1024  # a longer NDJSON line is dropped
ERR_TAIL_MAX = 4096
QUEUE_MAX = 65536           # replies waiting to be read


class McpConfigError(BankmlError):
    """The MCP config cannot be read (llama-server: `MCP starting failed: ...`, exit 1)."""


@dataclass
class ServerConfig:
    name: str
    command: str
    args: list = field(default_factory=list)
    env: dict = field(default_factory=dict)      # merged over the parent's environment
    cwd: str = ""
    timeout_ms: int = 30000


@dataclass
class ToolDef:
    server: str
    name: str                  # the bare tool name (no "<server>_")
    description: str
    input_schema: object       # JSON Schema of the arguments, or None

    @property
    def full_name(self) -> str:
        return f"{self.server}_{self.name}"


# ---------------------------------------------------------------- the config

def _get_int(v) -> int:
    """get<int>: a number (a float cut toward zero) or a boolean (0 / 1), else nlohmann's type error."""
    if isinstance(v, (bool, int, float)):
        return int(v)
    raise nljson.type_must_be("number", v)


def parse_config(text: str) -> list[ServerConfig]:
    """server_mcp_server_config::parse_from_json (raises nljson.NLError, JSONParseError included)."""
    j = nljson.loads(text)
    servers = j.get("mcpServers") if isinstance(j, dict) else None
    if not isinstance(servers, dict):
        return []
    out = []
    for name, c in servers.items():
        sc = ServerConfig(name, nljson.value(c, "command", ""), cwd=nljson.value(c, "cwd", ""))
        sc.timeout_ms = _get_int(c["timeout_ms"]) if "timeout_ms" in c else sc.timeout_ms
        if isinstance(c.get("args"), list):
            sc.args = [nljson.get_str(a) for a in c["args"]]
        if isinstance(c.get("env"), dict):
            sc.env = {k: nljson.get_str(v) for k, v in c["env"].items()}
        if not sc.command:
            log.warning("MCP server '%s' has no command, skipping", name)
            continue
        out.append(sc)
    return out


def read_configs(config_path: str, config_json: str) -> list[ServerConfig]:
    """server_mcp::start's config half: the file, then the inline JSON; a name seen before is skipped."""
    configs: list[ServerConfig] = []

    def append(text: str) -> None:
        try:
            parsed = parse_config(text)
        except nljson.NLError as e:
            raise McpConfigError(f"MCP starting failed: failed to parse MCP config JSON: {e}") from None
        if not parsed:
            log.warning("MCP config: no servers found in JSON")
        for p in parsed:
            if any(c.name == p.name for c in configs):
                log.warning("MCP config: duplicate server name '%s', skipping", p.name)
                continue
            configs.append(p)

    if config_path:
        try:
            with open(config_path, "rb") as f:
                text = f.read().decode("utf-8", "surrogateescape")
        except OSError:
            raise McpConfigError(f"MCP starting failed: failed to open MCP config file: {config_path}") from None
        append(text)
    if config_json:
        append(config_json)
    return configs


# ---------------------------------------------------------------- one server process

def _error(message: str) -> dict:
    return {"error": {"code": -32603, "message": message}}


def _rpc_error_message(resp) -> str:
    e = resp.get("error") if isinstance(resp, dict) else None
    if isinstance(e, dict):
        return nljson.value(e, "message", "unknown error")
    if isinstance(e, str):
        return e
    return "unknown error"


def _result_to_response(result) -> dict:
    """mcp_result_to_response: the text parts of result.content joined by newlines; an isError result is an
    error with that text."""
    texts = []
    content = result.get("content") if isinstance(result, dict) else None
    if isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and nljson.value(part, "type", "") == "text":
                texts.append(nljson.value(part, "text", ""))
    text = "\n".join(texts)
    if isinstance(result, dict) and "isError" in result:
        flag = result["isError"]
        if flag is not None and not isinstance(flag, bool):
            raise nljson.type_must_be("boolean", flag)
        if flag:
            return {"error": text or "MCP tool returned an error"}
    return {"plain_text_response": text}


def _same_id(a, b) -> bool:
    # nlohmann's ==: numbers compare by value across int and float, a boolean equals only a boolean
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


class StdioServer:
    """server_mcp_stdio: one MCP server process and its JSON-RPC session."""

    def __init__(self, cfg: ServerConfig):
        self.cfg = cfg
        self.name = cfg.name
        self.timeout_s = cfg.timeout_ms / 1000
        self.rpc_lock = threading.Lock()      # held across a call and its reply wait (calls run one at a time)
        self.next_id = 1
        self.initialized = False
        self.last_error = ""
        self.cached_tools: list[ToolDef] = []
        self.proc: subprocess.Popen | None = None
        self.running = threading.Event()
        self.replies: queue.Queue = queue.Queue(QUEUE_MAX)
        self.err_tail = ""
        self.err_lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    # -- the process

    def start(self) -> bool:
        env = None
        if self.cfg.env:
            env = dict(os.environ)
            env.update(self.cfg.env)
        try:
            self.proc = subprocess.Popen([self.cfg.command] + list(self.cfg.args), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                         cwd=self.cfg.cwd or None, start_new_session=True, bufsize=0)
        except (OSError, ValueError) as e:
            log.warning("MCP '%s': failed to spawn '%s'", self.name, self.cfg.command)
            self.last_error = f"spawn failed: {e}"
            return False
        self.running.set()
        self.threads = [threading.Thread(target=self._read_stdout, daemon=True, name=f"mcp-{self.name}-out"),
                        threading.Thread(target=self._read_stderr, daemon=True, name=f"mcp-{self.name}-err")]
        for t in self.threads:
            t.start()
        return True

    def is_alive(self) -> bool:
        return self.running.is_set()

    def diagnostics(self) -> str:
        out = self.last_error
        with self.err_lock:
            if self.err_tail:
                out += ("; " if out else "") + "last stderr: " + self.err_tail
        return out

    def close(self) -> None:
        """Blocking and idempotent: the pumps stop, the process group is killed and reaped."""
        if self.proc is None:
            return
        self.running.clear()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for t in self.threads:
            t.join()
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except OSError:
                pass
        self.proc.wait()
        self.proc = None

    def _pump(self, f, on_line) -> None:
        """mcp_pump_ndjson: lines of a pipe, read by polling until the transport closes, EOF or an error."""
        fd = f.fileno()
        os.set_blocking(fd, False)
        buf = b""
        skipping = False
        while self.running.is_set():
            try:
                ready, _, _ = select.select([fd], [], [], POLL_S)
            except (OSError, ValueError):
                return
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except BlockingIOError:
                continue
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            if skipping:
                nl = buf.find(b"\n")
                if nl < 0:
                    if len(buf) > MAX_LINE:
                        buf = b""
                    continue
                buf = buf[nl + 1:]
                skipping = False
            *lines, buf = buf.split(b"\n")
            for line in lines:
                line = line[:-1] if line.endswith(b"\r") else line
                if line and not on_line(line):
                    return
            if len(buf) > MAX_LINE:
                log.warning("MCP: dropping oversized line (> %d bytes) from child pipe", MAX_LINE)
                buf, skipping = b"", True

    def _read_stdout(self) -> None:
        def put(line: bytes) -> bool:
            while self.running.is_set():
                try:
                    self.replies.put(line, timeout=POLL_S)
                    return True
                except queue.Full:
                    continue
            return False
        try:
            self._pump(self.proc.stdout, put)
        finally:
            self.running.clear()        # EOF (or close): not alive any more, waiting callers see the end

    def _read_stderr(self) -> None:
        def keep(line: bytes) -> bool:
            text = line.decode("utf-8", "replace")
            log.debug("MCP '%s' stderr: %s", self.name, text)
            with self.err_lock:
                self.err_tail = (self.err_tail + text + "\n")[-ERR_TAIL_MAX:]
            return True
        self._pump(self.proc.stderr, keep)

    def _write(self, data: bytes, deadline: float) -> bool:
        """The message and its newline, written while the transport is open (at most until the deadline)."""
        proc = self.proc
        if proc is None or not self.running.is_set():
            return False
        data += b"\n"
        try:
            fd = proc.stdin.fileno()
            os.set_blocking(fd, False)
            while data:
                if not self.running.is_set() or time.monotonic() >= deadline:
                    return False
                try:
                    _, ready, _ = select.select([], [fd], [], POLL_S)
                    if ready:
                        data = data[os.write(fd, data):]
                except BlockingIOError:
                    continue
        except (OSError, ValueError):     # the child closed its stdin, or close() closed the pipe meanwhile
            return False
        return True

    # -- the JSON-RPC session (rpc_lock held by the public callers)

    def _send(self, req: dict, should_stop) -> dict:
        """send_rpc: the reply with the request's id, or an {"error": ...} (cancelled, timed out, closed)."""
        deadline = time.monotonic() + self.timeout_s
        if not self._write(nljson.dump(req).encode("utf-8", "surrogateescape"), deadline):
            return _error("transport closed")
        has_id = "id" in req

        def stop() -> bool:
            return bool(should_stop and should_stop()) or time.monotonic() >= deadline

        while not stop():
            try:
                line = self.replies.get(timeout=POLL_S)
            except queue.Empty:
                if not self.running.is_set() and self.replies.empty():
                    break               # closed, nothing left to read
                continue
            try:
                reply = nljson.loads(line)
            except (nljson.NLError, ValueError):
                continue                # a malformed line is skipped
            # no id: a notification; another id: the stale reply of a call that timed out
            if not has_id or (isinstance(reply, dict) and "id" in reply and _same_id(reply["id"], req["id"])):
                return reply
        if should_stop and should_stop():
            return _error("cancelled")
        if time.monotonic() >= deadline:
            return _error("request timed out")
        return _error("transport closed")

    def _ensure_init(self, should_stop) -> bool:
        if self.initialized:
            return True
        req = {"jsonrpc": "2.0", "id": self.next_id, "method": "initialize",
               "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                          "clientInfo": {"name": "llama.cpp", "version": "1.0"}}}
        self.next_id += 1
        resp = self._send(req, should_stop)
        if not (isinstance(resp, dict) and "result" in resp):
            self.last_error = "initialize failed: " + _rpc_error_message(resp)
            return False
        self._write(nljson.dump({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode(),
                    time.monotonic() + self.timeout_s)
        self.initialized = True
        return True

    def list_tools(self, should_stop=None) -> list[ToolDef]:
        with self.rpc_lock:
            if not self._ensure_init(should_stop):
                return []
            if self.cached_tools:
                return list(self.cached_tools)
            req = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/list"}
            self.next_id += 1
            resp = self._send(req, should_stop)
            if not (isinstance(resp, dict) and "result" in resp):
                self.last_error = "tools/list failed: " + _rpc_error_message(resp)
                return []
            result = resp["result"]
            tools = result.get("tools") if isinstance(result, dict) else None
            for t in tools if isinstance(tools, list) else []:
                self.cached_tools.append(ToolDef(self.name, nljson.value(t, "name", ""),
                                                 nljson.value(t, "description", ""), t.get("inputSchema")))
            return list(self.cached_tools)

    def call_tool(self, tool: str, arguments, should_stop=None) -> dict:
        with self.rpc_lock:
            if not self._ensure_init(should_stop):
                return {"error": self.last_error}
            req = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                   "params": {"name": tool, "arguments": arguments}}
            self.next_id += 1
            resp = self._send(req, should_stop)
            if isinstance(resp, dict) and "error" in resp:
                return {"error": _rpc_error_message(resp)}
            if isinstance(resp, dict) and "result" in resp:
                return _result_to_response(resp["result"])
            return {"error": "invalid response from MCP server"}


# ---------------------------------------------------------------- the manager

class Manager:
    """server_mcp: the configs, the registry of tools found at warmup, one live process per server (spawned on
    the first call, again after it died), the spawn-failure cooldown and the cancel flag."""

    def __init__(self, configs: list[ServerConfig]):
        self.configs = configs
        self.lock = threading.Lock()
        self.live: dict[str, StdioServer] = {}
        self.dead_until: dict[str, float] = {}
        self.registry: list[ToolDef] = []
        self.stopping = threading.Event()

    @classmethod
    def from_flags(cls, cfg) -> "Manager":
        return cls(read_configs(cfg.mcp_servers_config, cfg.mcp_servers_json))

    @property
    def empty(self) -> bool:
        return not self.configs

    def start(self) -> None:
        """Warmup: each server spawned once, its tools listed (10 s at most), then stopped. A tool list that is
        not llama-server's JSON (a tool that is not an object, a name that is not a string) stops the server as
        it stops llama-server (McpConfigError)."""
        found: list[ToolDef] = []
        for c in self.configs:
            t = StdioServer(c)
            if not t.start():
                log.warning("MCP warmup: failed to spawn '%s': %s", c.name, t.diagnostics())
                continue
            deadline = time.monotonic() + WARMUP_TIMEOUT_S
            try:
                tools = t.list_tools(lambda: self.stopping.is_set() or time.monotonic() >= deadline)
            except nljson.NLError as e:
                raise McpConfigError(f"MCP starting failed: {e}") from None
            finally:
                t.close()
            log.info("MCP warmup: '%s' discovered %d tools", c.name, len(tools))
            found += tools
        with self.lock:
            self.registry = found

    def tools(self) -> list[ToolDef]:
        with self.lock:
            return list(self.registry)

    def _get(self, name: str) -> StdioServer | None:
        closing = []
        result = None
        with self.lock:
            if self.stopping.is_set():
                return None
            now = time.monotonic()
            if name in self.dead_until:
                if now < self.dead_until[name]:
                    return None
                del self.dead_until[name]
            t = self.live.get(name)
            if t is not None:
                if t.is_alive():
                    return t
                log.warning("MCP '%s' is no longer alive: %s", name, t.diagnostics())
                closing.append(self.live.pop(name))
            cfg = next((c for c in self.configs if c.name == name), None)
            if cfg is not None:
                fresh = StdioServer(cfg)
                if fresh.start() and fresh.is_alive():
                    self.live[name] = result = fresh
                else:
                    log.warning("MCP '%s': failed to start: %s", name, fresh.diagnostics())
                    closing.append(fresh)
                    self.dead_until[name] = now + COOLDOWN_S
        for t in closing:
            t.close()
        return result

    def call(self, server: str, tool: str, arguments, should_stop=None) -> dict:
        """server_mcp::call_tool: the result, or {"error": ...}; raises nljson.NLError where llama-server's
        JSON access throws (a reply whose parts are not its types)."""
        t = self._get(server)
        if t is None:
            return {"error": "MCP server unavailable: " + server}
        return t.call_tool(tool, arguments, lambda: self.stopping.is_set() or bool(should_stop and should_stop()))

    def shutdown(self) -> None:
        """The cancel flag: in-flight calls return within a poll; no process is touched (close does that)."""
        self.stopping.set()

    def close(self) -> None:
        self.shutdown()
        with self.lock:
            live, self.live = list(self.live.values()), {}
        for t in live:
            t.close()
