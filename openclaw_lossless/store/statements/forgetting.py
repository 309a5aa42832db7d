"""What doctor and the counts ask of forgetting, alike on both backends: tombstones held, and messages stored again."""

from __future__ import annotations

from openclaw_lossless.store.statements import Connection, Dialect


def resurrected(conn: Connection) -> int:
    """Stored messages a tombstone names (doctor: should be 0)."""
    row = conn.execute(
        "SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_rowid"
        " JOIN forgotten f ON f.session_id = s.session_id AND f.content_hash = m.content_hash"
    ).fetchone()
    return 0 if row is None else int(row[0])


def forgotten_count(conn: Connection) -> int:
    """The tombstones held: each a forgotten message's identity, so it is never stored again."""
    row = conn.execute("SELECT count(*) FROM forgotten").fetchone()
    return 0 if row is None else int(row[0])


def drop_archived_identity(dialect: Dialect, conn: Connection, session_id: str, content_hash: bytes) -> None:
    """A tombstone names the message now: its archived identity (SQLite m012, PostgreSQL m010) goes, as the
    line goes from the archive."""
    conn.execute(
        dialect.sql(
            "DELETE FROM archived WHERE session_rowid IN (SELECT id FROM sessions WHERE session_id = ?)"
            " AND content_hash = ?"
        ),
        (session_id, content_hash),
    )
