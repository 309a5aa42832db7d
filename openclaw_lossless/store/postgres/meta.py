"""The ``meta`` table on PostgreSQL: small named values the store keeps about itself (``store/sqlite/meta.py``)."""

from __future__ import annotations

from openclaw_lossless.store.postgres.connection import Connection

HOLD_CLASS = 0x6D657461  # "meta": the first key of a held meta key's lock; the second hashes schema and key


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


def hold(conn: Connection, key: str) -> None:
    """A transaction-level advisory lock on this store's ``key``: several sidecars write at once here, so two
    starting together on a new store would each read "no embedder recorded" and each recreate the vector
    table (the second dropping what the first had begun to embed). The lock makes the second wait, then read
    what the first recorded."""
    conn.execute("SELECT pg_advisory_xact_lock(%s::int, hashtext(current_schema() || '/' || %s))", (HOLD_CLASS, key))
