"""Messages and turns on PostgreSQL: the SQLite module's calls (``store/sqlite/messages.py``) for several sidecars.

A committed turn is one transaction: its advancement key, every message it carries, their days, and their
places on the embedding backlog. The key is committed once across every sidecar sharing the store: the
turn's row is inserted ``ON CONFLICT (advancement_key) DO NOTHING``, which, when another sidecar is
committing the same key, waits for that transaction and then inserts nothing, so the replay answers
``duplicate`` (never a unique-violation error) and writes nothing. Messages are deduplicated per session by
content hash the same way (``ON CONFLICT (session_rowid, content_hash) DO NOTHING``).

What holds no SQL (``StoredMessage``, ``MessageView``, ``turn_identities`` and the turn identity rule) is
the SQLite module's, shared, so both backends identify a message alike.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from openclaw_lossless.capture.grams import gram_text
from openclaw_lossless.capture.records import MessageRecord
from openclaw_lossless.store.model.messages import (
    Around,
    CommitStatus,
    MessageView,
    Neighbour,
    StoredMessage,
    around_of,
    dated_copy,
    is_turn_identified,
    message_values,
    message_view,
    neighbours_in_scope,
    stored_message,
    turn_identified_copy,
)
from openclaw_lossless.store.model.sessions import Scope, SessionRef
from openclaw_lossless.store.postgres import message_days
from openclaw_lossless.store.postgres.connection import Connection

ID_ORDER_LOCK = 0x6C6F73736C657331  # a transaction-level advisory lock every message insert holds until commit
# A ``StoredMessage``'s columns, in its fields' order: bare where the neighbours' ranges select them, then
# under the alias ``m`` where they are read
_NEIGHBOUR = "id, role, kind, created_at, text, session_rowid, agent_id, cites, importance, window_key"
_COLUMNS = ", ".join(f"m.{column}" for column in _NEIGHBOUR.split(", "))
_VIEW = "id, role, kind, created_at, text, original, importance, importance_label, cites"
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip


def date_terms(created_at: float) -> str | None:
    """The day a message was written, in words ("8 May 2023", UTC), indexed beside its text.

    The rule of the SQLite store's generated column (``migrations.DATE_TERMS``): day without a leading
    zero, English month name, four-digit year; None where SQLite's ``strftime`` has no date either.
    """
    try:
        day = datetime.fromtimestamp(created_at, UTC)
    except (OverflowError, OSError, ValueError):
        return None
    return f"{day.day} {_MONTHS[day.month - 1]} {day.year:04d}"


def pg_text(text: str) -> str:
    """Text PostgreSQL can store: NUL becomes U+FFFD (a ``text`` value cannot hold it; SQLite's can). Only the
    derived text needs it: the original is canonical JSON, where NUL is written as an escape."""
    return text.replace("\x00", "\ufffd")


def hold_id_order(conn: Connection) -> None:
    """Make this transaction's new message ids visible only after every lower one.

    Why: PostgreSQL hands out a sequence value at insert, not at commit, so with two writers a lower id could
    become visible after a higher one, and a reader that keeps "every id above the last one I saw" (the term
    statistics' cache, the keyword lane's ``after``) would skip it for ever. Holding one advisory lock from
    the first message insert to the commit orders the writers as SQLite's single writer does; a turn holds it
    for the few milliseconds of its own statements, and the lock is released by the commit or rollback.
    """
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (ID_ORDER_LOCK,))


def insert_records(
    conn: Connection, session: SessionRef, records: Iterable[MessageRecord], *, turn_rowid: int | None = None
) -> list[int]:
    """Insert the records not already stored in this session, nor archived from it (m010), nor named by a
    tombstone; returns the ids of the new ones, in the records' order, each queued for embedding.

    One statement stores the messages and queues them (and one more keeps their days), whatever the turn's
    length: against a server across a network, each round trip would cost the turn its latency. Rows go in
    the records' order, so ids rise with it; a record whose identity is already held (or came earlier in
    this same batch) is left out, as SQLite's INSERT OR IGNORE does.
    """
    batch = list(records)
    if not batch:
        return []
    hold_id_order(conn)
    rows = conn.execute(
        f"WITH input AS (SELECT * FROM unnest({_BATCH_ARRAYS}) WITH ORDINALITY AS i({', '.join(_BATCH)}, position)),"
        " stored AS (INSERT INTO messages (session_rowid, agent_id, turn_rowid, stored_at,"
        f" {', '.join(_BATCH)}) SELECT %s, %s, %s, %s, {', '.join(_BATCH)} FROM input i"
        " WHERE NOT EXISTS (SELECT 1 FROM forgotten f WHERE f.session_id = %s"
        " AND (f.content_hash = i.content_hash OR f.window_key = i.window_key))"
        " AND NOT EXISTS (SELECT 1 FROM archived a WHERE a.session_rowid = %s AND a.content_hash = i.content_hash)"
        " ORDER BY position ON CONFLICT DO NOTHING RETURNING id, content_hash),"
        " queued AS (INSERT INTO embedding_backlog (message_id) SELECT id FROM stored ON CONFLICT DO NOTHING)"
        " SELECT id, content_hash FROM stored ORDER BY id",
        (
            *_columns(batch),
            session.rowid,
            session.agent_id,
            turn_rowid,
            time.time(),
            session.session_id,
            session.rowid,
        ),
    ).fetchall()
    first_of: dict[bytes, MessageRecord] = {}
    for record in batch:
        first_of.setdefault(record.content_hash, record)
    stored = [(int(row[0]), first_of[bytes(row[1])]) for row in rows]
    message_days.index_many(conn, [(ident, r.role, r.text, r.created_at) for ident, r in stored])
    return [ident for ident, _ in stored]


_BATCH = ("role", "created_at", "text", "original", "content_hash", "window_key", "tokens", "importance",
          "importance_label", "date_terms", "grams")  # fmt: skip
_BATCH_ARRAYS = "%s::text[], %s::float8[], %s::text[], %s::text[], %s::bytea[], %s::text[], %s::int[], %s::float8[],"
_BATCH_ARRAYS += " %s::text[], %s::text[], %s::text[]"


def _columns(batch: Sequence[MessageRecord]) -> tuple[list[Any], ...]:
    """The batch as one array per column of ``_BATCH``, for ``unnest``."""
    return (
        [r.role for r in batch],
        [r.created_at for r in batch],
        [pg_text(r.text) for r in batch],
        [r.original for r in batch],
        [r.content_hash for r in batch],
        [r.window_key for r in batch],
        [r.tokens for r in batch],
        [r.importance for r in batch],
        [r.importance_label for r in batch],
        [date_terms(r.created_at) for r in batch],
        [gram_text(pg_text(r.text)) for r in batch],
    )


def insert_row(
    conn: Connection,
    session: SessionRef,
    record: MessageRecord,
    *,
    stored_at: float,
    turn_rowid: int | None = None,
    message_id: int | None = None,
    kind: str = "message",
    cites: int | None = None,
) -> int | None:
    """Insert one message unless its session already holds one of that identity; its id, or None then.

    ``message_id``, ``kind`` and ``cites`` are for the import, which keeps what the export recorded.
    A forgotten message is never stored again, whichever way it comes back.
    """
    if is_forgotten(conn, session.session_id, record.content_hash, record.window_key):
        return None
    hold_id_order(conn)
    # Any conflict leaves the row out, as SQLite's INSERT OR IGNORE: the session's identity, or an imported id.
    row = conn.execute(
        "INSERT INTO messages (id, session_rowid, agent_id, turn_rowid, role, kind, created_at, stored_at, text,"
        " original, content_hash, window_key, tokens, importance, importance_label, cites, date_terms, grams)"
        f" VALUES ({'DEFAULT' if message_id is None else '%s'}, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,"
        " %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
        (
            *(() if message_id is None else (message_id,)),
            *message_values(session, record, pg_text(record.text), stored_at, turn_rowid, kind, cites),
            date_terms(record.created_at),
            gram_text(pg_text(record.text)),
        ),
    ).fetchone()
    if row is None:
        return None
    new_id = int(row[0])
    message_days.index(conn, new_id, record.role, record.text, record.created_at)
    return new_id


_MESSAGE_IDS = "pg_get_serial_sequence('messages', 'id')::regclass"  # the identity column's sequence


def highest_id_given(conn: Connection) -> int:
    """The highest message id this store has given: its sequence's last value (a forgotten newest message's
    id is never drawn again), or the highest stored where a copy set ids by hand."""
    row = conn.execute(
        "SELECT greatest(coalesce((SELECT max(id) FROM messages), 0),"
        f" coalesce(pg_sequence_last_value({_MESSAGE_IDS}), 0))"
    ).fetchone()
    return 0 if row is None else int(row[0])


def give_ids_above(conn: Connection, highest: int) -> None:
    """Every message stored from now on gets an id above ``highest`` (a copy's source gave ids up to it)."""
    conn.execute(
        f"SELECT setval({_MESSAGE_IDS}, %(id)s) WHERE %(id)s > coalesce(pg_sequence_last_value({_MESSAGE_IDS}), 0)",
        {"id": highest},
    )


def restored(conn: Connection, session_rowid: int, content_hash: bytes) -> None:
    """An archived message imported back into the store: its identity is the stored row's again."""
    conn.execute("DELETE FROM archived WHERE session_rowid = %s AND content_hash = %s", (session_rowid, content_hash))


def is_forgotten(conn: Connection, session_id: str, content_hash: bytes, window_key: str) -> bool:
    """Whether a tombstone names this message: by its identity, or by its dated window key."""
    row = conn.execute(
        "SELECT 1 FROM forgotten WHERE session_id = %s AND (content_hash = %s OR window_key = %s) LIMIT 1",
        (session_id, content_hash, window_key),
    ).fetchone()
    return row is not None


def queue_for_embedding(conn: Connection, message_ids: Sequence[int]) -> None:
    if message_ids:
        conn.execute(
            "INSERT INTO embedding_backlog (message_id) SELECT unnest(%s::bigint[]) ON CONFLICT DO NOTHING",
            (list(message_ids),),
        )


def commit_turn(
    conn: Connection,
    session: SessionRef,
    advancement_key: str,
    records: Sequence[MessageRecord],
    *,
    heartbeat: bool,
) -> tuple[CommitStatus, list[int]]:
    """Store a turn once across every sidecar: a key already committed, or being committed by another sidecar's
    open transaction (waited for), writes nothing and answers ``duplicate``."""
    row = conn.execute(
        "INSERT INTO turns (advancement_key, session_rowid, committed_at, message_count, heartbeat)"
        " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (advancement_key) DO NOTHING RETURNING id",
        (advancement_key, session.rowid, time.time(), len(records), heartbeat),
    ).fetchone()
    if row is None:
        return "duplicate", []
    turn_rowid = int(row[0])
    fresh = [r for r in records if not (is_turn_identified(r) and claim_imported(conn, session, r, turn_rowid))]
    return "committed", insert_records(conn, session, fresh, turn_rowid=turn_rowid)


def claim_imported(conn: Connection, session: SessionRef, record: MessageRecord, turn_rowid: int) -> bool:
    """An undated message of a turn that the import already stored: claim that copy for the turn instead
    (``store/sqlite/messages.claim_imported`` says why). The candidates are locked, so two sidecars committing
    two turns never claim one copy twice: the second re-reads it claimed and skips it."""
    rows = conn.execute(
        "SELECT id, original FROM messages WHERE session_rowid = %s AND turn_rowid IS NULL AND role = %s"
        " AND text = %s ORDER BY id FOR UPDATE",
        (session.rowid, record.role, pg_text(record.text)),
    )
    message_id = dated_copy(rows.fetchall(), record)
    if message_id is None:
        return False
    conn.execute("UPDATE messages SET turn_rowid = %s WHERE id = %s", (turn_rowid, message_id))
    return True


def adopt_committed(conn: Connection, session: SessionRef, undated: MessageRecord, imported: MessageRecord) -> bool:
    """The import's side of ``claim_imported``: an undated committed message takes the imported copy's identity."""
    rows = conn.execute(
        "SELECT m.id, m.content_hash, t.advancement_key, t.message_count FROM messages m JOIN turns t"
        " ON t.id = m.turn_rowid WHERE m.session_rowid = %s AND m.role = %s AND m.text = %s AND m.original = %s"
        " ORDER BY m.id FOR UPDATE OF m",
        (session.rowid, undated.role, pg_text(undated.text), undated.original),
    )
    message_id = turn_identified_copy(rows.fetchall(), undated)
    if message_id is None:
        return False
    conn.execute("UPDATE messages SET content_hash = %s WHERE id = %s", (imported.content_hash, message_id))
    return True


def fetch(conn: Connection, ids: Sequence[int]) -> dict[int, StoredMessage]:
    """Messages by id (missing ids are simply absent)."""
    rows = conn.execute(f"SELECT {_COLUMNS} FROM messages m WHERE m.id = ANY(%s::bigint[])", (list(ids),))
    return {int(row[0]): stored_message(row) for row in rows}


def neighbours(conn: Connection, anchors: Sequence[tuple[int, int]], radius: int, scope: Scope) -> list[Neighbour]:
    """Up to ``radius`` in-scope messages either side of each ``(message id, session rowid)`` in its session:
    two short ranges of ``messages_by_session`` per anchor (LATERAL), whatever the history's size."""
    if not anchors or radius <= 0:
        return []
    rows = conn.execute(
        f"SELECT a.anchor, {_COLUMNS}"
        " FROM unnest(%s::bigint[], %s::bigint[]) AS a(anchor, session)"
        f" CROSS JOIN LATERAL (SELECT * FROM (SELECT {_NEIGHBOUR} FROM messages WHERE session_rowid = a.session"
        f" AND id < a.anchor ORDER BY id DESC LIMIT %s) before UNION ALL SELECT * FROM (SELECT {_NEIGHBOUR}"
        " FROM messages WHERE session_rowid = a.session AND id > a.anchor ORDER BY id LIMIT %s) after) m",
        ([a for a, _ in anchors], [s for _, s in anchors], radius, radius),
    )
    return neighbours_in_scope(rows, scope)


def texts(conn: Connection, ids: Sequence[int]) -> dict[int, str]:
    """The stored text of each message still stored."""
    rows = conn.execute("SELECT id, text FROM messages WHERE id = ANY(%s::bigint[])", (list(ids),))
    return {int(r[0]): str(r[1]) for r in rows}


def newest_window_keys(conn: Connection, session_rowid: int, limit: int) -> list[tuple[int, str]]:
    rows = conn.execute(
        "SELECT id, window_key FROM messages WHERE session_rowid = %s ORDER BY id DESC LIMIT %s",
        (session_rowid, limit),
    )
    return [(int(row[0]), str(row[1])) for row in rows]


def count(conn: Connection) -> int:
    """Messages in the store (archived and forgotten ones are gone from it)."""
    row = conn.execute("SELECT count(*) FROM messages").fetchone()
    return 0 if row is None else int(row[0])


def recent(conn: Connection, session_rowid: int, last: int, up_to: int | None = None) -> list[MessageView]:
    """The last ``last`` messages of a session (up to message ``up_to``), oldest first, originals included."""
    rows = conn.execute(
        f"SELECT {_VIEW} FROM messages WHERE session_rowid = %s AND id <= %s ORDER BY id DESC LIMIT %s",
        (session_rowid, up_to if up_to is not None else 2**62, last),
    ).fetchall()
    return [message_view(row) for row in reversed(rows)]


def around(conn: Connection, message_id: int, context: int) -> Around | None:
    """What a citation points at, in its place in the conversation; None when the id is not stored."""
    row = conn.execute(f"SELECT session_rowid, {_VIEW} FROM messages WHERE id = %s", (message_id,)).fetchone()

    def side(session_rowid: int, older: bool) -> list[tuple[Any, ...]]:
        bound, order = ("<", "DESC") if older else (">", "")
        return conn.execute(
            f"SELECT {_VIEW} FROM messages WHERE session_rowid = %s AND id {bound} %s ORDER BY id {order} LIMIT %s",
            (session_rowid, message_id, context),
        ).fetchall()

    return around_of(row, side)
