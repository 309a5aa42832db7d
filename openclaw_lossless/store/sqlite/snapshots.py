"""Compactions and snapshots: named pointers into a session's history, never destructive.

When the host compacts a session it summarises old turns away from its own transcript; here nothing is
removed. We record the compaction and take an automatic ``pre-compaction`` snapshot: a name for the last
message the session had, so ``recover --snapshot`` can show the conversation exactly as it was.

A compaction the host tried but failed, or that found nothing to compact, removed nothing: it is recorded
with its status and reason (``failed``, ``skipped``) but gets no snapshot and is not counted as one.
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
from openclaw_lossless.store.sqlite.connection import Connection


def _storable(text: str | None) -> str | None:
    return None if text is None else storable(text)


def last_message_id(conn: Connection, session_rowid: int) -> int | None:
    row = conn.execute("SELECT max(id) FROM messages WHERE session_rowid = ?", (session_rowid,)).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def record_compaction(conn: Connection, session: SessionRef, record: CompactionRecord) -> Compaction:
    """Record the host's compaction; snapshot the session as it stood before it, if it did compact."""
    last_id = last_message_id(conn, session.rowid)
    status = record.status
    cursor = conn.execute(
        "INSERT INTO compactions (session_rowid, recorded_at, tokens_before, tokens_after, compacted, summary,"
        " reason, last_message_id, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        compaction_values(session, record, last_id, _storable),
    )
    compaction_id = int(cursor.lastrowid)
    return compaction_recorded(
        compaction_id,
        status,
        last_id,
        lambda name: create_snapshot(conn, session, name, automatic=True, compaction_id=compaction_id),
    )


def create_snapshot(
    conn: Connection, session: SessionRef, name: str, *, automatic: bool = False, compaction_id: int | None = None
) -> int | None:
    check_name(name)
    if conn.execute("SELECT 1 FROM snapshots WHERE name = ?", (name,)).fetchone():
        raise InvalidName(f"a snapshot named {name!r} already exists; snapshots are never overwritten")
    last_id = last_message_id(conn, session.rowid)
    conn.execute(
        "INSERT INTO snapshots (name, session_rowid, last_message_id, created_at, automatic, compaction_id)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        (name, session.rowid, last_id, time.time(), int(automatic), compaction_id),
    )
    return last_id


def list_snapshots(conn: Connection) -> list[Snapshot]:
    rows = conn.execute(
        "SELECT sn.name, s.session_id, s.session_key, sn.last_message_id, sn.created_at, sn.automatic,"
        " sn.compaction_id FROM snapshots sn JOIN sessions s ON s.id = sn.session_rowid ORDER BY sn.id"
    ).fetchall()
    return [snapshot_view(row) for row in rows]


def find_snapshot(conn: Connection, name: str) -> Snapshot | None:
    row = conn.execute(
        "SELECT sn.name, s.session_id, s.session_key, sn.last_message_id, sn.created_at, sn.automatic,"
        " sn.compaction_id FROM snapshots sn JOIN sessions s ON s.id = sn.session_rowid WHERE sn.name = ?",
        (check_name(name),),
    ).fetchone()
    return None if row is None else snapshot_view(row)


def find_compaction(conn: Connection, compaction_id: int) -> CompactionPoint | None:
    row = conn.execute(
        "SELECT c.id, s.session_id, c.last_message_id, c.recorded_at, c.tokens_before, c.tokens_after, c.summary,"
        " c.status, c.reason FROM compactions c JOIN sessions s ON s.id = c.session_rowid WHERE c.id = ?",
        (compaction_id,),
    ).fetchone()
    return None if row is None else CompactionPoint(*row)


def list_compactions(conn: Connection, limit: int, status: str | None = None) -> list[CompactionListed]:
    """The ``limit`` latest compactions (of one status, or all), newest first, each with its automatic snapshot."""
    where, params = ("WHERE c.status = ?", [status]) if status is not None else ("", [])
    rows = conn.execute(
        "SELECT c.id, c.recorded_at, c.status, c.reason, c.tokens_before, c.tokens_after, c.last_message_id,"
        " (SELECT sn.name FROM snapshots sn WHERE sn.compaction_id = c.id), s.session_id, s.agent_id"
        f" FROM compactions c JOIN sessions s ON s.id = c.session_rowid {where} ORDER BY c.id DESC LIMIT ?",
        [*params, limit],
    ).fetchall()
    return [CompactionListed(*row) for row in rows]


def compaction_counts(conn: Connection) -> dict[str, int]:
    """How many recorded compactions came to each status (every status present, zero or not)."""
    return counts_by_status(conn.execute("SELECT status, count(*) FROM compactions GROUP BY status"))
