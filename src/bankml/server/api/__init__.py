"""The inference API's routes, one module a route family; each exports `routes` (a list of Starlette routes).

  completion       the generation routes: one per (paths, family) of families.TABLE
  families         the response families (llama /completion, OpenAI completions, OpenAI chat, Anthropic messages) and TABLE
  info             /health, /props, /models, /v1/models
  tokenize         /tokenize, /detokenize
  template         /apply-template, /chat/completions/input_tokens
  slots            /slots (save, restore, erase), /metrics
  stream_sessions  resumable streams: /v1/stream, /v1/streams/lookup
"""
