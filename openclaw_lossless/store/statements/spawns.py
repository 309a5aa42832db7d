"""Spawns undone, and the link that names a session's parent, as both backends run them.

A spawn registers the child's session before the host names it and links it to its parent (each backend's
own upserts); a rolled-back spawn takes both away again while nothing refers to the session. Those reads and
deletes are the same statements on either store; PostgreSQL locks the rows it checks (``Dialect.lock``).
"""

from __future__ import annotations

from openclaw_lossless.store.statements import Connection, Dialect


class Spawned:
    """``unregister_spawned``, ``parent_key`` (``api.Sessions``) and ``unlink`` (``api.Subagents``) in one
    backend's dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect, self.sql = dialect, dialect.sql

    def unregister_spawned(self, conn: Connection, child_key: str) -> bool:
        """Undo ``register_spawned`` (a rolled-back spawn) while the session is unused; returns whether it did.

        Unused: still named by its key, and no message, turn, compaction, snapshot or archived message's identity
        refers to it. Each check is one probe of an index on ``session_rowid`` (migration m004 on SQLite,
        ``*_by_session`` on PostgreSQL; ``archived``'s primary key starts with it).
        """
        rowid = self.unused_spawned(conn, child_key)
        if rowid is None or any(
            conn.execute(self.sql(f"SELECT 1 FROM {table} WHERE session_rowid = ? LIMIT 1"), (rowid,)).fetchone()
            for table in ("turns", "compactions", "snapshots", "archived")
        ):
            return False
        conn.execute(self.sql("DELETE FROM sessions WHERE id = ?"), (rowid,))
        return True

    def unused_spawned(self, conn: Connection, child_key: str) -> int | None:
        """The session registered at spawn for ``child_key``, while no host call has named it and it holds
        nothing; locked, so a concurrent first sight on another sidecar waits and then sees it taken."""
        row = conn.execute(
            self.sql(
                "SELECT s.id FROM sessions s JOIN subagent_links l ON l.child_session_key = s.session_key"
                " WHERE s.session_id = ? AND s.session_key = ?"
                " AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.session_rowid = s.id)" + self.dialect.lock(of="s")
            ),
            (child_key, child_key),
        ).fetchone()
        return None if row is None else int(row[0])

    def parent_key(self, conn: Connection, session_key: str | None) -> str | None:
        if session_key is None:
            return None
        row = conn.execute(
            self.sql("SELECT parent_session_key FROM subagent_links WHERE child_session_key = ?"), (session_key,)
        ).fetchone()
        return None if row is None else str(row[0])

    def unlink(self, conn: Connection, spawn_id: int | None, child_key: str | None) -> bool:
        """Undo a spawn that has not ended: its session (while unused) and its link. A key with a NUL was never
        linked (``link`` checks keys), and PostgreSQL cannot compare one: the host is told "not linked"."""
        if spawn_id is None and child_key is not None and "\x00" in child_key:
            return False
        which, value = ("id", spawn_id) if spawn_id is not None else ("child_session_key", child_key)
        row = conn.execute(
            self.sql(f"SELECT child_session_key FROM subagent_links WHERE {which} = ? AND ended_at IS NULL")
            + self.dialect.lock(),
            (value,),
        ).fetchone()
        if row is None:
            return False
        self.unregister_spawned(conn, str(row[0]))  # needs the link to tell a spawned session from any other
        conn.execute(self.sql("DELETE FROM subagent_links WHERE child_session_key = ?"), (row[0],))
        return True
