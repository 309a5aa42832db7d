"""Compactions and snapshots: named pointers into a session's history, never destructive.

When the host compacts a session it summarises old turns away from its own transcript; here nothing is
removed. We record the compaction and take an automatic ``pre-compaction`` snapshot: a name for the last
message the session had, so ``recover --snapshot`` can show the conversation exactly as it was.

A compaction the host tried but failed, or that found nothing to compact, removed nothing: it is recorded
with its status and reason (``failed``, ``skipped``) but gets no snapshot and is not counted as one.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from openclaw_lossless.capture.records import storable
from openclaw_lossless.errors import InvalidName
from openclaw_lossless.store.sqlite.connection import Connection
from openclaw_lossless.store.sqlite.sessions import SessionRef

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:\-]{0,127}$")


COMPACTED, FAILED, SKIPPED, NOT_COMPACTED = "compacted", "failed", "skipped", "not-compacted"
STATUSES = (COMPACTED, FAILED, SKIPPED, NOT_COMPACTED)


@dataclass(frozen=True)
class CompactionRecord:
    tokens_before: int | None
    tokens_after: int | None
    compacted: bool
    summary: str | None
    reason: str | None
    ok: bool | None = None  # the host's own verdict; None when the caller did not say (an older plugin)

    @property
    def status(self) -> str:
        """What the compaction came to: a transcript the host rewrote is ``compacted`` whatever else it says."""
        if self.compacted:
            return COMPACTED
        if self.ok is None:
            return NOT_COMPACTED
        return SKIPPED if self.ok else FAILED


@dataclass(frozen=True)
class Compaction:
    """A compaction as recorded: its id, what it came to, the snapshot before it (if it did compact), and the
    last message the session held then."""

    compaction_id: int
    status: str
    snapshot: str | None
    last_message_id: int | None


@dataclass(frozen=True)
class Snapshot:
    """A named point of a session: the last message it holds (None: the session had none yet)."""

    name: str
    session_id: str
    session_key: str | None
    last_message_id: int | None
    created_at: float
    automatic: bool
    compaction_id: int | None


@dataclass(frozen=True)
class CompactionPoint:
    """A recorded compaction whole, as ``recover --before-compaction`` reads it."""

    compaction_id: int
    session_id: str
    last_message_id: int | None
    recorded_at: float
    tokens_before: int | None
    tokens_after: int | None
    summary: str | None
    status: str
    reason: str | None


def _storable(text: str | None) -> str | None:
    return None if text is None else storable(text)


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise InvalidName(
            "a snapshot name is 1-128 characters of letters, digits, '_', '.', ':' or '-', starting with a"
            f" letter or digit; got {name[:80]!r}"
        )
    return name


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


def compaction_values(
    session: SessionRef, record: CompactionRecord, last_id: int | None, text: Callable[[str | None], str | None]
) -> tuple[object, ...]:
    """A compaction row's values (``session_rowid`` to ``status``) in the column order both backends' inserts
    name, recorded now; ``text`` makes the host's summary and reason storable on the backend."""
    return (
        session.rowid,
        time.time(),
        record.tokens_before,
        record.tokens_after,
        record.compacted,
        text(record.summary),
        text(record.reason),
        last_id,
        record.status,
    )


def compaction_recorded(
    compaction_id: int, status: str, last_id: int | None, snapshot: Callable[[str], object]
) -> Compaction:
    """What recording a compaction answers, after ``snapshot`` named the session as it stood before a
    compaction that did compact (``pre-compaction-<id>``): both backends name and answer alike."""
    name = None
    if status == COMPACTED:
        name = f"pre-compaction-{compaction_id}"
        snapshot(name)
    return Compaction(compaction_id, status, name, last_id)


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


def snapshot_view(row: Any) -> Snapshot:
    """A snapshot row (name, session id and key, last message, created at, automatic, compaction), either store."""
    return Snapshot(str(row[0]), str(row[1]), row[2], row[3], float(row[4]), bool(row[5]), row[6])


def find_compaction(conn: Connection, compaction_id: int) -> CompactionPoint | None:
    row = conn.execute(
        "SELECT c.id, s.session_id, c.last_message_id, c.recorded_at, c.tokens_before, c.tokens_after, c.summary,"
        " c.status, c.reason FROM compactions c JOIN sessions s ON s.id = c.session_rowid WHERE c.id = ?",
        (compaction_id,),
    ).fetchone()
    return None if row is None else CompactionPoint(*row)


@dataclass(frozen=True)
class CompactionMark:
    """A compaction where it happened: after message ``last_message_id``; ``snapshot`` when it compacted."""

    compaction_id: int
    recorded_at: float
    status: str
    reason: str | None
    tokens_before: int | None
    tokens_after: int | None
    last_message_id: int | None
    snapshot: str | None


@dataclass(frozen=True)
class CompactionListed(CompactionMark):
    """A recorded compaction as the UI lists it: the mark, and the session (and its agent) it happened in."""

    session_id: str
    agent_id: str


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


def counts_by_status(rows: Iterable[Sequence[Any]]) -> dict[str, int]:
    """``(status, count)`` rows with every status present, zero or not: both backends' ``compaction_counts``."""
    counts = dict.fromkeys(STATUSES, 0)
    for status, count in rows:
        counts[str(status)] = int(count)
    return counts
