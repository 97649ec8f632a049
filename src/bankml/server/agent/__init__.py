"""llama-server's agent features, beside the inference API: the built-in tools (/tools, --tools) and the
CORS proxy (/cors-proxy, --ui-mcp-proxy). Each module exports `routes`."""
