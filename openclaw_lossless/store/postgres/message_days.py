"""The days each message refers to, on PostgreSQL: written at capture in the commit's transaction.

The rules (which roles, how much text, ``timeexpr``) are the SQLite module's (``store/message_days.py``); a
message's rows go with it (``ON DELETE CASCADE``). The background backfill is not needed here: a PostgreSQL
store is new, or filled by an import that reads each message's days as it inserts it.
"""

from __future__ import annotations

from collections.abc import Sequence

from openclaw_lossless import timeexpr
from openclaw_lossless.store.message_days import MAX_CHARS, ROLES
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.timeexpr import DayRange


def index(conn: Connection, message_id: int, role: str, text: str, created_at: float) -> None:
    """Record the days ``text`` refers to, read as said at ``created_at``."""
    if role not in ROLES or not text:
        return
    days = timeexpr.referenced(text[:MAX_CHARS], created_at)
    if days:
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO message_days (message_id, first_day, last_day) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                [(message_id, *span.epoch_days) for span in days],
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
