"""Workspace memory files on PostgreSQL: the SQLite module's calls (``store/sqlite/memory_files.py`` says why).

Removing chunks goes through forget's deletion (``forgetting.delete_messages``) and ``scrub`` through forget's
(``VACUUM`` of the touched tables and the keyword index rebuilt), so a replaced chunk leaves no text behind.
"""

from __future__ import annotations

from collections.abc import Sequence

from openclaw_lossless.store.postgres import forgetting, fulltext
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.sqlite.memory_files import KIND, SESSION_PREFIX, MemoryFile, StoredChunk


def files(conn: Connection) -> list[MemoryFile]:
    rows = conn.execute(
        "SELECT agent_id, path, workspace, file_hash, size, mtime_ns, chunks, indexed_at FROM memory_files"
        " ORDER BY agent_id, path"
    ).fetchall()
    return [
        MemoryFile(str(a), str(p), str(w), bytes(h), int(s), int(m), int(c), float(t))
        for a, p, w, h, s, m, c, t in rows
    ]


def record_file(conn: Connection, file: MemoryFile) -> None:
    conn.execute(
        "INSERT INTO memory_files (agent_id, path, workspace, file_hash, size, mtime_ns, chunks, indexed_at)"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (agent_id, path) DO UPDATE SET"
        " workspace = excluded.workspace, file_hash = excluded.file_hash, size = excluded.size,"
        " mtime_ns = excluded.mtime_ns, chunks = excluded.chunks, indexed_at = excluded.indexed_at",
        (
            file.agent_id,
            file.path,
            file.workspace,
            file.file_hash,
            file.size,
            file.mtime_ns,
            file.chunks,
            file.indexed_at,
        ),
    )


def drop_file(conn: Connection, agent_id: str, path: str) -> None:
    conn.execute("DELETE FROM memory_files WHERE agent_id = %s AND path = %s", (agent_id, path))


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
