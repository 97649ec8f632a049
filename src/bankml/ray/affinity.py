"""What a request's prompt begins with, as the prefix-affinity router (bankml.ray.router) compares it: a chain of
block hashes, and the model the request names.

    key = affinity.of("POST", "/v1/chat/completions", body)   # Key(model, blocks) or None
    key.blocks        # (h1, h2, ...): h_i hashes the first i blocks of the prompt, so a shared prefix shares h_1..h_k

No Ray, no model, no tokenizer: the blocks are cut from the request as sent, before any template runs.
- chat requests (OpenAI's /v1/chat/completions, Anthropic's /v1/messages, Ollama's /api/chat, the Responses API's
  /v1/responses): each message in blocks: its other fields (role, name, tool calls) with the first BLOCK
  characters of its content, then the content's next pieces of BLOCK characters (the last one shorter), after a
  first block of what precedes the messages (Anthropic's `system`, the Responses API's `instructions`, Ollama's
  `system` / `template` / `raw` are not in messages, so they open the chain); turn 2 of a conversation repeats
  turn 1's messages, so it shares turn 1's chain and goes where turn 1 went, and two long messages that begin
  alike (a document, then another question) share their leading pieces.
- text requests (/completion, /completions, /v1/completions, Ollama's /api/generate): the prompt string cut in
  blocks of BLOCK characters (whole blocks only; a token-id prompt in blocks of BLOCK // 4 ids), after a first
  block of Ollama's `system`; a continuation that repeats the earlier prompt shares its blocks.
Anything else (GET routes, a body that is not a JSON object) has no key and goes to the least loaded replica.
At most MAX_BLOCKS blocks are kept (the longest prefix the router can tell apart).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

BLOCK = 64             # characters of a text prompt per block
MAX_BLOCKS = 1024

CHAT_PATHS = frozenset({"/v1/chat/completions", "/chat/completions", "/v1/messages", "/api/chat", "/v1/responses",
                        "/responses"})
TEXT_PATHS = frozenset({"/completion", "/completions", "/v1/completions", "/api/generate"})


@dataclass(frozen=True)
class Key:
    model: str               # the model the body names ("" when none: the server's startup model)
    blocks: tuple[str, ...]  # chained hashes, shortest prefix first


def _canon(value) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def _chain(parts) -> tuple[str, ...]:
    out = []
    h = hashlib.blake2b(digest_size=12)
    for part in parts:
        if len(out) >= MAX_BLOCKS:
            break
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
        out.append(h.copy().hexdigest())
    return tuple(out)


def _pieces(text: str) -> list[str]:
    """`text` in pieces of BLOCK characters, the last one shorter (nothing for "")."""
    return [text[i:i + BLOCK] for i in range(0, len(text), BLOCK)]


def _message_blocks(message) -> list[bytes]:
    """One message's blocks: its fields but the content (role, name, tool calls ...) with the content's first
    piece, then the content's other pieces; the cuts depend only on the message itself, so a conversation that
    repeats a message repeats its blocks, and two long contents that begin alike share their leading pieces."""
    if not isinstance(message, dict):
        return [_canon(message)]
    content = message.get("content")
    text = content if isinstance(content, str) else ("" if content is None else _canon(content).decode())
    pieces = _pieces(text) or [""]
    head = {k: v for k, v in message.items() if k != "content"}
    return [_canon(head) + b"\0" + pieces[0].encode("utf-8", "surrogatepass")] + \
        [p.encode("utf-8", "surrogatepass") for p in pieces[1:]]


def _text_blocks(prompt) -> list[bytes]:
    if isinstance(prompt, str):
        n = len(prompt) // BLOCK
        return [prompt[i * BLOCK:(i + 1) * BLOCK].encode("utf-8", "surrogatepass") for i in range(n)]
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        step = BLOCK // 4
        return [_canon(prompt[i * step:(i + 1) * step]) for i in range(len(prompt) // step)]
    if isinstance(prompt, list) and prompt:
        return _text_blocks(prompt[0])   # several prompts: the first one's prefix
    return []


def of(method: str, path: str, body: bytes) -> Key | None:
    """The affinity key of one request (None: nothing to match, route by load)."""
    if method != "POST" or (path not in CHAT_PATHS and path not in TEXT_PATHS):
        return None
    try:
        req = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(req, dict):
        return None
    model = req.get("model") if isinstance(req.get("model"), str) else ""
    head = {k: req[k] for k in ("system", "instructions", "template", "raw") if k in req}
    parts: list[bytes] = [_canon(head)] if head else []
    if path in CHAT_PATHS:
        messages = req.get("messages", req.get("input"))
        if isinstance(messages, str):
            messages = [messages]
        if not isinstance(messages, list) or not messages:
            return None
        for m in messages:
            parts += _message_blocks(m)
    else:
        blocks = _text_blocks(req.get("prompt"))
        if not blocks:
            return Key(model, ()) if model else None
        parts += blocks
    return Key(model, _chain(parts))
