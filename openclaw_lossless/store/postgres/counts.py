"""What the store holds, counted, and whether it answers, on PostgreSQL (``store/sqlite/counts.py``'s calls).

``StoreCounts`` and its queries are the SQLite module's. The counts are one statement here, so they are one snapshot
even on an autocommit reader (where each statement sees what was committed before it, by any sidecar).
"""

from __future__ import annotations

import psycopg
from psycopg import errors as pgerrors
from psycopg import pq

from openclaw_lossless.errors import StoreUnavailable
from openclaw_lossless.store.model.counts import StoreCounts
from openclaw_lossless.store.postgres.connection import Connection, translate_error
from openclaw_lossless.store.statements.counts import COUNTS

_ALLCOUNTS = "SELECT " + ", ".join(f"({sql})" for sql in COUNTS.values())

# ``probe`` in a write transaction runs an update of no row: it takes the lock every write takes (granted at
# once beside other writers, waited for up to ``PROBE_LOCK_TIMEOUT`` while a migration holds the table) and
# is refused by a server that takes no writes (a standby, a read-only default), while writing nothing.
PROBE_LOCK_TIMEOUT = "10s"


def count_rows(conn: Connection) -> StoreCounts:
    """Every count in one statement: one snapshot of the store."""
    row = conn.execute(_ALLCOUNTS).fetchone()
    assert row is not None  # a SELECT without FROM returns one row
    return StoreCounts(**{name: int(value) for name, value in zip(COUNTS, row, strict=True)})


def any_archived(conn: Connection) -> bool:
    """Whether messages were ever archived: a gap may then be in the archive, not lost."""
    return conn.execute("SELECT 1 FROM archives LIMIT 1").fetchone() is not None


def vector_extension(conn: Connection) -> str:
    """pgvector and its version in this database (``/healthz``); ``StoreUnavailable`` without it."""
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    if row is None:
        raise StoreUnavailable("the pgvector extension ('vector') is not installed in this database")
    return f"pgvector {row[0]}"


def probe(conn: Connection) -> None:
    """Raise (translated: ``StoreUnavailable``, ``StoreReadOnly``...) unless the store answers now.

    On a read connection it reads the store's ``meta`` table. Inside a write transaction (``Database.write``,
    as ``/healthz`` calls it) it also updates no row of it, so it proves what SQLite's probe proves there: a
    turn could be stored now.
    """
    try:
        in_transaction = conn.info.transaction_status == pq.TransactionStatus.INTRANS
        if in_transaction:
            conn.execute(f"SET LOCAL lock_timeout = '{PROBE_LOCK_TIMEOUT}'")
        conn.execute("SELECT 1 FROM meta LIMIT 1").fetchall()
        if in_transaction:
            conn.execute("UPDATE meta SET value = value WHERE false")
    except pgerrors.LockNotAvailable as exc:
        raise StoreUnavailable(
            f"the store's tables stayed locked for {PROBE_LOCK_TIMEOUT} (a migration or maintenance holds them):"
            " no turn can be stored now"
        ) from exc
    except psycopg.Error as exc:
        error = translate_error(exc)
        if error is exc:
            raise
        raise error from exc
