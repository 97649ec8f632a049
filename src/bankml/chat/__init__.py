"""Messages to a prompt: what llama-server's chat step does before tokenization.

  template  chat templates rendered as llama-server --jinja renders them (selection, capabilities)
  legacy    the built-in templates of --no-jinja (by name or detected) and the legacy chat step
  request   a chat request body -> the prompt and the completion fields (common_chat_templates_apply)
  cli       `bankml chat-template`
Must not know: tokens (only the BOS / EOS texts), HTTP.
"""
