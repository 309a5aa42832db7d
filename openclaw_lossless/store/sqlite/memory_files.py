"""The store's side of workspace memory files: the files indexed, and their chunks as messages.

A file's chunks are messages of kind ``memory`` in the agent's ``memory-files:<agentId>`` session; a chunk's
window key is its citation (``file:MEMORY.md#L3-7``), which no host window ever holds. ``memory_files`` keeps a
row per file (hash, size, mtime, chunk count) so an unchanged file costs a ``stat``. Replacing or dropping
chunks goes through forget's deletion (``forgetting.delete_messages``: secure delete, vectors, backlog, FTS rows)
without a tombstone, since the file, not the user, removed them; ``scrub`` then does what forget does after its
commit, so a replaced chunk's text is gone from the file's bytes as a forgotten message's is.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from openclaw_lossless.store.model.memory_files import (
    KIND,
    SESSION_PREFIX,
    MemoryFile,
    StoredChunk,
)
from openclaw_lossless.store.sqlite import forgetting
from openclaw_lossless.store.sqlite.connection import Connection, Database
from openclaw_lossless.store.statements import SQLITE
from openclaw_lossless.store.statements.memory_files import FileRows


def files(conn: Connection) -> list[MemoryFile]:
    rows = conn.execute(
        "SELECT agent_id, path, workspace, file_hash, size, mtime_ns, chunks, indexed_at FROM memory_files"
        " ORDER BY agent_id, path"
    ).fetchall()
    return [_file(row) for row in rows]


def _file(row: Sequence[Any]) -> MemoryFile:
    agent, path, workspace, digest, size, mtime, chunks, at = row
    return MemoryFile(
        str(agent), str(path), str(workspace), bytes(digest), int(size), int(mtime), int(chunks), float(at)
    )


_ROWS = FileRows(SQLITE)  # a file's row: the same statements on both backends
record_file = _ROWS.record_file
drop_file = _ROWS.drop_file


def sessions(conn: Connection) -> dict[str, int]:
    """The memory-file session of each agent that has one: agent id -> session row id."""
    rows = conn.execute(
        "SELECT agent_id, id FROM sessions WHERE session_id >= ? AND session_id < ?",
        (SESSION_PREFIX, SESSION_PREFIX[:-1] + ";"),
    ).fetchall()
    return {str(agent): int(rowid) for agent, rowid in rows}


def stored_chunks(conn: Connection, session_rowid: int) -> list[StoredChunk]:
    rows = conn.execute(
        "SELECT id, content_hash, window_key FROM messages WHERE session_rowid = ? AND kind = ? ORDER BY id",
        (session_rowid, KIND),
    ).fetchall()
    return [StoredChunk(int(r[0]), bytes(r[1]), str(r[2])) for r in rows]


def mark_chunks(conn: Connection, ids: Sequence[int]) -> None:
    """Make newly stored messages memory chunks (``kind``), in the transaction that stored them."""
    if ids:
        conn.execute(
            "UPDATE messages SET kind = ? WHERE id IN (SELECT value FROM json_each(?))", (KIND, json.dumps(list(ids)))
        )


def remove_chunks(conn: Connection, ids: Sequence[int]) -> int:
    """Delete replaced chunks as forget deletes a message (no tombstone: the file may hold the text again)."""
    if not ids:
        return 0
    removed = forgetting.delete_messages(conn, ids)
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")  # rewrites the segments
    return removed


def scrub(db: Database) -> bool:
    """After chunks were removed: what forget does after its commit (the WAL emptied, free pages zeroed)."""
    return forgetting.scrub_files(db)
