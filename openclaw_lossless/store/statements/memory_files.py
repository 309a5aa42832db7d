"""The row each workspace memory file keeps (``memory_files``), written alike on both backends.

One row per indexed file, replaced when the file changes: an upsert both SQLite and PostgreSQL spell the same.
Finding an agent's chunk session (a prefix of ``session_id``) and marking chunks differ, and stay apart.
"""

from __future__ import annotations

from typing import Any

from openclaw_lossless.store.statements import Connection, Dialect


class FileRows:
    """``record_file`` and ``drop_file`` (``api.MemoryFiles``) in one backend's dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self.sql = dialect.sql

    def record_file(self, conn: Connection, file: Any) -> None:
        """Store ``file`` (a ``MemoryFile``: the backends' modules, which bind this one, define it) anew."""
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
