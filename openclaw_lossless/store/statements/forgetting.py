"""What doctor and the counts ask of forgetting, alike on both backends: tombstones held, and messages stored again."""

from __future__ import annotations

from openclaw_lossless.errors import NotFound
from openclaw_lossless.store.model.forgetting import Selector, check_selector
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


def check_stored(dialect: Dialect, conn: Connection, selector: Selector) -> None:
    """The checks both backends make (``check_selector``), then that a named session or agent is stored: a
    forget of nothing a user named is their mistake to fix (404), never a silent no-op."""
    check_selector(selector)
    if selector.session is not None and not _exists(dialect, conn, "session_id", selector.session):
        raise NotFound(f"no session {selector.session[:80]!r} is stored: nothing was forgotten")
    if selector.agent is not None and not _exists(dialect, conn, "agent_id", selector.agent):
        raise NotFound(f"no session of agent {selector.agent[:80]!r} is stored: nothing was forgotten")


def _exists(dialect: Dialect, conn: Connection, column: str, value: str) -> bool:
    row = conn.execute(dialect.sql(f"SELECT 1 FROM sessions WHERE {column} = ? LIMIT 1"), (value,)).fetchone()
    return row is not None
