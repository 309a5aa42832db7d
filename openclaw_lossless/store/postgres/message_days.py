"""The days each message refers to, on PostgreSQL: written at capture in the commit's transaction.

The rules (which roles, how much text, ``timeexpr``) are the SQLite module's (``store/sqlite/message_days.py``); a
message's rows go with it (``ON DELETE CASCADE``). The background backfill keeps SQLite's rule (newest first, a
batch per write transaction, a cursor in ``meta``) for stores filled without reading days (a copy from
another backend); two sidecars stepping at once read a batch twice at worst and store each day once.
"""

from __future__ import annotations

from collections.abc import Sequence

from openclaw_lossless import timeexpr
from openclaw_lossless.store.model.message_days import (
    BACKFILL_BATCH,
    BACKFILL_KEY,
    LANGUAGES_KEY,
    MAX_CHARS,
    ROLES,
    languages,
)
from openclaw_lossless.store.postgres import meta
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.timeexpr import DayRange


def index(conn: Connection, message_id: int, role: str, text: str, created_at: float) -> None:
    """Record the days ``text`` refers to, read as said at ``created_at``."""
    index_many(conn, [(message_id, role, text, created_at)])


def index_many(conn: Connection, messages: Sequence[tuple[int, str, str, float]]) -> None:
    """Record the days each ``(id, role, text, created_at)`` refers to, in one statement."""
    rows = [
        (message_id, *span.epoch_days)
        for message_id, role, text, created_at in messages
        if role in ROLES and text
        for span in timeexpr.referenced(text[:MAX_CHARS], created_at)
    ]
    if rows:
        conn.execute(
            "INSERT INTO message_days (message_id, first_day, last_day)"
            " SELECT * FROM unnest(%s::bigint[], %s::int[], %s::int[]) ON CONFLICT DO NOTHING",
            ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]),
        )


def of(conn: Connection, ids: Sequence[int]) -> dict[int, list[DayRange]]:
    """The day ranges each message refers to (messages that name none are absent)."""
    found: dict[int, list[DayRange]] = {}
    rows = conn.execute(
        "SELECT message_id, first_day, last_day FROM message_days WHERE message_id = ANY(%s::bigint[])"
        " ORDER BY message_id, first_day, last_day",
        (list(ids),),
    )
    for message_id, first, last in rows:
        found.setdefault(int(message_id), []).append(DayRange.from_epoch_days(int(first), int(last)))
    return found


def read_again(conn: Connection) -> None:
    """Have the server read every stored message's days again in the background."""
    row = conn.execute("SELECT max(id) FROM messages").fetchone()
    if row is not None and row[0] is not None:
        meta.put(conn, BACKFILL_KEY, str(int(row[0]) + 1))


def read_again_in_new_languages(conn: Connection) -> bool:
    """Queue every message to be read again when the stored days were read in fewer languages than
    ``timeexpr`` reads now; whether it did (the SQLite module's rule)."""
    if meta.get(conn, LANGUAGES_KEY) == languages():
        return False
    read_again(conn)
    meta.put(conn, LANGUAGES_KEY, languages())
    return True


def backfill_pending(conn: Connection) -> bool:
    return meta.get(conn, BACKFILL_KEY) is not None


def backfill_step(conn: Connection, batch: int = BACKFILL_BATCH) -> bool:
    """Read the next ``batch`` messages below the cursor (newest first); whether any are left."""
    below = meta.get(conn, BACKFILL_KEY)
    if below is None:
        return False
    rows = conn.execute(
        "SELECT id, role, text, created_at FROM messages WHERE id < %s ORDER BY id DESC LIMIT %s", (int(below), batch)
    ).fetchall()
    for message_id, role, text, created_at in rows:
        index(conn, int(message_id), str(role), str(text), float(created_at))
    if len(rows) < batch:
        meta.remove(conn, BACKFILL_KEY)
        return False
    meta.put(conn, BACKFILL_KEY, str(rows[-1][0]))
    return True
