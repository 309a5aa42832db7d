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

from openclaw_lossless.store.model.memory_files import (
    KIND,
    SESSION_PREFIX,
)
from openclaw_lossless.store.sqlite import forgetting
from openclaw_lossless.store.sqlite.connection import Connection, Database
from openclaw_lossless.store.statements import SQLITE
from openclaw_lossless.store.statements.memory_files import FileRows

_ROWS = FileRows(SQLITE)  # a file's row: the same statements on both backends
record_file = _ROWS.record_file
drop_file = _ROWS.drop_file
files = _ROWS.files
stored_chunks = _ROWS.stored_chunks


def sessions(conn: Connection) -> dict[str, int]:
    """The memory-file session of each agent that has one: agent id -> session row id."""
    rows = conn.execute(
        "SELECT agent_id, id FROM sessions WHERE session_id >= ? AND session_id < ?",
        (SESSION_PREFIX, SESSION_PREFIX[:-1] + ";"),
    ).fetchall()
    return {str(agent): int(rowid) for agent, rowid in rows}


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
