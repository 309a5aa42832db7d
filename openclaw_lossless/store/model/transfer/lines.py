"""A line of an export file (``store/sqlite/transfer/``) → a checked record, ready to write; None when malformed.

Import treats a file as untrusted input, and this is its capture step, run before any write. A message
line's message goes through ``capture`` as if it had been committed over HTTP: its searchable text is derived
from the original and redacted, the original is redacted when ``redact_originals`` is on, the importance is
graded and the content hash taken. Only what the host computed on the message before redaction (window key,
token estimate) and the store's bookkeeping (ids, times, turn) come from the line. Every other field is
checked for the type and range the store holds, so no line can fail half-way through its write.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from openclaw_lossless.capture.importance import label_for
from openclaw_lossless.capture.records import CaptureOptions, MessageRecord, canonical_json, capture, storable
from openclaw_lossless.errors import BadRequest
from openclaw_lossless.memory_files.chunk_records import CITATION as MEMORY_CITATION
from openclaw_lossless.memory_files.chunk_records import chunk_record
from openclaw_lossless.store.model.memory_files import KIND as MEMORY_KIND
from openclaw_lossless.store.model.sessions import agent_of, check_identifier
from openclaw_lossless.store.model.snapshots import COMPACTED, NOT_COMPACTED, STATUSES, check_name
from openclaw_lossless.store.model.subagents import outcome_identity

_REQUIRED = ("id", "sessionId", "role", "createdAt", "message", "text", "contentHash", "windowKey", "tokens")
_MAX_INT = 2**63 - 1  # SQLite's INTEGER
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
T = TypeVar("T")


class Malformed(ValueError):
    """A line that is not what an export writes."""


@dataclass(frozen=True)
class MessageLine:
    id: int
    session_id: str
    session_key: str | None
    kind: str
    record: MessageRecord
    stored_at: float | None
    cites: int | None
    advancement_key: str | None
    child_key: str | None = None  # an outcome's: whose answer it carries


@dataclass(frozen=True)
class SessionLine:
    session_id: str
    session_key: str | None
    created_at: float
    last_seen_at: float


@dataclass(frozen=True)
class TurnLine:
    advancement_key: str
    session_id: str
    committed_at: float
    message_count: int
    heartbeat: bool


@dataclass(frozen=True)
class CompactionLine:
    id: int
    session_id: str
    recorded_at: float
    tokens_before: int | None
    tokens_after: int | None
    compacted: bool
    summary: str | None
    reason: str | None
    last_message_id: int | None
    status: str  # compacted, failed, skipped, not-compacted (store/sqlite/snapshots.py)


@dataclass(frozen=True)
class SnapshotLine:
    id: int
    name: str
    session_id: str
    last_message_id: int | None
    created_at: float
    automatic: bool
    compaction_id: int | None


@dataclass(frozen=True)
class LinkLine:
    id: int
    parent_key: str
    child_key: str
    context_mode: str | None
    spawned_at: float
    ended_at: float | None
    ended_reason: str | None


@dataclass(frozen=True)
class ForgottenLine:
    """A tombstone (``store/sqlite/forgetting.py``): a forgotten message's identity in its session, never its text."""

    session_id: str
    content_hash: bytes
    window_key: str | None
    forgotten_at: float


Line = MessageLine | SessionLine | TurnLine | CompactionLine | SnapshotLine | LinkLine | ForgottenLine


def parse_line(raw: bytes, options: CaptureOptions) -> Line | None:
    """The record a line holds, captured and checked; None when the line is malformed."""
    try:
        record = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
        if not isinstance(record, dict):
            return None
        return _typed(record, options)
    # ValueError: bad UTF-8, bad JSON, Malformed; TypeError: a JSON shape no check foresaw (a list for a key)
    except (ValueError, KeyError, TypeError, RecursionError, BadRequest):
        return None


def _reject_constant(name: str) -> Any:
    raise Malformed(f"{name} is not JSON")


def _typed(record: dict[str, Any], options: CaptureOptions) -> Line:
    kind = record.get("type", "message")
    if kind == "message":
        return _message_line(record, options)
    parse = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parse is None:
        raise Malformed(f"unknown record type {kind!r}")
    return _redacted(parse(record), options)


