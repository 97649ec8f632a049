"""Ollama's model management routes: /api/tags, /api/ps, /api/show, /api/create, /api/copy, /api/delete,
/api/pull, /api/blobs/:digest (over bankml.server.ollama.catalog and bankml.models.derived)."""

from __future__ import annotations

routes: list = []
