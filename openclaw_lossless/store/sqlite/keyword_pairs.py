"""Pairs of characters for the messages stored before the keyword index held them, added in the background.

Why: migration m011 gives the keyword index its third column (``capture/grams.py``'s pairs of unspaced
text); pairing a long history there would hold start-up and, interrupted, start again from nothing. So m011
only changes the schema and records a cursor; the server pairs the older messages newest first, a batch per
write transaction (``step``), each batch committing with the cursor that says where the next one starts: a
process killed half-way goes on from its last batch at the next start. Meanwhile the index holds every
message's own words (space-separated text is found as before) and the pairs of the messages done so far.

The cursor and the counts are one ``meta`` value (``PROGRESS_KEY``), gone when every message is paired;
``/stats`` shows them (``keywordPairs``) and the log says how far the backfill has come.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from openclaw_lossless.capture.grams import gram_text
from openclaw_lossless.store.sqlite import meta
from openclaw_lossless.store.sqlite.connection import Connection

PROGRESS_KEY = "keyword_pairs_backfill"  # meta: {"below": id, "done": n, "total": n} while older messages wait
BATCH = 2000  # messages read per write transaction
LOG_EVERY = 20_000  # messages between two progress lines in the log
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PairsProgress:
    """Where the backfill stands: messages below ``below`` still wait; ``done`` of ``total`` were read."""

    below: int
    done: int
    total: int

    def encode(self) -> str:
        return json.dumps({"below": self.below, "done": self.done, "total": self.total})

    @classmethod
    def decode(cls, value: str) -> PairsProgress:
        data = json.loads(value)
        return cls(int(data["below"]), int(data["done"]), int(data["total"]))


def queue_all(conn: Connection) -> None:
    """Have every message stored so far paired in the background (m011; none stored: nothing to do)."""
    last, total = conn.execute("SELECT max(id), count(*) FROM messages").fetchone()
    if last is not None:
        meta.put(conn, PROGRESS_KEY, PairsProgress(int(last) + 1, 0, int(total)).encode())


def progress(conn: Connection) -> PairsProgress | None:
    """The backfill's position, or None when no message waits for its pairs."""
    value = meta.get(conn, PROGRESS_KEY)
    return None if value is None else PairsProgress.decode(value)


def step(conn: Connection, batch: int = BATCH) -> bool:
    """Pair the next ``batch`` waiting messages (newest first) and index their pairs; whether any are left.

    A message's index entry is replaced whole (FTS5's ``delete`` of what it holds, then the entry with the
    pairs), in the transaction that moves the cursor past it: done twice it is still one entry. A message
    that has its pairs already (stored or rewritten since) is left as it is.
    """
    at = progress(conn)
    if at is None:
        return False
    rows = conn.execute(
        "SELECT id, text, date_terms FROM messages WHERE id < ? AND grams IS NULL ORDER BY id DESC LIMIT ?",
        (at.below, batch),
    ).fetchall()
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
    done = min(at.done + len(rows), at.total)
    if len(rows) < batch:
        meta.remove(conn, PROGRESS_KEY)
        log.info("keyword pairs of older messages: all %d messages read, the backfill is done", at.total)
        return False
    meta.put(conn, PROGRESS_KEY, PairsProgress(int(rows[-1][0]), done, at.total).encode())
    if done // LOG_EVERY > at.done // LOG_EVERY:
        log.info("keyword pairs of older messages: %d of %d messages read", done, at.total)
    return True
