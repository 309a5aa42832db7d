"""Writing a new store from rows read elsewhere (``salvage``): columns, rows under their own ids, stand-ins.

Salvage decodes a damaged file without SQLite and must then write what it found into a fresh store built by
the migrations. The SQL for that write lives here with the store's other tables: salvage owns the page
reading and the matching of rows to tables, this module owns how they go in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openclaw_lossless.store.sqlite.connection import Connection, Database


def table_columns(conn: Connection, table: str) -> list[tuple[Any, ...]]:
    """The table's columns as SQLite declares them, in order: ``(cid, name, type, notnull, default, pk)``."""
    return [tuple(row) for row in conn.execute(f"PRAGMA table_info({table})").fetchall()]


def allow_dangling_references(db: Database) -> None:
    """Keep rows whose parent was lost (a message citing a turn that was not recovered) instead of refusing them."""
    with db.writer() as conn:
        conn.execute("PRAGMA foreign_keys = OFF")


def insert_rows(conn: Connection, table: str, names: Sequence[str], rows: list[list[Any]]) -> None:
    """Insert rows under the ids they carry; a row whose id is taken is skipped."""
    marks = ", ".join("?" * len(names))
    conn.executemany(f"INSERT OR IGNORE INTO {table} ({', '.join(names)}) VALUES ({marks})", rows)


def add_placeholder_sessions(conn: Connection) -> int:
    """Rows whose session row was lost get a stand-in session, so they stay reachable and keys stay valid."""
    missing = conn.execute(
        "SELECT session_rowid, max(agent_id), min(created_at), max(created_at) FROM ("
        " SELECT session_rowid, agent_id, created_at FROM messages"
        " UNION ALL SELECT session_rowid, 'main', committed_at FROM turns"
        " UNION ALL SELECT session_rowid, 'main', recorded_at FROM compactions"
        " UNION ALL SELECT session_rowid, 'main', created_at FROM snapshots"
        ") WHERE session_rowid NOT IN (SELECT id FROM sessions) GROUP BY session_rowid"
    ).fetchall()
    conn.executemany(
        "INSERT INTO sessions (id, session_id, session_key, agent_id, created_at, last_seen_at)"
        " VALUES (?, ?, NULL, ?, ?, ?)",
        [(r[0], f"salvaged-session-{r[0]}", r[1], r[2], r[3]) for r in missing],
    )
    return len(missing)
