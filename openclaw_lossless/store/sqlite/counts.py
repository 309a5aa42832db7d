"""What the store holds, counted, and whether it answers: the store's side of ``/stats`` and ``/healthz``.

Why here: the status report (``service/status.py``) says what the numbers mean to an operator; which tables
hold them is the store's business, so the SQL stays in ``store/``.
"""

from __future__ import annotations

from openclaw_lossless.store.model.counts import StoreCounts
from openclaw_lossless.store.sqlite.connection import Connection
from openclaw_lossless.store.statements.counts import COUNTS


def count_rows(conn: Connection) -> StoreCounts:
    """Every count in one read connection (one snapshot when the caller holds a read transaction)."""
    return StoreCounts(**{name: int(conn.execute(sql).fetchone()[0]) for name, sql in COUNTS.items()})


def any_archived(conn: Connection) -> bool:
    """Whether messages were ever archived: a gap may then be in the archive, not lost."""
    return conn.execute("SELECT 1 FROM archives LIMIT 1").fetchone() is not None


def vector_extension(conn: Connection) -> str:
    """The loaded sqlite-vec and its version; raises the driver's error when the extension is not there."""
    return f"sqlite-vec {conn.execute('SELECT vec_version()').fetchone()[0]}"


def probe(conn: Connection) -> None:
    """A statement that touches the database: run under ``Database.write`` it proves the write lock is free."""
    conn.execute("SELECT 1").fetchone()
