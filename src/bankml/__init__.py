"""bankml: chat completions from its own forward pass, token for token what llama-server b11192 answers.

The packages, in the order a request's data flows through them (docs/architecture.md):
  bankml.models     GGUF files: the reader, the guard and pins, the architecture descriptions, pull, quantize
  bankml.chat       messages -> prompt: chat templates (Jinja and the built-in ones), the chat request step
  bankml.tokenizer  prompt -> token ids, ids -> pieces
  bankml.engine     the forward pass: ids -> logits (KV caches, one C graph file per architecture)
  bankml.sampling   logits -> the next token (with bankml.grammar's constraints)
  bankml.server     bankml-serve: llama-server's HTTP API (server.api), its agent features (server.agent)
  bankml.cxx        behaviours of C++ libraries llama.cpp relies on (nlohmann::json, std::regex)
Commands: `bankml` (bankml.cli) and `bankml-serve` (bankml.server.cli). In-process: `bankml.Engine`.
"""

from __future__ import annotations

from .about import REFERENCE, __version__, build_info

__all__ = ["REFERENCE", "__version__", "build_info", "Engine", "EngineError"]


def __getattr__(name: str):
    # bankml.Engine: the server's answers in-process (bankml.server.engine_api), imported on first use so that
    # `import bankml` does not load the HTTP stack
    if name in ("Engine", "EngineError"):
        from .server import engine_api
        return getattr(engine_api, name)
    raise AttributeError(f"module 'bankml' has no attribute {name!r}")
