"""What history import and catch-up ask the store, on PostgreSQL (``store/sqlite/transcript_ledger.py``'s calls).

The questions are the SQLite module's: does a session hold this already, which marks are in ``meta``, was
this compaction recorded live by the hook. Two things differ because several sidecars share one store:

- ``keys_under`` matches a prefix with ``starts_with`` rather than a key range: ``meta.key`` compares by the
  database's collation, under which a range from ``prefix`` to ``prefix[:-1] + '/'`` need not hold exactly
  the keys that start with ``prefix`` (a linguistic collation weighs punctuation last);
- ``claim_compaction`` locks the compaction it takes (``FOR UPDATE``): two sidecars' hooks claiming the
  same imported compaction at once claim it once, the second re-reads it claimed and finds nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from openclaw_lossless.store.model.sessions import SessionRef
from openclaw_lossless.store.model.snapshots import COMPACTED, Compaction, CompactionRecord
from openclaw_lossless.store.model.transcript_ledger import claimable, claimed, keyed_originals
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.postgres.snapshots import stored_text
from openclaw_lossless.store.statements import POSTGRES
from openclaw_lossless.store.statements.transcript_ledger import Held

# -- sessions and messages -----------------------------------------------------------------------------------


_HELD = Held(POSTGRES)  # what is held: the same statements on both backends
held_session_ids = _HELD.held_session_ids
first_contact = _HELD.first_contact
holds_content = _HELD.holds_content
newest_time = _HELD.newest_time
keys_and_times = _HELD.keys_and_times


def with_window_keys(conn: Connection, session_rowid: int, keys: Iterable[str]) -> list[tuple[bytes, str, str]]:
    """``(content_hash, window_key, original)`` of the session's messages with one of these window keys, in id
    order: one range of ``messages_by_session``; the caller parses only these originals."""
    wanted = sorted(set(keys))
    if not wanted:
        return []
    rows = conn.execute(
        "SELECT content_hash, window_key, original FROM messages WHERE session_rowid = %s"
        " AND window_key = ANY(%s::text[]) ORDER BY id",
        (session_rowid, wanted),
    )
    return keyed_originals(rows)


# -- marks in meta ---------------------------------------------------------------------------------------------


def mark_all(conn: Connection, keys: Iterable[str]) -> None:
    """Set each key in ``meta`` (value '1'), in one statement; a key already there stays as it is."""
    wanted = list(dict.fromkeys(keys))
    if wanted:
        conn.execute(
            "INSERT INTO meta (key, value) SELECT unnest(%s::text[]), '1' ON CONFLICT (key) DO NOTHING", (wanted,)
        )


def keys_under(conn: Connection, prefix: str) -> list[str]:
    """The ``meta`` keys that start with ``prefix``, in byte order (as SQLite's primary key returns them)."""
    rows = conn.execute('SELECT key FROM meta WHERE starts_with(key, %s) ORDER BY key COLLATE "C"', (prefix,))
    return [str(row[0]) for row in rows]


# -- compactions ---------------------------------------------------------------------------------------------


def live_compaction(conn: Connection, session_rowid: int, record: CompactionRecord) -> int | None:
    """The id of a compaction the ``compact`` hook already recorded for this imported one, if any: same
    session and summary, or, for one inferred without a summary, one recorded where the session now ends."""
    # Only one that did compact: a failed attempt the hook recorded at the same point is not this compaction.
    if record.summary is not None:
        row = conn.execute(
            "SELECT id FROM compactions WHERE session_rowid = %s AND summary = %s AND status = %s ORDER BY id LIMIT 1",
            (session_rowid, stored_text(record.summary), COMPACTED),
        ).fetchone()
    else:
        row = conn.execute(
            "SELECT id FROM compactions WHERE session_rowid = %s AND status = %s AND last_message_id"
            " IS NOT DISTINCT FROM (SELECT max(id) FROM messages WHERE session_rowid = %s) ORDER BY id LIMIT 1",
            (session_rowid, COMPACTED, session_rowid),
        ).fetchone()
    return None if row is None else int(row[0])


def claim_compaction(
    conn: Connection, session: SessionRef, record: CompactionRecord, imported_reason: str
) -> Compaction | None:
    """The ``compact`` hook takes a compaction the import recorded (reason ``imported_reason``, not yet
    claimed, same redacted summary, ``tokensBefore`` equal when both say): its reason and token counts
    replace the import's, which also marks it claimed. Returns what ``record_compaction`` would, or None.

    The row is locked: a hook on another sidecar claiming it at the same moment waits, then re-reads it
    with the claimed reason and passes it over.
    """
    row = conn.execute(
        "SELECT id, tokens_before, last_message_id FROM compactions WHERE session_rowid = %s AND summary = %s"
        " AND status = %s AND reason = %s ORDER BY id DESC LIMIT 1 FOR UPDATE",
        (session.rowid, stored_text(record.summary), COMPACTED, imported_reason),
    ).fetchone()
    if row is None or not claimable(row, record):
        return None
    conn.execute(
        "UPDATE compactions SET reason = %s, tokens_before = coalesce(%s, tokens_before),"
        " tokens_after = coalesce(%s, tokens_after) WHERE id = %s",
        (stored_text(record.reason), record.tokens_before, record.tokens_after, row[0]),
    )
    named = conn.execute(
        "SELECT name FROM snapshots WHERE compaction_id = %s ORDER BY id LIMIT 1", (row[0],)
    ).fetchone()
    return claimed(row, named)
