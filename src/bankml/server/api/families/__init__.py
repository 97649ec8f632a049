"""The response families: one module per API shape, each a bankml.server.api.families.base.Family that owns
its final object, stream chunks, stream framing, n > 1 merge (and, for chat, its request step).

    TABLE          (paths, family) for every generation route; bankml.server.api.completion mounts it
    COMPLETION     llama's /completion                 (families.completion)
    OAI_COMPLETIONS  OpenAI /v1/completions            (families.oai_completions)
    OAI_CHAT       OpenAI /v1/chat/completions         (families.oai_chat)
    ANTHROPIC      Anthropic's /v1/messages            (families.anthropic: the body rewritten as an OpenAI chat)
    OAI_RESPONSES  OpenAI /v1/responses (/responses)   (families.responses: the body rewritten as an OpenAI chat)

    families.ollama  Ollama's /api/chat and /api/generate answers (NDJSON framing, Go's field order); not a TABLE
                   row: bankml.server.api.ollama runs Ollama's own checks and lifecycle before the same tasks

A new API is a new module here with its Family (or answer builder) and, if llama-server's request steps fit it,
one TABLE row. Families read generation events; they never import the routes.
"""

from __future__ import annotations

from .anthropic import AnthropicMessages
from .completion import LlamaCompletion
from .oai_chat import OAIChat
from .oai_completions import OAICompletions
from .responses import OAIResponses

COMPLETION = LlamaCompletion()
OAI_COMPLETIONS = OAICompletions()
OAI_CHAT = OAIChat()
ANTHROPIC = AnthropicMessages()
OAI_RESPONSES = OAIResponses()

#: (paths, family): the POST routes that generate, in mounting order
TABLE = [
    (("/completion", "/completions"), COMPLETION),
    (("/v1/completions",), OAI_COMPLETIONS),
    (("/chat/completions", "/v1/chat/completions"), OAI_CHAT),
    (("/v1/messages",), ANTHROPIC),
    (("/v1/responses", "/responses"), OAI_RESPONSES),
]
