"""The pages ``redact --rescan`` reads and the renames it makes, alike on both backends (``api.Rewrite``).

A rescan reads each table a page at a time, by id after a cursor; these statements are the same on either
store. How a changed row is written back is not (FTS5's external index, PostgreSQL's computed keyword
column and NUL-free text), so that stays in each backend's ``rewrite.py``.
"""

from __future__ import annotations

from typing import Any

from openclaw_lossless.store.statements import Connection, Dialect

Row = tuple[Any, ...]


class Pages:
    """The rescan's reads (and the snapshot rename) in one backend's dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self.sql = dialect.sql

    def identity_taken(self, conn: Connection, session_rowid: int, content_hash: bytes) -> bool:
        """Whether a message of the session already has this identity."""
        found = conn.execute(
            self.sql("SELECT 1 FROM messages WHERE session_rowid = ? AND content_hash = ?"),
            (session_rowid, content_hash),
        ).fetchone()
        return found is not None

    def compaction_page(self, conn: Connection, after: int, limit: int) -> list[Row]:
        """``(id, summary, reason)`` of the compactions after ``after``."""
        return self._page(conn, "SELECT id, summary, reason FROM compactions", after, limit)

    def link_page(self, conn: Connection, after: int, limit: int) -> list[Row]:
        """``(id, ended_reason)`` of the subagent links after ``after``."""
        return self._page(conn, "SELECT id, ended_reason FROM subagent_links", after, limit)

    def snapshot_page(self, conn: Connection, after: int, limit: int) -> list[Row]:
        """``(id, name)`` of the snapshots after ``after``."""
        return self._page(conn, "SELECT id, name FROM snapshots", after, limit)

    def rename_snapshot(self, conn: Connection, snapshot_id: int, name: str) -> None:
        """Rename a snapshot; a name another snapshot holds gets ``-<id>`` (names are unique)."""
        if conn.execute(self.sql("SELECT 1 FROM snapshots WHERE name = ?"), (name,)).fetchone():
            name = f"{name}-{snapshot_id}"
        conn.execute(self.sql("UPDATE snapshots SET name = ? WHERE id = ?"), (name, snapshot_id))

    def _page(self, conn: Connection, select: str, after: int, limit: int) -> list[Row]:
        rows = conn.execute(self.sql(f"{select} WHERE id > ? ORDER BY id LIMIT ?"), (after, limit)).fetchall()
        return [tuple(row) for row in rows]
