"""The row each workspace memory file keeps (``memory_files``), written alike on both backends.

One row per indexed file, replaced when the file changes: an upsert both SQLite and PostgreSQL spell the same,
as are the reads of the files and of a session's chunks. Finding an agent's chunk session (a prefix of
``session_id``) and marking chunks differ, and stay apart.
"""

from __future__ import annotations

from openclaw_lossless.store.model.memory_files import KIND, MemoryFile, StoredChunk
from openclaw_lossless.store.statements import Connection, Dialect


class FileRows:
    """``files``, ``record_file``, ``drop_file`` and ``stored_chunks`` (``api.MemoryFiles``) in one backend's
    dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self.sql = dialect.sql

    def files(self, conn: Connection) -> list[MemoryFile]:
        rows = conn.execute(
            "SELECT agent_id, path, workspace, file_hash, size, mtime_ns, chunks, indexed_at FROM memory_files"
            " ORDER BY agent_id, path"
        ).fetchall()
        return [
            MemoryFile(str(a), str(p), str(w), bytes(h), int(s), int(m), int(c), float(t))
            for a, p, w, h, s, m, c, t in rows
        ]

    def stored_chunks(self, conn: Connection, session_rowid: int) -> list[StoredChunk]:
        rows = conn.execute(
            self.sql(
                "SELECT id, content_hash, window_key FROM messages WHERE session_rowid = ? AND kind = ? ORDER BY id"
            ),
            (session_rowid, KIND),
        ).fetchall()
        return [StoredChunk(int(r[0]), bytes(r[1]), str(r[2])) for r in rows]

    def record_file(self, conn: Connection, file: MemoryFile) -> None:
        """Store ``file`` anew."""
        conn.execute(
            self.sql(
                "INSERT INTO memory_files (agent_id, path, workspace, file_hash, size, mtime_ns, chunks, indexed_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, path) DO UPDATE SET"
                " workspace = excluded.workspace, file_hash = excluded.file_hash, size = excluded.size,"
                " mtime_ns = excluded.mtime_ns, chunks = excluded.chunks, indexed_at = excluded.indexed_at"
            ),
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

    def drop_file(self, conn: Connection, agent_id: str, path: str) -> None:
        conn.execute(self.sql("DELETE FROM memory_files WHERE agent_id = ? AND path = ?"), (agent_id, path))
