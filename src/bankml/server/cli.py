"""`bankml-serve`: llama-server's command line over bankml's engine.

    bankml-serve -m model.gguf -c 4096 -np 1 --port 8080      # llama-server's flags and defaults

With no -m it serves bankml's default model (SmolLM2-135M-Instruct Q4_1), pulled first when missing; every load
verifies the model (bankml.models.verify: guard, then the sha256 pin). Listens on every --host address (llama-server's
listeners: TCP, or a UNIX socket for a path ending in .sock), prints one `listening on` line for each, logs one line
per request (method, path, status, tokens and rates for completions), and shuts down cleanly on SIGINT / SIGTERM
(uvicorn's handlers: the listening sockets close, running requests finish, exit code 0).
Exit codes: 0 after a clean shutdown, 1 when the model cannot be loaded or an address cannot be bound, 2 for a
refused command line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys

from ..errors import BankmlError, UnsupportedFlag
from .flags import HELP, FlagError, parse_flags

log = logging.getLogger("bankml.server")


def _server_class():
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server without its signal capture (which re-raises the signal after shutdown, so the process
        would die by it): bankml-serve's own handlers ask for a graceful exit and main() returns 0."""

        @contextlib.contextmanager
        def capture_signals(self):
            yield

        def stop_on_signal(self, signum, frame):
            if self.should_exit:          # a second signal: stop waiting for open connections
                self.force_exit = True
            self.should_exit = True
    return Server


class BindError(Exception):
    """An address bankml-serve cannot listen on (llama-server exits with 1 then too)."""


def format_host(host: str) -> str:
    """common_http_format_host: an IPv6 address in brackets."""
    return f"[{host}]" if ":" in host else host


def bind(hosts: list[str], port: int) -> tuple[list[socket.socket], list[str]]:
    """server_http_context's listeners: one listening socket per --host address (a path ending in .sock is a UNIX
    socket; with several TCP addresses each IPv6 socket is IPv6-only, so :: does not also claim 0.0.0.0; --port 0
    takes a free port, refused with several TCP addresses). Returns the sockets and llama-server's
    `listening on` addresses (http://HOST:PORT, unix://PATH)."""
    n_tcp = sum(not h.endswith(".sock") for h in hosts)
    if port == 0 and n_tcp > 1:
        raise BindError("--port 0 is not supported with multiple TCP addresses")
    sockets, addresses = [], []
    try:
        for host in hosts:
            if host.endswith(".sock"):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sockets.append(s)
                try:
                    s.bind(host)
                except OSError:
                    raise BindError(f"couldn't bind HTTP server socket, hostname: {host}, port: {port}") from None
                addresses.append(f"unix://{host}")
            else:
                s = _bind_tcp(host, port, v6only=n_tcp > 1)
                sockets.append(s)
                port = s.getsockname()[1]
                addresses.append(f"http://{format_host(host)}:{port}")
            s.listen(socket.SOMAXCONN)
            s.set_inheritable(True)
    except BaseException:
        for s in sockets:
            s.close()
        raise
    return sockets, addresses


def _bind_tcp(host: str, port: int, v6only: bool) -> socket.socket:
    # cpp-httplib's create_socket: getaddrinfo(AI_PASSIVE), the first result that binds (SO_REUSEADDR)
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)
    except OSError:
        infos = []
    for family, kind, proto, _, addr in infos:
        s = socket.socket(family, kind, proto)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1 if v6only else 0)
        try:
            s.bind(addr)
            return s
        except OSError:
            s.close()
    raise BindError(f"couldn't bind HTTP server socket, hostname: {host}, port: {port}")


def ollama_address(environ=None) -> tuple[str, int]:
    """envconfig.Host (Ollama v0.13.3): $OLLAMA_HOST as [scheme://]host[:port][/path], trimmed of blanks and
    quotes; a missing port is 11434 (80 / 443 with an http:// / https:// scheme), a missing host 127.0.0.1, an
    invalid port the default."""
    import ipaddress
    import os
    environ = os.environ if environ is None else environ
    s = environ.get("OLLAMA_HOST", "").strip().strip("\"'")
    default_port = "11434"
    scheme, sep, hostport = s.partition("://")
    if not sep:
        hostport = s
    elif scheme == "http":
        default_port = "80"
    elif scheme == "https":
        default_port = "443"
    hostport = hostport.split("/", 1)[0]
    from .ollama.cors import split_host_port
    host, port = split_host_port(hostport)
    if host is None:
        host, port = "127.0.0.1", default_port
        try:
            host = str(ipaddress.ip_address(hostport.strip("[]")))
        except ValueError:
            if hostport:
                host = hostport
    try:
        n = int(port, 10)
        if not 0 <= n <= 65535:
            raise ValueError
    except ValueError:
        n = int(default_port)
    return host or "0.0.0.0", n             # ":PORT": Go's net.Listen takes every interface


