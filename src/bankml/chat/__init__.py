"""Messages to a prompt: what llama-server's chat step does before tokenization.

Data flows one way, each module importing only those above it:
  errors    the chat step's exceptions (TemplateError family, ChatRequestError)
  messages  ChatMessage / Tool / ChatInputs / ChatParams, and OpenAI-style messages and tools parsed into them
  render    one parsed template: capabilities, message normalization, the render (common_chat_template)
  analysis  what probe renders tell: diff_split and the autoparser's reasoning and message-start markers
  handlers  the per-family handlers chat.cpp picks from the template source (gpt-oss, Gemma 4, Qwen3-Coder, ...)
  legacy    the built-in templates of --no-jinja (by name or detected) and the legacy chat step
  gguf      what the chat step reads from a GGUF header: template sources, BOS/EOS texts, add_bos / add_eos
  template  ChatTemplates: a model's templates, llama-server's startup renders, one request's prompt
  request   a chat request body -> the prompt and the completion fields (oaicompat_chat_params_parse)
  cli       `bankml chat-template`
Must not know: tokens (only the BOS / EOS texts), HTTP.
"""
