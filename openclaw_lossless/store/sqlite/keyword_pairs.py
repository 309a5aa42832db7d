"""Pairs of characters for the messages stored before the keyword index held them, added in the background.

Why: migration m011 gives the keyword index its third column (``capture/grams.py``'s pairs of unspaced
text); pairing a long history there would hold start-up and, interrupted, start again from nothing. So m011
only changes the schema and records a cursor; the server pairs the older messages newest first, a batch per
write transaction (``step``), each batch committing with the cursor that says where the next one starts: a
process killed half-way goes on from its last batch at the next start. Meanwhile the index holds every
message's own words (space-separated text is found as before) and the pairs of the messages done so far.

The cursor (``store/statements/keyword_pairs.py``) is shown by ``/stats`` (``keywordPairs``) and the log
says how far the backfill has come.
"""

from __future__ import annotations

from openclaw_lossless.capture.grams import gram_text
from openclaw_lossless.store.sqlite import meta
from openclaw_lossless.store.sqlite.connection import Connection
from openclaw_lossless.store.statements import SQLITE
from openclaw_lossless.store.statements import keyword_pairs as shared
from openclaw_lossless.store.statements.keyword_pairs import BATCH, PairsProgress


def progress(conn: Connection) -> PairsProgress | None:
    """The backfill's position, or None when no message waits for its pairs."""
    return shared.progress(conn, meta)


def step(conn: Connection, batch: int = BATCH) -> bool:
    """Pair the next ``batch`` waiting messages (newest first) and index their pairs; whether any are left.

    A message's index entry is replaced whole (FTS5's ``delete`` of what it holds, then the entry with the
    pairs), in the transaction that moves the cursor past it: done twice it is still one entry. A message
    that has its pairs already (stored or rewritten since) is left as it is.
    """
    at = progress(conn)
    if at is None:
        return False
    rows = shared.waiting(conn, SQLITE, at, batch, "text, date_terms")
    for message_id, text, date_terms in rows:
        grams = gram_text(str(text))
        if grams is None:
            continue
        conn.execute(
            "INSERT INTO messages_fts(messages_fts, rowid, text, date_terms, grams) VALUES ('delete', ?, ?, ?, NULL)",
            (message_id, text, date_terms),
        )
        conn.execute("UPDATE messages SET grams = ? WHERE id = ?", (grams, message_id))
        conn.execute(
            "INSERT INTO messages_fts(rowid, text, date_terms, grams) VALUES (?, ?, ?, ?)",
            (message_id, text, date_terms, grams),
        )
    return shared.advance(conn, meta, at, rows, batch)
