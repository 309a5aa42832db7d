"""AgentMessage → MessageRecord: everything the store needs to keep one message.

Capture happens before any write, so a message that cannot be captured is rejected (422) and nothing of
its turn is stored. The content hash is over the canonical JSON of the (possibly redacted) original: it is
the message's identity within a session, which makes ``ingest`` idempotent.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from openclaw_lossless.capture import importance
from openclaw_lossless.capture.injected import DEFAULT as DEFAULT_INJECTED
from openclaw_lossless.capture.injected import InjectedText
from openclaw_lossless.capture.redact import Redactor
from openclaw_lossless.capture.text import descriptor_tokens, searchable_text, window_key
from openclaw_lossless.errors import BadRequest

KNOWN_ROLES = frozenset(
    {"user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary", "compactionSummary", "system"}
)


# Deeper than any real message; a hostile one nested thousands deep would otherwise exhaust Python's recursion
# limit in json.dumps and redaction (a 500) instead of being refused.
MAX_DEPTH = 64
_SURROGATE = re.compile("[\ud800-\udfff]")
_ROLE = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{0,63}")  # whole string: fullmatch, so no trailing newline


@dataclass(frozen=True)
class MessageRecord:
    """One message as the store keeps it; ``dated`` says whether ``created_at`` is the host's own stamp.

    A message the host did not date (or dated unreadably) gets the time of capture instead, and the store
    identifies such a message of a turn by its place in the turn (``store/sqlite/messages.turn_identities``): the record
    carries that fact, so the store never reads the host's message again to find it out.
    """

    role: str
    created_at: float
    text: str
    original: str
    content_hash: bytes
    window_key: str
    tokens: int
    importance: float
    importance_label: str
    dated: bool


@dataclass(frozen=True)
class CaptureOptions:
    redactor: Redactor
    redact_originals: bool = True
    include_thinking: bool = False
    injected: InjectedText = DEFAULT_INJECTED  # left out of the derived text, kept in the original


def capture(message: Any, options: CaptureOptions, *, now: float | None = None) -> MessageRecord:
    """Derive the record of one message; raises BadRequest when it is not an AgentMessage."""
    if not isinstance(message, dict):
        raise BadRequest("each message must be a JSON object with a 'role'")
    check_depth(message)
    role = message.get("role")
    if not isinstance(role, str) or not _ROLE.fullmatch(role):
        raise BadRequest("each message needs a 'role' of 1-64 letters, digits, '_' or '-' (user, assistant, ...)")
    key = window_key(message)
    tokens = descriptor_tokens(message)
    text = storable(options.redactor.redact(derived_text(message, options)))
    kept = options.redactor.redact_value(message) if options.redact_originals else message
    original = canonical_json(kept)
    grade = importance.grade(role, text)
    stamped = host_time(message)
    return MessageRecord(
        role=role,
        created_at=(time.time() if now is None else now) if stamped is None else stamped,
        text=text,
        original=original,
        content_hash=hashlib.sha256(original.encode("utf-8", "surrogatepass")).digest(),
        window_key=key,
        tokens=tokens,
        importance=grade.score,
        importance_label=grade.label,
        dated=stamped is not None,
    )


def derived_text(message: dict[str, Any], options: CaptureOptions) -> str:
    """The searchable text without injected text (empty for a message that is all injected), unredacted."""
    if options.injected.whole_message(message):
        return ""
    return searchable_text(message, include_thinking=options.include_thinking, clean=options.injected.strip)


def check_depth(value: Any, limit: int = MAX_DEPTH) -> None:
    """Refuse a value nested more than ``limit`` levels deep (checked without recursion)."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            raise BadRequest(f"a message is nested more than {limit} levels deep; flatten it or send it as a string")
        pending.extend((child, depth + 1) for child in children)


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace: the same object always serialises to the same bytes.

    JavaScript strings may hold lone surrogates, which SQLite cannot store as UTF-8; such an object is
    serialised with ASCII escapes instead, which keeps it exact (it parses back to the same strings).
    """
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"message is not plain JSON: {exc}") from exc
    if _SURROGATE.search(text):
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return text


def storable(text: str) -> str:
    """Text SQLite can store: lone surrogates become U+FFFD (only in derived text, never in the original)."""
    return _SURROGATE.sub("\ufffd", text)


def host_time(message: Any) -> float | None:
    """The time the host stamped on a message, or None when it carries none that ``message_time`` can read."""
    if not isinstance(message, dict):
        return None
    seconds = message_time(message.get("timestamp"), math.nan)
    return None if math.isnan(seconds) else seconds


def dated(message: Any) -> bool:
    """Whether the host stamped the message with a time capture can read (``message_time`` did not fall back)."""
    return host_time(message) is not None


def message_time(timestamp: Any, now: float | None) -> float:
    """Seconds since the epoch from a host timestamp (ms number, seconds number or ISO string)."""
    fallback = time.time() if now is None else now
    if isinstance(timestamp, bool) or timestamp is None:
        return fallback
    if isinstance(timestamp, int | float):
        if not -1e18 < timestamp < 1e18:  # no clock's time (NaN, or an integer of 400 digits no float holds)
            return fallback
        seconds = float(timestamp) / 1000.0 if timestamp > 1e11 else float(timestamp)
        return seconds if 0 < seconds < 1e11 else fallback
    if isinstance(timestamp, str):
        try:
            parsed = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
        except ValueError:
            return fallback
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()
    return fallback
