"""Pairs of characters for the messages stored before the keyword index held them, on PostgreSQL.

The SQLite module's rule (``store/sqlite/keyword_pairs.py``): m009 makes the ``search`` vector hold the
pairs and records a cursor; the server pairs the older messages newest first, a batch per transaction,
each committing with the cursor. Setting ``messages.grams`` recomputes the row's ``search`` vector (its
trigger) and its GIN entry in that transaction. The step holds a lock on the cursor, so two sidecars take
turns; a row that has its pairs already is left as it is.
"""

from __future__ import annotations

from openclaw_lossless.capture.grams import gram_text
from openclaw_lossless.store.postgres import meta
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.statements import POSTGRES
from openclaw_lossless.store.statements import keyword_pairs as shared
from openclaw_lossless.store.statements.keyword_pairs import BATCH, PairsProgress


def progress(conn: Connection) -> PairsProgress | None:
    """The backfill's position, or None when no message waits for its pairs."""
    return shared.progress(conn, meta)


def step(conn: Connection, batch: int = BATCH) -> bool:
    """Pair the next ``batch`` waiting messages (newest first); whether any are left."""
    meta.hold(conn, shared.PROGRESS_KEY)
    at = progress(conn)
    if at is None:
        return False
    rows = shared.waiting(conn, POSTGRES, at, batch, "text")
    paired = [(int(row[0]), grams) for row in rows if (grams := gram_text(str(row[1]))) is not None]
    if paired:
        conn.execute(
            "UPDATE messages m SET grams = d.grams FROM unnest(%s::bigint[], %s::text[]) AS d(id, grams)"
            " WHERE m.id = d.id AND m.grams IS NULL",
            ([ident for ident, _ in paired], [grams for _, grams in paired]),
        )
    return shared.advance(conn, meta, at, rows, batch)
