"""Workspace memory files as a second source: what the agent wrote down itself (``MEMORY.md``, ``memory/**/*.md``)
found where OpenClaw keeps each agent's workspace, chunked by heading and paragraph, and indexed beside the
conversation (docs/workspace-memory.md)."""
