"""The prompt of an Ollama chat or generate request, over the GGUF's chat template as llama-server renders it.

    msgs = chat_messages(model, request_messages)           # the model's SYSTEM and MESSAGEs, then the request's
    msgs = generate_messages(model, system, prompt, images, has_context)
    kept = chat_prompt(msgs, render, tokenize, num_ctx, truncate)   # chatPrompt's truncation walk
    tokens = runner_truncate(tokens, num_ctx, num_keep, truncate)    # NewSequence's truncation (raises PromptError)

`render(messages) -> str` renders a message list with the chat template (the route gives llama-server's chat
step); `tokenize(text) -> list[int]` is Ollama's Tokenize (the model's tokenizer, specials parsed, none added:
llm/server.go:1714). Messages are plain dicts {"role", "content", "images"?}. Ollama's Go templates are not
reproduced: the GGUF's own (Jinja) template renders every prompt. This module knows no HTTP and no engine.
"""

from __future__ import annotations

class PromptError(Exception):
    """A prompt Ollama's runner refuses (runner/ollamarunner/runner.go:149, :178): the message and the status the
    route answers."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.message = message
        self.status = status


def chat_messages(model, messages: list) -> list:
    """server/routes.go:2039: the model's MESSAGEs before the request's, and its SYSTEM in front unless the
    request's first message is a system message."""
    msgs = [dict(m) for m in (model.messages or [])] + [dict(m) for m in messages]
    if messages and messages[0].get("role") != "system" and model.system:
        msgs = [{"role": "system", "content": model.system}] + msgs
    return msgs


def generate_messages(model, system: str, prompt: str, images: list, has_context: bool) -> list:
    """server/routes.go:425: the request's system (else the model's), the model's MESSAGEs unless `context` is
    given, then the user's prompt (with its images)."""
    msgs = []
    if system:
        msgs.append({"role": "system", "content": system})
    elif model.system:
        msgs.append({"role": "system", "content": model.system})
    if not has_context:
        msgs += [dict(m) for m in (model.messages or [])]
    user = {"role": "user", "content": prompt}
    if images:
        user["images"] = list(images)
    msgs.append(user)
    return msgs


def chat_prompt(msgs: list, render, tokenize, num_ctx: int, truncate: bool) -> tuple[list, int]:
    """chatPrompt (server/prompt.go:23): walk back from the second-to-last message; for each i, the system
    messages before i and msgs[i:] are rendered and tokenized; the walk stops at the first that does not fit
    num_ctx (with `truncate`), else i is kept. The last message always stays. Images become `[img-N]` tags in
    their message's content (a text model reads the tags as text: runner.go:232 splits on them only for a vision
    model). Returns (the messages to render, the number of images)."""
    n = len(msgs) - 1
    system: list = []
    for i in range(n - 1, -1, -1):
        system = [m for m in msgs[:i] if m.get("role") == "system"]
        p = render(system + msgs[i:])
        if truncate and len(tokenize(p)) > num_ctx:
            break
        n = i
    kept = [dict(m) for m in msgs[n:]]
    n_images = 0
    for m in kept:
        prefix, content = "", m.get("content", "")
        for _ in m.get("images") or []:
            tag = f"[img-{n_images}]"
            if "[img]" not in content:
                prefix += tag
            else:
                content = content.replace("[img]", tag, 1)
            n_images += 1
        m["content"] = prefix + content
        m.pop("images", None)
    return system + kept, n_images


def runner_truncate(tokens: list, num_ctx: int, num_keep: int, truncate: bool) -> list:
    """NewSequence (runner/ollamarunner/runner.go:131): num_keep < 0 keeps the whole prompt, then at most
    num_ctx - 1; a prompt longer than num_ctx is refused without `truncate` (400), else its tokens after the first
    num_keep are cut so that num_ctx remain (a text prompt has no unbreakable batches)."""
    if not tokens:
        raise PromptError("Failed to create new sequence: no input provided", 500)
    keep = len(tokens) if num_keep < 0 else num_keep
    keep = min(keep, num_ctx - 1)
    if len(tokens) <= num_ctx:
        return tokens
    if not truncate:
        raise PromptError("the input length exceeds the context length", 400)
    discard = len(tokens) - num_ctx
    start = keep + discard
    if start >= len(tokens):
        raise PromptError("Failed to create new sequence: entire prompt removed by truncation", 500)
    return tokens[:keep] + tokens[start:]