def _redacted(line: Line, options: CaptureOptions) -> Line:
    """The free text of a compaction or a subagent link, redacted as the live hooks redact it."""
    redact = options.redactor.redact_optional
    if isinstance(line, CompactionLine):
        return dataclasses.replace(line, summary=redact(line.summary), reason=redact(line.reason))
    if isinstance(line, LinkLine):
        return dataclasses.replace(line, ended_reason=redact(line.ended_reason))
    return line


def _session_line(record: dict[str, Any]) -> SessionLine:
    created, last_seen = _number(record["createdAt"]), _number(record["lastSeenAt"])
    return SessionLine(_session_id(record), _session_key(record), created, last_seen)


def _turn_line(record: dict[str, Any]) -> TurnLine:
    return TurnLine(
        check_identifier(_string(record["advancementKey"]), "advancementKey"),
        _session_id(record),
        _number(record["committedAt"]),
        _integer(record["messageCount"]),
        _flag(record["heartbeat"]),
    )


def _compaction_line(record: dict[str, Any]) -> CompactionLine:
    return CompactionLine(
        _integer(record["id"], low=1),
        _session_id(record),
        _number(record["recordedAt"]),
        _optional(_integer, record.get("tokensBefore")),
        _optional(_integer, record.get("tokensAfter")),
        _flag(record["compacted"]),
        _optional(_text, record.get("summary")),
        _optional(_text, record.get("reason")),
        _optional(_integer, record.get("lastMessageId")),
        _compaction_status(record),
    )


def _compaction_status(record: dict[str, Any]) -> str:
    """A file written before compactions had a status says only whether the host compacted."""
    status = record.get("status")
    if status is None:
        return COMPACTED if _flag(record["compacted"]) else NOT_COMPACTED
    if status not in STATUSES:
        raise Malformed(f"unknown compaction status {status!r}")
    return str(status)


def _snapshot_line(record: dict[str, Any]) -> SnapshotLine:
    return SnapshotLine(
        _integer(record["id"], low=1),
        check_name(_string(record["name"])),
        _session_id(record),
        _optional(_integer, record.get("lastMessageId")),
        _number(record["createdAt"]),
        _flag(record["automatic"]),
        _optional(_integer, record.get("compactionId")),
    )


def _link_line(record: dict[str, Any]) -> LinkLine:
    parent, child = _string(record["parentSessionKey"]), _string(record["childSessionKey"])
    agent_of(parent)  # both refused as the subagent hooks refuse them
    agent_of(child)
    return LinkLine(
        _integer(record["id"], low=1),
        parent,
        child,
        _optional(_text, record.get("contextMode")),
        _number(record["spawnedAt"]),
        _optional(_number, record.get("endedAt")),
        _optional(_text, record.get("endedReason")),
    )


def _forgotten_line(record: dict[str, Any]) -> ForgottenLine:
    digest, window_key = _string(record["contentHash"]), record.get("windowKey")
    if not _HEX64.match(digest) or (window_key is not None and not _HEX64.match(_string(window_key))):
        raise Malformed("contentHash and windowKey are SHA-256 digests in hex")
    return ForgottenLine(_session_id(record), bytes.fromhex(digest), window_key, _number(record["forgottenAt"]))


_PARSERS: dict[str, Callable[[dict[str, Any]], Line]] = {
    "forgotten": _forgotten_line,
    "session": _session_line,
    "turn": _turn_line,
    "compaction": _compaction_line,
    "snapshot": _snapshot_line,
    "subagentLink": _link_line,
}


def _message_line(record: dict[str, Any], options: CaptureOptions) -> MessageLine:
    if any(key not in record for key in _REQUIRED) or not isinstance(record["message"], dict):
        raise Malformed("not a message line")
    created_at = _number(record["createdAt"])
    kind, child_key = record.get("kind") or "message", None
    if kind == "message":
        captured = capture(record["message"], options, now=created_at)
    elif kind == "outcome":
        captured, child_key = _outcome(record, options)
    elif kind == MEMORY_KIND:
        captured = _memory_chunk(record, options, created_at)
    else:
        raise Malformed(f"unknown message kind {kind!r}")
    window_key = _string(record["windowKey"])
    if kind == MEMORY_KIND:  # a chunk's window key is its citation: already checked and rebuilt above
        window_key = captured.window_key
    elif not _HEX64.match(window_key) or not _HEX64.match(_string(record["contentHash"])):
        raise Malformed("windowKey and contentHash are SHA-256 digests in hex")
    # The host computed the window key and the token estimate on the message before redaction: recomputing
    # them from a redacted original would stop the stored message matching the host's.
    captured = dataclasses.replace(captured, window_key=window_key, tokens=_integer(record["tokens"]))
    if kind == "message":
        captured = dataclasses.replace(captured, content_hash=_identity(record, captured))
    key = record.get("advancementKey")
    return MessageLine(
        _integer(record["id"], low=1),
        _session_id(record),
        _session_key(record),
        kind,
        captured,
        _optional(_number, record.get("storedAt")),
        _optional(_integer, record.get("cites")),
        None if not key else check_identifier(_string(key), "advancementKey"),
        child_key,
    )


