"""Compactions and snapshots: what the host reported, what the store recorded, and how a name is checked."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from openclaw_lossless.errors import InvalidName
from openclaw_lossless.store.model.sessions import SessionRef

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


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise InvalidName(
            "a snapshot name is 1-128 characters of letters, digits, '_', '.', ':' or '-', starting with a"
            f" letter or digit; got {name[:80]!r}"
        )
    return name


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


def snapshot_view(row: Any) -> Snapshot:
    """A snapshot row (name, session id and key, last message, created at, automatic, compaction), either store."""
    return Snapshot(str(row[0]), str(row[1]), row[2], row[3], float(row[4]), bool(row[5]), row[6])


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


def counts_by_status(rows: Iterable[Sequence[Any]]) -> dict[str, int]:
    """``(status, count)`` rows with every status present, zero or not: both backends' ``compaction_counts``."""
    counts = dict.fromkeys(STATUSES, 0)
    for status, count in rows:
        counts[str(status)] = int(count)
    return counts
