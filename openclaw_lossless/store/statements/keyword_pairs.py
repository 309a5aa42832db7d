"""The keyword-pairs backfill's cursor and its moves, the same on both backends (``store/sqlite/keyword_pairs.py``
says what the backfill is for; each backend indexes a batch's pairs its own way: FTS5 or the ``search`` vector).

The cursor and the counts are one ``meta`` value (``PROGRESS_KEY``), gone when every message is paired.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from openclaw_lossless.store.statements import Connection, Dialect

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
    def decode(cls, value: str | None) -> PairsProgress | None:
        if value is None:
            return None
        data = json.loads(value)
        return cls(int(data["below"]), int(data["done"]), int(data["total"]))


class Meta(Protocol):
    """A backend's ``meta`` module: ``store/sqlite/meta.py`` or ``store/postgres/meta.py``."""

    def get(self, conn: Any, key: str) -> str | None: ...
    def put(self, conn: Any, key: str, value: str) -> None: ...
    def remove(self, conn: Any, key: str) -> None: ...


def queue_all(conn: Connection, meta: Meta, migration: str = "") -> None:
    """Have every message stored so far wait for its pairs (none stored: nothing to do); ``migration`` names
    the migration that asks, for the log."""
    row = conn.execute("SELECT max(id), count(*) FROM messages").fetchone()
    if row is None or row[0] is None:
        return
    meta.put(conn, PROGRESS_KEY, PairsProgress(int(row[0]) + 1, 0, int(row[1])).encode())
    if migration:
        log.info(
            "keyword index with pairs of characters (%s): %d stored messages are paired in the background",
            migration,
            int(row[1]),
        )


def progress(conn: Connection, meta: Meta) -> PairsProgress | None:
    """The backfill's position, or None when no message waits for its pairs."""
    return PairsProgress.decode(meta.get(conn, PROGRESS_KEY))


def waiting(conn: Connection, dialect: Dialect, at: PairsProgress, batch: int, columns: str) -> list[Any]:
    """The next ``batch`` messages below the cursor that have no pairs yet, newest first: ``id, <columns>``."""
    sql = f"SELECT id, {columns} FROM messages WHERE id < ? AND grams IS NULL ORDER BY id DESC LIMIT ?"
    return list(conn.execute(dialect.sql(sql), (at.below, batch)).fetchall())


def advance(conn: Connection, meta: Meta, at: PairsProgress, rows: list[Any], batch: int) -> bool:
    """Move the cursor past ``rows`` (in the caller's transaction) and log the progress; whether any are left."""
    done = min(at.done + len(rows), at.total)
    if len(rows) < batch:
        meta.remove(conn, PROGRESS_KEY)
        log.info("keyword pairs of older messages: all %d messages read, the backfill is done", at.total)
        return False
    meta.put(conn, PROGRESS_KEY, PairsProgress(int(rows[-1][0]), done, at.total).encode())
    if done // LOG_EVERY > at.done // LOG_EVERY:
        log.info("keyword pairs of older messages: %d of %d messages read", done, at.total)
    return True
