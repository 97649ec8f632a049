"""Ollama v0.13.3's API over bankml's engine: what an Ollama request means in llama-server's terms, and the
models as Ollama names and lists them.

    names      Ollama's model names (types/model/name.go): parse, validity, the shortest display, matching
    catalog    the models an Ollama client sees: the registry's and the derived ones (bankml.models.derived),
               each with the residency entry that holds its weights and its stored parameters, system, template,
               messages and licence
    options    Ollama's options (DefaultOptions, FromMap's types, the merge) as llama-server's sampling fields
    prompt     the prompt: chatPrompt's message truncation over the GGUF's chat template, generate's messages,
               raw prompts, the runner's truncation
    cors       Ollama's browser rules (its CORS over OLLAMA_ORIGINS, its Host check) that bankml.server.http
               applies on Ollama's paths; it reads an ASGI request's headers and nothing else of HTTP

The routes are bankml.server.api.ollama (chat, generate, version) and bankml.server.api.ollama_models (tags, ps,
show, create, copy, delete, pull, blobs); the JSON of chat and generate is bankml.server.api.families.ollama.
Nothing here knows HTTP (Starlette) or the engine's objects beyond a ServerContext's tokenizer and templates.
"""