def _memory_chunk(record: dict[str, Any], options: CaptureOptions, created_at: float) -> MessageRecord:
    """A workspace memory-file chunk (``memory_files/``): rebuilt from its file, lines and text, redacted here
    again, so its identity is the one the indexer gives it (nothing else a line puts there is kept)."""
    message: dict[str, Any] = record["message"]
    lines, content = message.get("lines"), message.get("content")
    citation = MEMORY_CITATION.match(_string(record["windowKey"]))
    if (
        citation is None
        or not isinstance(content, str)
        or not isinstance(lines, list)
        or lines != [int(citation["first"]), int(citation["last"])]
        or message.get("file") != citation["path"]
    ):
        raise Malformed("a memory chunk's original names its file and lines as its windowKey does")
    return chunk_record(citation["path"], lines[0], lines[1], content, created_at, options)


def _identity(record: dict[str, Any], captured: MessageRecord) -> bytes:
    """The message's identity in its session: re-derived when it is its content's hash, else kept as exported.

    A content hash is taken again over the original as stored here (redaction may have changed it), so a
    commit of the same message meets it. Any other identity (a store may identify a message by its turn and
    place in it) cannot be derived from the line and is kept, so importing a store's export into that store
    finds every message already there.
    """
    exported = bytes.fromhex(_string(record["contentHash"]))
    original = canonical_json(record["message"])
    content = hashlib.sha256(original.encode("utf-8", "surrogatepass")).digest()
    return captured.content_hash if exported == content else exported


def _outcome(record: dict[str, Any], options: CaptureOptions) -> tuple[MessageRecord, str]:
    """A subagent's outcome copied into its parent (``subagents.py``): not an AgentMessage, so not captured.

    Its text is the child's answer, captured once in the child, and redacted here again by the same redactor;
    its grade is the child's. Its original and hash are rebuilt from what it cites (``outcome_identity``), so
    nothing else a line puts there is kept.
    """
    message: dict[str, Any] = record["message"]
    child_key = _string(message.get("childSessionKey"))
    agent_of(child_key)
    if message.get("kind") != "subagentOutcome":
        raise Malformed("an outcome's original is a subagentOutcome")
    original, digest = outcome_identity(child_key, _integer(record["cites"], low=1))
    importance = _optional(_number, record.get("importance"))
    if importance is not None and not 0 <= importance <= 1:
        raise Malformed("importance is between 0 and 1")
    captured = MessageRecord(
        role=check_identifier(_string(record["role"]), "role"),
        created_at=_number(record["createdAt"]),
        text=storable(options.redactor.redact(_string(record["text"]))),
        original=original,
        content_hash=digest,
        window_key="",
        tokens=0,
        importance=0.0 if importance is None else importance,
        importance_label=label_for(0.0 if importance is None else importance),
        dated=False,  # never a turn's message: its identity is its citation, not its place in a turn
    )
    return captured, child_key


def _session_id(record: dict[str, Any]) -> str:
    return check_identifier(_string(record["sessionId"]), "sessionId")


def _session_key(record: dict[str, Any]) -> str | None:
    key = _optional(_string, record.get("sessionKey"))
    agent_of(key)  # refuses a key the hooks would refuse
    return key


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise Malformed("expected a string")
    return value


def _text(value: Any) -> str:
    """Free text as the hooks store it (a lone surrogate from JavaScript becomes U+FFFD)."""
    return storable(_string(value))


def _integer(value: Any, *, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= _MAX_INT:
        raise Malformed(f"expected an integer from {low} to 2**63-1")
    return value


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Malformed("expected a number")
    try:
        number = float(value)
    except OverflowError as exc:
        raise Malformed("number out of range") from exc
    if not math.isfinite(number):
        raise Malformed("number out of range")
    return number


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise Malformed("expected true or false")
    return value


def _optional(check: Callable[[Any], T], value: Any) -> T | None:
    return None if value is None else check(value)
