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
    CompactionRecord,
    check_name,
    compaction_recorded,
    compaction_values,
)
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.postgres.messages import pg_text
from openclaw_lossless.store.statements import POSTGRES
from openclaw_lossless.store.statements.snapshots import SnapshotReads

_SHARED = SnapshotReads(POSTGRES)
last_message_id = _SHARED.last_message_id
list_snapshots = _SHARED.list_snapshots
find_snapshot = _SHARED.find_snapshot
find_compaction = _SHARED.find_compaction
list_compactions = _SHARED.list_compactions
compaction_counts = _SHARED.compaction_counts


def stored_text(text: str | None) -> str | None:
    """The host's text as PostgreSQL can hold it (no lone surrogate, no NUL); None stays None."""
    return None if text is None else pg_text(storable(text))


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
