"""Model files: everything about a GGUF file before it runs.

  gguf           the container format: header, tensor table, mmap views, writing
  arch/          one description per architecture the engine runs: keys, tensors and their roles, options
  capabilities   what the engine can run (weight types per role, tokenizers), read by the guard
  verify         the guard (play / refuse / need_more) and the sha256 pins (FORK.json)
  pull           models from package registries into the models directory
  quantize       derived files: ggml's reference decoders and encoders, `bankml quantize`
Must not know: how a model runs (bankml.engine), HTTP.
"""
