"""Pairs of characters for the messages stored before the keyword index held them, on PostgreSQL.

The SQLite module's rule (``store/sqlite/keyword_pairs.py``): m009 makes the ``search`` vector hold the
pairs and records a cursor; the server pairs the older messages newest first, a batch per transaction,
each committing with the cursor. Setting ``messages.grams`` recomputes the row's generated ``search``
vector and its GIN entry in that transaction. Two sidecars stepping at once write the same pairs to the
same rows at worst.
"""

from __future__ import annotations

import logging

from openclaw_lossless.capture.grams import gram_text
from openclaw_lossless.store.postgres import meta
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.sqlite.keyword_pairs import BATCH, LOG_EVERY, PROGRESS_KEY, PairsProgress

log = logging.getLogger(__name__)


def queue_all(conn: Connection) -> None:
    """Have every message stored so far paired in the background (m009; none stored: nothing to do)."""
    row = conn.execute("SELECT max(id), count(*) FROM messages").fetchone()
    if row is not None and row[0] is not None:
        meta.put(conn, PROGRESS_KEY, PairsProgress(int(row[0]) + 1, 0, int(row[1])).encode())


def progress(conn: Connection) -> PairsProgress | None:
    """The backfill's position, or None when no message waits for its pairs."""
    value = meta.get(conn, PROGRESS_KEY)
    return None if value is None else PairsProgress.decode(value)


def step(conn: Connection, batch: int = BATCH) -> bool:
    """Pair the next ``batch`` waiting messages (newest first); whether any are left."""
    meta.hold(conn, PROGRESS_KEY)
    at = progress(conn)
    if at is None:
        return False
    rows = conn.execute(
        "SELECT id, text FROM messages WHERE id < %s AND grams IS NULL ORDER BY id DESC LIMIT %s", (at.below, batch)
    ).fetchall()
    paired = [(int(row[0]), grams) for row in rows if (grams := gram_text(str(row[1]))) is not None]
    if paired:
        conn.execute(
            "UPDATE messages m SET grams = d.grams FROM unnest(%s::bigint[], %s::text[]) AS d(id, grams)"
            " WHERE m.id = d.id AND m.grams IS NULL",
            ([ident for ident, _ in paired], [grams for _, grams in paired]),
        )
    done = min(at.done + len(rows), at.total)
    if len(rows) < batch:
        meta.remove(conn, PROGRESS_KEY)
        log.info("keyword pairs of older messages: all %d messages read, the backfill is done", at.total)
        return False
    meta.put(conn, PROGRESS_KEY, PairsProgress(int(rows[-1][0]), done, at.total).encode())
    if done // LOG_EVERY > at.done // LOG_EVERY:
        log.info("keyword pairs of older messages: %d of %d messages read", done, at.total)
    return True
