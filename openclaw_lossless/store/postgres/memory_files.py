"""Workspace memory files on PostgreSQL: the SQLite module's calls (``store/sqlite/memory_files.py`` says why).

Removing chunks goes through forget's deletion (``forgetting.delete_messages``) and ``scrub`` through forget's
(``VACUUM`` of the touched tables and the keyword index rebuilt), so a replaced chunk leaves no text behind.
"""

from __future__ import annotations

from collections.abc import Sequence

from openclaw_lossless.store.model.memory_files import KIND, SESSION_PREFIX, MemoryFile, StoredChunk
from openclaw_lossless.store.postgres import forgetting, fulltext
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.statements import POSTGRES
from openclaw_lossless.store.statements.memory_files import FileRows


def files(conn: Connection) -> list[MemoryFile]:
    rows = conn.execute(
        "SELECT agent_id, path, workspace, file_hash, size, mtime_ns, chunks, indexed_at FROM memory_files"
        " ORDER BY agent_id, path"
    ).fetchall()
    return [
        MemoryFile(str(a), str(p), str(w), bytes(h), int(s), int(m), int(c), float(t))
        for a, p, w, h, s, m, c, t in rows
    ]


_ROWS = FileRows(POSTGRES)  # a file's row: the same statements on both backends
record_file = _ROWS.record_file
drop_file = _ROWS.drop_file


def sessions(conn: Connection) -> dict[str, int]:
    rows = conn.execute(
        "SELECT agent_id, id FROM sessions WHERE starts_with(session_id, %s)", (SESSION_PREFIX,)
    ).fetchall()
    return {str(agent): int(rowid) for agent, rowid in rows}


def stored_chunks(conn: Connection, session_rowid: int) -> list[StoredChunk]:
    rows = conn.execute(
        "SELECT id, content_hash, window_key FROM messages WHERE session_rowid = %s AND kind = %s ORDER BY id",
        (session_rowid, KIND),
    ).fetchall()
    return [StoredChunk(int(r[0]), bytes(r[1]), str(r[2])) for r in rows]


def mark_chunks(conn: Connection, ids: Sequence[int]) -> None:
    if ids:
        conn.execute("UPDATE messages SET kind = %s WHERE id = ANY(%s::bigint[])", (KIND, [int(i) for i in ids]))


def remove_chunks(conn: Connection, ids: Sequence[int]) -> int:
    return forgetting.delete_messages(conn, ids) if ids else 0


def scrub(db: Database) -> bool:
    fulltext.forget_counts()  # the kept word counts would exceed the corpus now smaller
    return forgetting.scrub(db, forgetting._TOUCHED)
