"""Compactions and snapshots on PostgreSQL: the SQLite module's calls (``store/sqlite/snapshots.py``), shared by
several sidecars.

What holds no SQL (``CompactionRecord`` and its statuses, ``Snapshot``, ``check_name``, the dataclasses the
reads return) is the SQLite module's, so both backends name, number and list alike. What changes with
several sidecars on one database:

- a snapshot name is taken once, for ever, also when two sidecars take it at the same moment: the insert
  yields to the other's (``ON CONFLICT (name) DO NOTHING`` waits for the other transaction, then inserts
  nothing) and the loser gets the ``InvalidName`` SQLite answers, while its own transaction stays usable;
- a compaction's number is its identity value, handed out by the server, so ``pre-compaction-N`` never
  repeats whichever sidecar records it.
"""

from __future__ import annotations

import time

from openclaw_lossless.capture.records import storable
from openclaw_lossless.errors import InvalidName
from openclaw_lossless.store.model.sessions import SessionRef
from openclaw_lossless.store.model.snapshots import (
    Compaction,
    CompactionListed,
    CompactionPoint,
    CompactionRecord,
    Snapshot,
    check_name,
    compaction_recorded,
    compaction_values,
    counts_by_status,
    snapshot_view,
)
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.postgres.messages import pg_text

_SNAPSHOT = (
    "SELECT sn.name, s.session_id, s.session_key, sn.last_message_id, sn.created_at, sn.automatic,"
    " sn.compaction_id FROM snapshots sn JOIN sessions s ON s.id = sn.session_rowid"
)
# A compaction's automatic snapshot. One at most through this module; the first by id should an import ever
# have attached two (SQLite's scalar subquery takes the first row where PostgreSQL's would fail).
AUTOMATIC_NAME = "SELECT sn.name FROM snapshots sn WHERE sn.compaction_id = c.id ORDER BY sn.id LIMIT 1"


def stored_text(text: str | None) -> str | None:
    """The host's text as PostgreSQL can hold it (no lone surrogate, no NUL); None stays None."""
    return None if text is None else pg_text(storable(text))


def last_message_id(conn: Connection, session_rowid: int) -> int | None:
    """The session's newest message id (one step down ``messages_by_session``), None while it holds none."""
    row = conn.execute("SELECT max(id) FROM messages WHERE session_rowid = %s", (session_rowid,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def record_compaction(conn: Connection, session: SessionRef, record: CompactionRecord) -> Compaction:
    """Record the host's compaction; snapshot the session as it stood before it, if it did compact."""
    last_id = last_message_id(conn, session.rowid)
    status = record.status
    row = conn.execute(
        "INSERT INTO compactions (session_rowid, recorded_at, tokens_before, tokens_after, compacted, summary,"
        " reason, last_message_id, status) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
        compaction_values(session, record, last_id, stored_text),
    ).fetchone()
    assert row is not None  # an INSERT ... RETURNING without a conflict clause returns its row
    compaction_id = int(row[0])
    return compaction_recorded(
        compaction_id,
        status,
        last_id,
        lambda name: create_snapshot(conn, session, name, automatic=True, compaction_id=compaction_id),
    )


def create_snapshot(
    conn: Connection, session: SessionRef, name: str, *, automatic: bool = False, compaction_id: int | None = None
) -> int | None:
    """Name the session's last message, returned. A name taken before, or by another sidecar at this moment
    (its transaction is waited for), is refused with ``InvalidName``: snapshots are never overwritten."""
    check_name(name)
    last_id = last_message_id(conn, session.rowid)
    row = conn.execute(
        "INSERT INTO snapshots (name, session_rowid, last_message_id, created_at, automatic, compaction_id)"
        " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING RETURNING id",
        (name, session.rowid, last_id, time.time(), automatic, compaction_id),
    ).fetchone()
    if row is None:
        raise InvalidName(f"a snapshot named {name!r} already exists; snapshots are never overwritten")
    return last_id


def list_snapshots(conn: Connection) -> list[Snapshot]:
    rows = conn.execute(f"{_SNAPSHOT} ORDER BY sn.id").fetchall()
    return [snapshot_view(row) for row in rows]


def find_snapshot(conn: Connection, name: str) -> Snapshot | None:
    row = conn.execute(f"{_SNAPSHOT} WHERE sn.name = %s", (check_name(name),)).fetchone()
    return None if row is None else snapshot_view(row)


def find_compaction(conn: Connection, compaction_id: int) -> CompactionPoint | None:
    row = conn.execute(
        "SELECT c.id, s.session_id, c.last_message_id, c.recorded_at, c.tokens_before, c.tokens_after, c.summary,"
        " c.status, c.reason FROM compactions c JOIN sessions s ON s.id = c.session_rowid WHERE c.id = %s",
        (compaction_id,),
    ).fetchone()
    return None if row is None else CompactionPoint(*row)


def list_compactions(conn: Connection, limit: int, status: str | None = None) -> list[CompactionListed]:
    """The ``limit`` latest compactions (of one status, or all), newest first, each with its automatic snapshot."""
    where, params = ("WHERE c.status = %s", [status]) if status is not None else ("", [])
    rows = conn.execute(
        "SELECT c.id, c.recorded_at, c.status, c.reason, c.tokens_before, c.tokens_after, c.last_message_id,"
        f" ({AUTOMATIC_NAME}), s.session_id, s.agent_id"
        f" FROM compactions c JOIN sessions s ON s.id = c.session_rowid {where} ORDER BY c.id DESC LIMIT %s",
        [*params, limit],
    ).fetchall()
    return [CompactionListed(*row) for row in rows]


def compaction_counts(conn: Connection) -> dict[str, int]:
    """How many recorded compactions came to each status (every status present, zero or not)."""
    return counts_by_status(conn.execute("SELECT status, count(*) FROM compactions GROUP BY status"))
