"""`bankml-serve`: llama-server's command line over bankml's engine.

    bankml-serve -m model.gguf -c 4096 -np 1 --port 8080      # llama-server's flags and defaults

With no -m it serves bankml's default model (SmolLM2-135M-Instruct Q4_1), pulled first when missing; every load
verifies the model (bankml.verify: guard, then the sha256 pin). Prints where it listens, logs one line per
request (method, path, status, tokens and rates for completions), and shuts down cleanly on SIGINT / SIGTERM
(uvicorn's handlers: the listening socket closes, running requests finish, exit code 0).
Exit codes: 0 after a clean shutdown, 1 when the model cannot be loaded, 2 for a refused command line.
"""

from __future__ import annotations

import contextlib
import logging
import signal
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


def _setup_logging(cfg) -> None:
    level = logging.WARNING if cfg.log_disable else (logging.DEBUG if cfg.log_verbosity > 3 else logging.INFO)
    logging.basicConfig(level=level, format="%(asctime)s %(levelname).1s %(name)s: %(message)s",
                        stream=sys.stderr)


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
        import bankml
        print(f"bankml {bankml.__version__} (reproducing {bankml.REFERENCE})")
        return 0
    _setup_logging(cfg)

    import uvicorn

    from .app import build_app
    _Server = _server_class()

    try:
        app = build_app(cfg=cfg)
    except BankmlError as e:
        print(f"bankml-serve: cannot serve the model: {e}", file=sys.stderr)
        return 1
    ctx = app.state.ctx
    host = cfg.hostname
    shown = f"[{host}]" if ":" in host else host
    print(f"bankml-serve: {ctx.meta.name} ({ctx.n_slots} slot{'s' if ctx.n_slots != 1 else ''}, "
          f"n_ctx_slot {ctx.n_ctx_slot}) listening on http://{shown}:{cfg.port}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, host=host, port=cfg.port, log_level="warning", access_log=False,
                            server_header=False, date_header=False, timeout_keep_alive=5,
                            limit_concurrency=None, lifespan="off")
    server = _Server(config)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, server.stop_on_signal)
    try:
        server.run()
    finally:
        ctx.close()
    print("bankml-serve: stopped", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
