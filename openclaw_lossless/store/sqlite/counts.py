"""What the store holds, counted, and whether it answers: the store's side of ``/stats`` and ``/healthz``.

Why here: the status report (``service/status.py``) says what the numbers mean to an operator; which tables
hold them is the store's business, so the SQL stays in ``store/``.
"""

from __future__ import annotations

from dataclasses import dataclass

from openclaw_lossless.store.sqlite.connection import Connection


@dataclass(frozen=True)
class StoreCounts:
    """Rows per kind, as ``/stats`` reports them."""

    messages: int
    sessions: int
    agents: int
    turns: int
    snapshots: int
    forgotten: int  # tombstones: messages forgotten on request
    subagents: int  # subagent links
    archived_messages: int  # moved to the JSONL archive to stay under maxDbSizeMb
    archives: int


_COUNTS = {
    "messages": "SELECT count(*) FROM messages",
    "sessions": "SELECT count(*) FROM sessions",
    "agents": "SELECT count(DISTINCT agent_id) FROM sessions",
    "turns": "SELECT count(*) FROM turns",
    "snapshots": "SELECT count(*) FROM snapshots",
    "forgotten": "SELECT count(*) FROM forgotten",
    "subagents": "SELECT count(*) FROM subagent_links",
    "archived_messages": "SELECT coalesce(sum(message_count), 0) FROM archives",
    "archives": "SELECT count(*) FROM archives",
}


def count_rows(conn: Connection) -> StoreCounts:
    """Every count in one read connection (one snapshot when the caller holds a read transaction)."""
    return StoreCounts(**{name: int(conn.execute(sql).fetchone()[0]) for name, sql in _COUNTS.items()})


def any_archived(conn: Connection) -> bool:
    """Whether messages were ever archived: a gap may then be in the archive, not lost."""
    return conn.execute("SELECT 1 FROM archives LIMIT 1").fetchone() is not None


def vector_extension(conn: Connection) -> str:
    """The loaded sqlite-vec and its version; raises the driver's error when the extension is not there."""
    return f"sqlite-vec {conn.execute('SELECT vec_version()').fetchone()[0]}"


def probe(conn: Connection) -> None:
    """A statement that touches the database: run under ``Database.write`` it proves the write lock is free."""
    conn.execute("SELECT 1").fetchone()
