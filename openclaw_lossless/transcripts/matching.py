"""Whether a session already holds a host message under another redaction: import's second look at identity.

A stored message's identity is the hash of its redacted original (``capture.records``), so the same host
message captured under two rule sets (live with one version, caught up from the transcript with a later one
whose rules differ) has two identities and would be stored twice. The import therefore also asks for a key that
redaction cannot change: the window key (role, the host's timestamp and text, hashed from the message as the
host has it, before redaction) together with the host's own ids in the message (``toolCallId``,
``idempotencyKey``, ``responseId``, the ids of its tool calls). Two tool results alike in text and time differ in
``toolCallId``; a repeated "yes" in a later turn differs in its timestamp. Only dated messages are matched so: an
undated one has no time to tell two of them apart (``Feed._ingest_undated`` handles those).

Each stored copy stands for one host message: a copy the batch matches exactly (same identity) is not
available to another message of the batch.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from openclaw_lossless.capture.records import MessageRecord
from openclaw_lossless.store.backend import Backend

MARK_FIELDS = ("toolCallId", "idempotencyKey", "responseId")


def marks(message: Any) -> tuple[str, ...]:
    """The host's own ids in a message; an id the rules redacted is not one (it matches nothing)."""
    if not isinstance(message, dict):
        return ()
    found = [f"{name}={message[name]}" for name in MARK_FIELDS if isinstance(message.get(name), str)]
    content = message.get("content")
    if isinstance(content, list):
        found += [
            f"call={block['id']}"
            for block in content
            if isinstance(block, dict) and block.get("type") == "toolCall" and isinstance(block.get("id"), str)
        ]
    return tuple(found)


def held_otherwise(
    ops: Backend, conn: Any, session_rowid: int, records: Sequence[MessageRecord], raw: Sequence[dict[str, Any]]
) -> list[bool]:
    """For each record (``raw``: the message as the host has it), whether the session holds it under another
    identity: a stored message with its window key and its ids that no other record of the batch is."""
    stored = _stored_like(ops, conn, session_rowid, {record.window_key for record in records})
    if not stored:
        return [False] * len(records)
    exact, hashes = {record.content_hash for record in records}, {digest for digest, _, _ in stored}
    pool = Counter((key, tag) for digest, key, tag in stored if digest not in exact)
    held: list[bool] = []
    for record, message in zip(records, raw, strict=True):
        found = False
        if record.content_hash not in hashes:
            for tag in dict.fromkeys((marks(message), marks(_parsed(record.original)))):
                if pool[(record.window_key, tag)] > 0:
                    pool[(record.window_key, tag)] -= 1
                    found = True
                    break
        held.append(found)
    return held


def _stored_like(
    ops: Backend, conn: Any, session_rowid: int, keys: set[str]
) -> list[tuple[bytes, str, tuple[str, ...]]]:
    """(content hash, window key, ids) of the session's messages with one of these window keys; only the
    matching rows are parsed."""
    rows = ops.transcript_ledger.with_window_keys(conn, session_rowid, keys)
    return [(hashed, key, marks(_parsed(original))) for hashed, key, original in rows]


def _parsed(original: str) -> Any:
    try:
        return json.loads(original)
    except ValueError:
        return None
