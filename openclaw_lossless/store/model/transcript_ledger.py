"""What an import of the host's transcripts left in the store, read the same way by both backends."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from openclaw_lossless.store.model import snapshots


def keyed_originals(rows: Iterable[Sequence[Any]]) -> list[tuple[bytes, str, str]]:
    """``(content_hash, window_key, original)`` rows as both backends' ``with_window_keys`` answer them."""
    return [(bytes(row[0]), str(row[1]), str(row[2])) for row in rows]


def claimable(row: Sequence[Any], record: snapshots.CompactionRecord) -> bool:
    """Whether an imported compaction's ``(id, tokens_before, last_message_id)`` row is the hook's: its
    ``tokensBefore`` equal when both say one. Both backends' ``claim_compaction`` decide with it."""
    return None in (row[1], record.tokens_before) or int(row[1]) == record.tokens_before


def claimed(row: Sequence[Any], named: Sequence[Any] | None) -> snapshots.Compaction:
    """What claiming the compaction of ``row`` answers, with its automatic snapshot's ``named`` row (both
    backends): what ``record_compaction`` would have."""
    last_id = None if row[2] is None else int(row[2])
    snapshot = None if named is None else str(named[0])
    return snapshots.Compaction(int(row[0]), snapshots.COMPACTED, snapshot, last_id)