def _setup_logging(cfg) -> None:
    level = logging.WARNING if cfg.log_disable else (logging.DEBUG if cfg.log_verbosity > 3 else logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname).1s %(name)s: %(message)s",
                        stream=sys.stderr)


async def _serve(app, cfg, server) -> int:
    """The app's lifespan (the model loads, the worker starts), then the listeners, then uvicorn until a signal.
    bankml-serve enters the lifespan itself, before it binds, so that a model that cannot load is one line and
    exit 1 (uvicorn would log a traceback) and no connection waits on a server that will not come up."""
    from .api import gcp
    try:
        gcp_params = gcp.Params.from_env()
    except ValueError as e:
        print(f"bankml-serve: {e}", file=sys.stderr)
        return 1
    if gcp.conflicts(gcp_params):
        print(f"bankml-serve: AIP_PREDICT_ROUTE={gcp_params.path_predict} conflicts with an existing llama-server "
              "route", file=sys.stderr)
        return 1
    if gcp_params.enabled and cfg.port != gcp_params.port:
        log.warning("Google Cloud Platform compat: overriding server port %d with AIP_HTTP_PORT %d", cfg.port,
                    gcp_params.port)
        cfg.port = gcp_params.port
    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(app.router.lifespan_context(app))
        except BankmlError as e:
            print(f"bankml-serve: cannot serve the model: {e}", file=sys.stderr)
            return 1
        res = app.state.residency
        ctx = res.peek() if not app.state.router else None
        what = (f"{ctx.meta.name} ({ctx.n_slots} slot{'s' if ctx.n_slots != 1 else ''}, n_ctx_slot {ctx.n_ctx_slot})"
                if ctx is not None else f"router over {cfg.models_dir} ({len(res.models)} models, at most "
                                        f"{cfg.models_max or 'any number'} loaded)")
        try:
            sockets, addresses = bind(cfg.hostnames, cfg.port)
        except BindError as e:
            print(f"bankml-serve: {e}", file=sys.stderr)
            return 1
        stack.callback(lambda: [sock.close() for sock in sockets])
        if cfg.ollama or os.environ.get("OLLAMA_HOST", "").strip():
            # Ollama's address too (--ollama, or OLLAMA_HOST set): a client that assumes Ollama's works as is
            host, port = ollama_address()
            if not any(sock.family != socket.AF_UNIX and sock.getsockname()[1] == port for sock in sockets):
                try:
                    more, where = bind([host], port)
                except BindError as e:
                    print(f"bankml-serve: {e} (Ollama's address: --ollama / OLLAMA_HOST)", file=sys.stderr)
                    return 1
                sockets += more
                addresses += [a + " (Ollama's address)" for a in where]
        tcp = [s for s in sockets if s.family != socket.AF_UNIX]
        app.state.listeners = [s.getsockname()[:2] for s in tcp]    # Ollama's Host rule reads them (ollama.cors)
        if tcp:
            cfg.port = tcp[0].getsockname()[1]          # --port 0: the port taken
        for address in addresses:
            print(f"bankml-serve: {what} listening on {address}", file=sys.stderr, flush=True)
        def on_signal(signum, frame):
            # MCP calls in flight return ("cancelled") so that uvicorn's graceful exit does not wait on them
            if app.state.mcp is not None:
                app.state.mcp.shutdown()
            server.stop_on_signal(signum, frame)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)
        await server.serve(sockets=sockets)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        cfg = parse_flags(argv)
    except (FlagError, UnsupportedFlag) as e:
        print(f"bankml-serve: {e}", file=sys.stderr)
        return 2
    if cfg.help:
        print(HELP, end="")
        return 0
    if cfg.version:
        from ..about import REFERENCE, __version__
        print(f"bankml {__version__} (reproducing {REFERENCE})")
        return 0
    _setup_logging(cfg)
    if cfg.ray:
        from ..ray.launch import main as ray_main
        return ray_main(cfg, argv)

    import uvicorn

    from .app import build_app
    _Server = _server_class()

    try:
        app = build_app(cfg=cfg)
    except BankmlError as e:
        print(f"bankml-serve: cannot serve the model: {e}", file=sys.stderr)
        return 1
    config = uvicorn.Config(app, log_level="warning", access_log=False,
                            server_header=False, date_header=False, timeout_keep_alive=5,
                            limit_concurrency=None, lifespan="off")
    server = _Server(config)
    with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
        code = runner.run(_serve(app, cfg, server))
    if code:
        return code
    print("bankml-serve: stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
