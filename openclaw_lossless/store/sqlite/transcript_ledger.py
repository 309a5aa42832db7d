"""The transcript ledger: the store's side of reading the host's transcripts (``transcripts/``). What a session
already holds, the reader's marks in ``meta``, and compactions recorded twice over (live by the hook, and from
the transcript).

Why a module of its own: reading and catch-up decide *what* to read from OpenClaw's files; *how* the
lossless store answers "do we hold this already?" is SQL over its own tables, and that stays in ``store/``.
"""

from __future__ import annotations

from collections.abc import Iterable

from openclaw_lossless.store.model.sessions import SessionRef
from openclaw_lossless.store.model.snapshots import Compaction, CompactionRecord
from openclaw_lossless.store.model.transcript_ledger import claimable, claimed, keyed_originals
from openclaw_lossless.store.sqlite import snapshots
from openclaw_lossless.store.sqlite.connection import Connection
from openclaw_lossless.store.statements import SQLITE
from openclaw_lossless.store.statements.transcript_ledger import Held

# -- sessions and messages -----------------------------------------------------------------------------------


_HELD = Held(SQLITE)  # what is held: the same statements on both backends
held_session_ids = _HELD.held_session_ids
first_contact = _HELD.first_contact
holds_content = _HELD.holds_content
newest_time = _HELD.newest_time
keys_and_times = _HELD.keys_and_times


def with_window_keys(conn: Connection, session_rowid: int, keys: Iterable[str]) -> list[tuple[bytes, str, str]]:
    """``(content_hash, window_key, original)`` of the session's messages with one of these window keys.

    One read of the session's rows (``messages_by_session``); the caller parses only these originals.
    """
    wanted = sorted(set(keys))
    if not wanted:
        return []
    marks = ",".join("?" * len(wanted))
    rows = conn.execute(
        f"SELECT content_hash, window_key, original FROM messages WHERE session_rowid = ? AND window_key IN ({marks})",
        (session_rowid, *wanted),
    )
    return keyed_originals(rows)


# -- marks in meta ---------------------------------------------------------------------------------------------


def mark_all(conn: Connection, keys: Iterable[str]) -> None:
    """Set each key in ``meta`` (value '1'); a key already there stays as it is."""
    conn.executemany("INSERT OR IGNORE INTO meta (key, value) VALUES (?, '1')", [(key,) for key in keys])


def keys_under(conn: Connection, prefix: str) -> list[str]:
    """The ``meta`` keys that start with ``prefix`` (which ends in '.'): one range of meta's primary key."""
    rows = conn.execute("SELECT key FROM meta WHERE key >= ? AND key < ?", (prefix, prefix[:-1] + "/"))
    return [str(row[0]) for row in rows]


# -- compactions ---------------------------------------------------------------------------------------------


def live_compaction(conn: Connection, session_rowid: int, record: CompactionRecord) -> int | None:
    """The id of a compaction the ``compact`` hook already recorded for this imported one, if any: same
    session and summary, or, for one inferred without a summary, one recorded where the session now ends."""
    same: str | int | None
    # Only one that did compact: a failed attempt the hook recorded at the same point is not this compaction.
    if record.summary is not None:
        sql = "SELECT id FROM compactions WHERE session_rowid = ? AND summary = ? AND status = 'compacted'"
        same = record.summary
    else:
        sql = "SELECT id FROM compactions WHERE session_rowid = ? AND last_message_id IS ? AND status = 'compacted'"
        same = snapshots.last_message_id(conn, session_rowid)
    row = conn.execute(sql, (session_rowid, same)).fetchone()
    return None if row is None else int(row[0])


def claim_compaction(
    conn: Connection, session: SessionRef, record: CompactionRecord, imported_reason: str
) -> Compaction | None:
    """The ``compact`` hook takes a compaction the import recorded (reason ``imported_reason``, not yet
    claimed, same redacted summary, ``tokensBefore`` equal when both say): its reason and token counts
    replace the import's, which also marks it claimed. Returns what ``record_compaction`` would, or None."""
    row = conn.execute(
        "SELECT id, tokens_before, last_message_id FROM compactions WHERE session_rowid = ? AND summary = ?"
        " AND status = 'compacted' AND reason = ? ORDER BY id DESC LIMIT 1",
        (session.rowid, record.summary, imported_reason),
    ).fetchone()
    if row is None or not claimable(row, record):
        return None
    conn.execute(
        "UPDATE compactions SET reason = ?, tokens_before = coalesce(?, tokens_before),"
        " tokens_after = coalesce(?, tokens_after) WHERE id = ?",
        (record.reason, record.tokens_before, record.tokens_after, row[0]),
    )
    named = conn.execute("SELECT name FROM snapshots WHERE compaction_id = ?", (row[0],)).fetchone()
    return claimed(row, named)
