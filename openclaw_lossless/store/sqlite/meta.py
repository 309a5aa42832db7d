"""The ``meta`` table: small named values the store keeps about itself (a cursor, a marker, an identity).

One place for the reads and writes of a key, so a module that keeps a value there (a resumable rescan's
cursor) names the key and never writes SQL for it.
"""

from __future__ import annotations

from openclaw_lossless.store.sqlite.connection import Connection


def get(conn: Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def put(conn: Connection, key: str, value: str) -> None:
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


def remove(conn: Connection, key: str) -> None:
    conn.execute("DELETE FROM meta WHERE key = ?", (key,))


def hold(conn: Connection, key: str) -> None:
    """Nothing to take: the write transaction the caller is in is the store's only one (``BEGIN IMMEDIATE``)."""
