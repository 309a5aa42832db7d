"""What history import and catch-up ask the store, where both backends ask it alike (``api.TranscriptLedger``).

Whether a session holds a message already, which sessions and agents the store knows, when a session last
wrote: one statement each on either store. The marks in ``meta`` and the compactions claimed from a
transcript differ (collations, row locks) and stay in each backend's ``imported.py``.
"""

from __future__ import annotations

from openclaw_lossless.store.statements import Connection, Dialect


class Held:
    """The import's questions about what is held, in one backend's dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self.sql = dialect.sql

    def held_session_ids(self, conn: Connection) -> frozenset[str]:
        """Every session the store holds: catch-up follows these whatever their age."""
        return frozenset(str(row[0]) for row in conn.execute("SELECT session_id FROM sessions"))

    def first_contact(self, conn: Connection) -> dict[str, float]:
        """Agent id to when the store first registered one of its sessions (epoch s); agents with no time left out."""
        rows = conn.execute("SELECT agent_id, min(created_at) FROM sessions GROUP BY agent_id")
        return {str(row[0]): float(row[1]) for row in rows if row[1] is not None}

    def holds_content(self, conn: Connection, session_rowid: int, content_hash: bytes) -> bool:
        """Whether the session holds a message with this content hash (the message identity)."""
        row = conn.execute(
            self.sql("SELECT 1 FROM messages WHERE session_rowid = ? AND content_hash = ?"),
            (session_rowid, content_hash),
        ).fetchone()
        return row is not None

    def newest_time(self, conn: Connection, session_rowid: int, among: int = 1) -> float | None:
        """The latest ``created_at`` among the session's ``among`` newest messages (by id); None when it has none.

        With ``among`` 1 that is when its newest message was written; more finds a turn that arrived out of order.
        """
        row = conn.execute(
            self.sql(
                "SELECT max(created_at) FROM (SELECT created_at FROM messages WHERE session_rowid = ? ORDER BY id DESC"
                " LIMIT ?) newest"
            ),
            (session_rowid, among),
        ).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    def keys_and_times(self, conn: Connection, session_rowid: int) -> list[tuple[str, float]]:
        """``(window_key, created_at)`` of every message of the session: what the gap report compares."""
        statement = "SELECT window_key, created_at FROM messages WHERE session_rowid = ? ORDER BY id"
        rows = conn.execute(self.sql(statement), (session_rowid,))
        return [(str(row[0]), float(row[1])) for row in rows]
