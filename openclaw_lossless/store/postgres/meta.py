"""The ``meta`` table on PostgreSQL: small named values the store keeps about itself (``store/sqlite/meta.py``)."""

from __future__ import annotations

from openclaw_lossless.store.postgres.connection import Connection


def get(conn: Connection, key: str) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = %s", (key,)).fetchone()
    return None if row is None else str(row[0])


def put(conn: Connection, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, value),
    )


def remove(conn: Connection, key: str) -> None:
    conn.execute("DELETE FROM meta WHERE key = %s", (key,))
