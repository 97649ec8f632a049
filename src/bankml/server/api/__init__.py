"""The inference API's routes, one module a route family; each exports `routes` (a list of Starlette routes).

  completion       /completion, /v1/completions, /v1/chat/completions over the response families
  info             /health, /props, /models, /v1/models
  tokenize         /tokenize, /detokenize
  template         /apply-template, /chat/completions/input_tokens
  slots            /slots (save, restore, erase), /metrics
  stream_sessions  resumable streams: /v1/stream, /v1/streams/lookup
"""
