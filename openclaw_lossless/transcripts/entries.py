"""OpenClaw transcript entries: which kind each is, and what the store keeps of it."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from openclaw_lossless.capture.records import canonical_json
from openclaw_lossless.errors import InvalidSessionKey
from openclaw_lossless.store.model import snapshots
from openclaw_lossless.store.model.sessions import agent_of

MALFORMED = "malformed"
IMPORTED_REASON = "imported from the OpenClaw transcript"  # a compaction's, until the ``compact`` hook claims it


def parse_entry(raw: str | bytes) -> dict[str, Any] | None:
    """One transcript entry, or None when it is not a JSON object (NaN and Infinity are not JSON)."""
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def entry_kind(entry: dict[str, Any] | None) -> str:
    """``message``, ``compaction``, another entry type (not stored), or ``malformed``."""
    kind = None if entry is None else entry.get("type")
    if entry is None or not isinstance(kind, str):
        return MALFORMED
    if kind == "message":
        message = entry.get("message")
        return kind if isinstance(message, dict) and isinstance(message.get("role"), str) else MALFORMED
    if kind == "compaction":
        return kind if isinstance(entry.get("summary"), str) else MALFORMED
    return kind


def agent_message(entry: dict[str, Any], fallback_ms: int | None) -> dict[str, Any]:
    """The AgentMessage of a ``message`` entry, dated by its entry when it carries no timestamp itself."""
    message: dict[str, Any] = entry["message"]
    if "timestamp" in message:
        return message
    stamp = _epoch_ms(entry.get("timestamp"))
    stamp = fallback_ms if stamp is None else stamp
    return message if stamp is None else {**message, "timestamp": stamp}


def _epoch_ms(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int((parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp() * 1000)


def compaction_record(entry: dict[str, Any]) -> snapshots.CompactionRecord:
    return snapshots.CompactionRecord(
        tokens_before=_count(entry.get("tokensBefore")),
        tokens_after=_count(entry.get("tokensAfter")),
        compacted=True,
        summary=entry["summary"],
        reason=IMPORTED_REASON,
    )


def shrink_record(before: int, after: int) -> snapshots.CompactionRecord:
    """The compaction a legacy transcript's drop in message count stands for; OpenClaw left no summary of it."""
    return snapshots.CompactionRecord(
        tokens_before=None,
        tokens_after=None,
        compacted=True,
        summary=None,
        reason=f"imported: the OpenClaw transcript was rewritten from {before} to {after} messages",
    )


def _count(value: Any) -> int | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 2**62:
        return int(value)
    return None


def entry_key(entry: dict[str, Any]) -> str:
    """A compaction's identity: its entry id, or the hash of the entry when it has none (version 1 files)."""
    entry_id = entry.get("id")
    if isinstance(entry_id, str) and entry_id and len(entry_id) <= 256:
        return entry_id
    return hashlib.sha256(canonical_json(entry).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def session_key_for(recorded: str | None, agent_id: str, session_id: str) -> str | None:
    """The key OpenClaw recorded (legacy bare keys scoped to the agent), else ``agent:<id>:import:<session>``."""
    candidates = [_scoped(recorded, agent_id), f"agent:{agent_id}:import:{session_id}"]
    for candidate in candidates:
        if candidate is None:
            continue
        try:
            agent_of(candidate)
        except InvalidSessionKey:
            continue
        return candidate
    return None


def _scoped(key: str | None, agent_id: str) -> str | None:
    """OpenClaw's ``scopeLegacySessionKeyToAgent``: ``main`` → ``agent:<id>:main``, ``x`` → ``agent:<id>:x``."""
    raw = (key or "").strip()
    if not raw:
        return None
    if raw.lower() == "main":
        return f"agent:{agent_id}:main"
    return raw if raw.lower().startswith("agent:") else f"agent:{agent_id}:{raw}"
