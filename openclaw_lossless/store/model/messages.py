"""Messages as the store hands them out, and the rules of a turn that hold on every backend.

``turn_identities`` gives each message of a turn its identity before any backend stores it; the row helpers
turn the same columns into the same values whichever driver read them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from openclaw_lossless.capture.records import MessageRecord, canonical_json
from openclaw_lossless.store.model.sessions import Scope, SessionRef

CommitStatus = Literal["committed", "duplicate"]


@dataclass(frozen=True)
class StoredMessage:
    id: int
    role: str
    kind: str
    created_at: float
    text: str
    session_rowid: int
    agent_id: str
    cites: int | None
    importance: float | None
    window_key: str  # what the host's window holds of it (``capture.text.window_key``): recall skips those

    @property
    def citation(self) -> str:
        """``msg:N``; a workspace memory-file chunk's is its file and lines (``file:MEMORY.md#L3-7``)."""
        return self.window_key if self.kind == "memory" else f"msg:{self.id}"


def stored_message(row: Sequence[Any]) -> StoredMessage:
    return StoredMessage(
        int(row[0]),
        str(row[1]),
        str(row[2]),
        float(row[3]),
        str(row[4]),
        int(row[5]),
        str(row[6]),
        None if row[7] is None else int(row[7]),
        None if row[8] is None else float(row[8]),
        str(row[9]),
    )


def message_values(
    session: SessionRef,
    record: MessageRecord,
    text: str,
    stored_at: float,
    turn_rowid: int | None,
    kind: str,
    cites: int | None,
) -> tuple[object, ...]:
    """A message row's values from ``session_rowid`` to ``cites``, in the column order both backends' inserts
    name; ``text`` is the record's text as the backend can store it."""
    return (
        session.rowid,
        session.agent_id,
        turn_rowid,
        record.role,
        kind,
        record.created_at,
        stored_at,
        text,
        record.original,
        record.content_hash,
        record.window_key,
        record.tokens,
        record.importance,
        record.importance_label,
        cites,
    )


def turn_identities(records: Sequence[MessageRecord], advancement_key: str) -> list[MessageRecord]:
    """The records of one durable turn, each with its identity in the session.

    A message the host dated (``MessageRecord.dated``) keeps its content identity, so an imported or ingested
    copy of it and the committed one meet. One without is identified by the turn's key and its position in the
    turn: by content alone, a user's second "yes" in a later turn would be taken for the first and silently
    dropped. Replays stay safe without content identity: a known key writes nothing (``commit_turn``).
    """
    return [
        record if record.dated else replace(record, content_hash=_turn_identity(advancement_key, position, record))
        for position, record in enumerate(records)
    ]


def is_turn_identified(record: MessageRecord) -> bool:
    """Whether ``turn_identities`` gave the record its turn identity (it carried no timestamp)."""
    return record.content_hash != hashlib.sha256(record.original.encode("utf-8", "surrogatepass")).digest()


def dated_copy(rows: Iterable[Sequence[Any]], record: MessageRecord) -> int | None:
    """The first ``(id, original)`` row that is ``record`` as the import dated it: its original plus a
    ``timestamp``. Both backends' ``claim_imported`` pick the copy with it, so they claim the same one."""
    for message_id, original in rows:
        value = json.loads(original)
        if (
            isinstance(value, dict)
            and value.pop("timestamp", None) is not None
            and canonical_json(value) == record.original
        ):
            return int(message_id)
    return None


def turn_identified_copy(rows: Iterable[Sequence[Any]], undated: MessageRecord) -> int | None:
    """The first ``(id, content_hash, advancement_key, message_count)`` row still identified by its turn as
    ``undated``: what both backends' ``adopt_committed`` re-identify."""
    for message_id, content_hash, key, count in rows:
        if any(bytes(content_hash) == _turn_identity(str(key), p, undated) for p in range(int(count))):
            return int(message_id)
    return None


@dataclass(frozen=True)
class Neighbour:
    anchor: int
    message: StoredMessage


def neighbours_in_scope(rows: Iterable[Sequence[Any]], scope: Scope) -> list[Neighbour]:
    """``(anchor, message columns...)`` rows as neighbours, those out of scope left out: both backends check
    the scope here rather than in SQL (``neighbours`` says why)."""
    found = [Neighbour(int(row[0]), stored_message(row[1:])) for row in rows]
    return [n for n in found if scope.contains(n.message.agent_id, n.message.session_rowid)]


@dataclass(frozen=True, slots=True)
class MessageView:
    """One stored message as recovery shows it: its text as recalled, and the host's original verbatim."""

    id: int
    citation: str
    role: str
    kind: str
    created_at: float
    text: str
    original: Any
    importance: float | None
    importance_label: str | None
    cites: str | None


@dataclass(frozen=True, slots=True)
class Around:
    """One stored message with up to N messages of its session either side (oldest first)."""

    session_rowid: int
    message: MessageView
    before: list[MessageView]
    after: list[MessageView]


def around_of(row: Sequence[Any] | None, side: Callable[[int, bool], Sequence[Sequence[Any]]]) -> Around | None:
    """The cited message's ``(session_rowid, view...)`` row in its place: ``side(session_rowid, older)`` reads
    the rows just before (newest first) or after it. Both backends build ``around`` with it, so a citation
    reads the same from either; None when the message is not stored."""
    if row is None:
        return None
    session_rowid = int(row[0])
    return Around(
        session_rowid,
        message_view(row[1:]),
        [message_view(r) for r in reversed(side(session_rowid, True))],
        [message_view(r) for r in side(session_rowid, False)],
    )


def message_view(row: Sequence[Any]) -> MessageView:
    return MessageView(
        id=int(row[0]),
        citation=f"msg:{row[0]}",
        role=row[1],
        kind=row[2],
        created_at=float(row[3]),
        text=row[4],
        original=json.loads(row[5]),
        importance=row[6],
        importance_label=row[7],
        cites=None if row[8] is None else f"msg:{row[8]}",
    )


def _turn_identity(advancement_key: str, position: int, record: MessageRecord) -> bytes:
    key = advancement_key.encode("utf-8", "surrogatepass")
    return hashlib.sha256(b"turn\0" + key + b"\0" + str(position).encode() + b"\0" + record.content_hash).digest()
