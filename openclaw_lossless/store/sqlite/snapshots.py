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
    CompactionRecord,
    check_name,
    compaction_recorded,
    compaction_values,
)
from openclaw_lossless.store.sqlite.connection import Connection
from openclaw_lossless.store.statements import SQLITE
from openclaw_lossless.store.statements.snapshots import SnapshotReads

_SHARED = SnapshotReads(SQLITE)
last_message_id = _SHARED.last_message_id
list_snapshots = _SHARED.list_snapshots
find_snapshot = _SHARED.find_snapshot
find_compaction = _SHARED.find_compaction
list_compactions = _SHARED.list_compactions
compaction_counts = _SHARED.compaction_counts


def _storable(text: str | None) -> str | None:
    return None if text is None else storable(text)


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
