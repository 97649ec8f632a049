"""`bankml-serve --ray [--replicas N] FLAGS...`: bankml-serve's flags, served by N Ray Serve replicas
(bankml.ray.serving) behind Ray's HTTP proxy on --host / --port.

Joins the Ray cluster named by $RAY_ADDRESS (`ray start --head` elsewhere, or a KubeRay cluster), else starts a
local one for this process. Runs until SIGINT / SIGTERM, then deletes the application (Ray drains each replica:
running requests finish first) and, for a local cluster, shuts it down. Exit codes as bankml-serve's: 0 after a
clean stop, 1 when the application does not come up, 2 for a refused command line (checked before Ray starts).
"""

from __future__ import annotations

import os
import signal
import sys
import threading

#: what only the front (Ray's proxy) takes; each replica gets the rest of the command line
FRONT_FLAGS = {"--ray": False, "--replicas": True, "--replica-cpus": True, "--host": True, "--port": True}


def replica_argv(argv: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        takes = FRONT_FLAGS.get(argv[i])
        if takes is None:
            out.append(argv[i])
            i += 1
        else:
            i += 2 if takes else 1
    return out


def main(cfg, argv: list[str]) -> int:
    try:
        import ray
        from ray import serve
    except ImportError:
        print("bankml-serve: --ray needs Ray Serve: pip install 'bankml[ray]'", file=sys.stderr)
        return 2
    if cfg.ollama or len(cfg.hostnames) != 1 or cfg.hostname.endswith(".sock"):
        print("bankml-serve: with --ray, Ray's proxy listens on one TCP address (one --host, no .sock path, no "
              "--ollama)", file=sys.stderr)
        return 2
    from . import serving
    inner = replica_argv(argv)
    try:
        app = serving.application(inner, replicas=cfg.ray_replicas, replica_cpus=cfg.ray_replica_cpus)
    except Exception as e:          # noqa: BLE001 - a flag the replicas would refuse
        print(f"bankml-serve: {e}", file=sys.stderr)
        return 2
    local = not os.environ.get("RAY_ADDRESS")
    ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False, log_to_driver=False)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        serve.start(http_options={"host": cfg.hostname, "port": cfg.port})
        try:
            serve.run(app, name=serving.APP_NAME, route_prefix="/")
        except Exception as e:      # noqa: BLE001 - a replica that cannot load its model
            print(f"bankml-serve: the Ray application did not start: {e}", file=sys.stderr)
            return 1
        print(f"bankml-serve: {cfg.ray_replicas} Ray Serve replica{'s' if cfg.ray_replicas != 1 else ''} "
              f"listening on http://{cfg.hostname}:{cfg.port}", file=sys.stderr, flush=True)
        stop.wait()
        serve.delete(serving.APP_NAME)
    finally:
        if local:
            serve.shutdown()
            ray.shutdown()
    print("bankml-serve: stopped", file=sys.stderr, flush=True)
    return 0
