"""The web UI's workspace memory files: every file indexed, and the chunks it was cut into, with their citations.

Read-only: the files are the agent's, edited in its workspace; a chunk's citation opens it as a message (so it
can be forgotten from there like any other)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from openclaw_lossless.api.memory_file_index import listing
from openclaw_lossless.config import Settings
from openclaw_lossless.memory_files.indexer import MemoryIndexer
from openclaw_lossless.store.backend import Store
from openclaw_lossless.ui.html import page

MAX_CHUNKS = 2000  # shown, in file and line order


def memory_page(request: Request, store: Store, settings: Settings, indexer: MemoryIndexer) -> HTMLResponse:
    conn, ops = store.db.reader(), store.ops
    chunks: list[dict[str, Any]] = []
    for agent, rowid in sorted(ops.memory_files.sessions(conn).items()):
        stored = ops.memory_files.stored_chunks(conn, rowid)[:MAX_CHUNKS]
        texts = ops.messages.texts(conn, [c.id for c in stored])
        chunks += [{"agent": agent, "id": c.id, "citation": c.citation, "text": texts.get(c.id, "")} for c in stored]
    chunks.sort(key=lambda c: (c["agent"], _order(c["citation"])))
    return page(request, "memory.html", memory=listing(store, settings, indexer), chunks=chunks[:MAX_CHUNKS])


def _order(citation: str) -> tuple[str, int]:
    path, _, lines = citation.removeprefix("file:").rpartition("#L")
    first = lines.partition("-")[0]
    return path, int(first) if first.isdigit() else 0
