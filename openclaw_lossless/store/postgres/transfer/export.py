"""Export on PostgreSQL: the same lines as the SQLite store's export (``store/sqlite/transfer/export.py``).

The file's layout is the SQLite package's (its docstring says why); what differs is how the rows are read.
The export runs in one ``REPEATABLE READ`` read-only transaction, so sidecars writing meanwhile cannot
leave a snapshot pointing past the messages exported, and every table is read through a server-side cursor,
so a store of millions of messages streams instead of arriving in memory at once. Text columns are ordered
``COLLATE "C"`` (byte order, as SQLite's BINARY), so ties in time order the same on both backends and an
export from either gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from psycopg import pq

from openclaw_lossless.store.model.transfer.export import ExportScope, message_line, refuse_unstored
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.statements.transfer.export import EXPORT_TABLES, MESSAGES, typed_records

ROWS_PER_FETCH = 500

# The export's tables, columns and joins (plain SQL, the same here), with ties between equal times
# ordered by bytes, as SQLite's BINARY orders text: a database's own collation may order them otherwise.
_BYTE_ORDER = {"session": 's.created_at, s.session_id COLLATE "C"',
               "turn": 'x.committed_at, x.advancement_key COLLATE "C"'}  # fmt: skip
_TABLES = tuple((kind, source, _BYTE_ORDER.get(kind, order), fields) for kind, source, order, fields in EXPORT_TABLES)


def messages_where(scope: ExportScope) -> tuple[str, tuple[Any, ...]]:
    """The scope's messages: a WHERE fragment over ``m`` (messages) and ``s`` (sessions) (``ExportScope.messages``)."""
    return scope.messages("%s", "TRUE")


def sessions_where(scope: ExportScope) -> tuple[str, tuple[Any, ...]]:
    """The scope's sessions (``ExportScope.sessions``): the agent's now, or holding the agent's messages."""
    return scope.sessions("%s", "TRUE")


def check_scope(conn: Connection, scope: ExportScope) -> None:
    """Refuse a scope naming no stored session: an empty export of a typo would look like a success."""
    where, params = sessions_where(scope)
    refuse_unstored(scope, lambda: conn.execute(f"SELECT 1 FROM sessions s WHERE {where} LIMIT 1", params).fetchone())


def export_store(conn: Connection, scope: ExportScope) -> Iterator[dict[str, Any]]:
    """The scope's messages, then its sessions, turns, compactions, snapshots, subagent links and tombstones.

    Read in one snapshot of the database. Called inside a caller's open transaction, it reads in that one.
    """
    fresh = conn.info.transaction_status == pq.TransactionStatus.IDLE  # else: the caller's transaction
    with conn.transaction():
        if fresh:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield from export_messages(conn, scope)
        yield from _typed_records(conn, scope)


def export_messages(conn: Connection, scope: ExportScope) -> Iterator[dict[str, Any]]:
    """The scope's message lines, oldest first (inside the caller's transaction: a server-side cursor)."""
    where, params = messages_where(scope)
    for row in _stream(conn, MESSAGES.format(where=where), params):
        yield message_line(row)


def _typed_records(conn: Connection, scope: ExportScope) -> Iterator[dict[str, Any]]:
    """The scope's sessions, turns, compactions and snapshots, then the subagent links touching its sessions."""
    where, params = sessions_where(scope)
    yield from typed_records(lambda sql, values: _stream(conn, sql, values), scope, where, params, _TABLES, "TRUE")


def _stream(conn: Connection, query: str, params: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """The query's rows, fetched ``ROWS_PER_FETCH`` at a time from a server-side cursor."""
    with conn.cursor(name="lossless_export") as cursor:
        cursor.itersize = ROWS_PER_FETCH
        cursor.execute(query, params)
        yield from cursor
