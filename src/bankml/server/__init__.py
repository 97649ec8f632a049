"""bankml-serve: llama-server b11192's HTTP server over bankml's engine.

  app, http, cli, flags     the Starlette app, llama-server's HTTP behaviour, the command and its flags
  context                   the loaded model and the facts /props reports
  api/                      the inference routes (one module a route family); api/families: the response families
  agent/                    the built-in tools and the CORS proxy
  generation, slots         the worker thread, the generation loop, slots and the prompt cache
  engine_api                bankml.Engine: the same answers in-process
"""
