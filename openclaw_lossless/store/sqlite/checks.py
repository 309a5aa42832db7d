"""Read-only checks of a store file, for ``doctor``: the binding, the schema, integrity, the FTS index.

``doctor/store.py`` turns each answer into a finding with a fix; what to ask SQLite, and how to ask it
without writing to a store that may be damaged or newer than this version, is the store's business.
"""

from __future__ import annotations

from openclaw_lossless.store.sqlite.connection import Connection, sqlite_module


def library_versions() -> tuple[str, str]:
    """The SQLite library and the sqlite-vec extension this process loads, on a connection of its own."""
    module = sqlite_module()
    conn = module.connect(":memory:")
    try:
        conn.enable_load_extension(True)
        import sqlite_vec

        sqlite_vec.load(conn)
        version = conn.execute("SELECT sqlite_version(), vec_version()").fetchone()
    finally:
        conn.close()
    return str(version[0]), str(version[1])


def has_table(conn: Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is not None


def applied_migrations(conn: Connection) -> set[str] | None:
    """The names of the migrations the store records, or None when it was never migrated."""
    if not has_table(conn, "migrations"):
        return None
    return {str(row[0]) for row in conn.execute("SELECT name FROM migrations")}


def integrity_problems(conn: Connection, limit: int = 20) -> list[str]:
    """SQLite's ``integrity_check``, one problem a line (``["ok"]`` when there is none)."""
    return [line for row in conn.execute(f"PRAGMA integrity_check({int(limit)})") for line in str(row[0]).splitlines()]


def fts_problem(conn: Connection) -> str | None:
    """FTS5's own check of its index against the messages, or None when they agree.

    It is spelled as an INSERT but writes nothing, so it runs on a plain connection of its own (the caller's
    may be read-only) inside a transaction that is rolled back.
    """
    path = conn.execute("PRAGMA database_list").fetchone()[2]
    checker = sqlite_module().connect(path, isolation_level=None)
    try:
        checker.execute("BEGIN")
        checker.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    except sqlite_module().DatabaseError as exc:
        return str(exc)
    finally:
        if checker.in_transaction:
            checker.execute("ROLLBACK")
        checker.close()
    return None


def table_names(conn: Connection) -> set[str]:
    """Every table the file holds (``migrate-store``: a store, another program's database, or empty)."""
    return {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
