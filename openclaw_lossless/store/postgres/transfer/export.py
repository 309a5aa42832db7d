"""Export on PostgreSQL: the same lines as the SQLite store's export (``store/sqlite/transfer/export.py``).

The file's layout is the SQLite package's (its docstring says why); what differs is how the rows are read.
The export runs in one ``REPEATABLE READ`` read-only transaction, so sidecars writing meanwhile cannot
leave a snapshot pointing past the messages exported, and every table is read through a server-side cursor,
so a store of millions of messages streams instead of arriving in memory at once. Text columns are ordered
``COLLATE "C"`` (byte order, as SQLite's BINARY), so ties in time order the same on both backends and an
export from either gives the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from psycopg import pq

from openclaw_lossless.errors import BadRequest
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.sqlite.transfer import export as sqlite_export
from openclaw_lossless.store.sqlite.transfer.export import _LINK_FIELDS, FORMAT, ExportScope

ROWS_PER_FETCH = 500

_MESSAGES = (
    "SELECT m.id, s.session_id, s.session_key, m.agent_id, m.role, m.kind, m.created_at, m.stored_at,"
    " m.original, m.text, m.content_hash, m.window_key, m.tokens, m.importance, m.importance_label, m.cites,"
    " t.advancement_key FROM messages m JOIN sessions s ON s.id = m.session_rowid"
    " LEFT JOIN turns t ON t.id = m.turn_rowid WHERE {where} ORDER BY m.id"
)
_MESSAGE_FIELDS = ("id", "sessionId", "sessionKey", "agentId", "role", "kind", "createdAt", "storedAt", "message",
                   "text", "contentHash", "windowKey", "tokens", "importance", "importanceLabel", "cites",
                   "advancementKey")  # fmt: skip

# The SQLite export's tables, columns and joins (plain SQL, the same here), with ties between equal times
# ordered by bytes, as SQLite's BINARY orders text: a database's own collation may order them otherwise.
_BYTE_ORDER = {"session": 's.created_at, s.session_id COLLATE "C"',
               "turn": 'x.committed_at, x.advancement_key COLLATE "C"'}  # fmt: skip
_TABLES = tuple(
    (kind, source, _BYTE_ORDER.get(kind, order), fields) for kind, source, order, fields in sqlite_export._TABLES
)


def messages_where(scope: ExportScope) -> tuple[str, tuple[Any, ...]]:
    """The scope's messages: a WHERE fragment over ``m`` (messages) and ``s`` (sessions), as
    ``ExportScope.messages`` renders it for SQLite."""
    clauses, params = ["TRUE"], list[Any]()
    if scope.agent:
        clauses.append("m.agent_id = %s")
        params.append(scope.agent)
    if scope.session:
        clauses.append("s.session_id = %s")
        params.append(scope.session)
    return " AND ".join(clauses), tuple(params)


def sessions_where(scope: ExportScope) -> tuple[str, tuple[Any, ...]]:
    """The scope's sessions (``ExportScope.sessions``): the agent's now, or holding the agent's messages."""
    clauses, params = ["TRUE"], list[Any]()
    if scope.agent:
        clauses.append("(s.agent_id = %s OR s.id IN (SELECT session_rowid FROM messages WHERE agent_id = %s))")
        params += [scope.agent, scope.agent]
    if scope.session:
        clauses.append("s.session_id = %s")
        params.append(scope.session)
    return " AND ".join(clauses), tuple(params)


def check_scope(conn: Connection, scope: ExportScope) -> None:
    """Refuse a scope naming no stored session: an empty export of a typo would look like a success."""
    if not scope.agent and not scope.session:
        return
    where, params = sessions_where(scope)
    if conn.execute(f"SELECT 1 FROM sessions s WHERE {where} LIMIT 1", params).fetchone() is not None:
        return
    session, agent = repr((scope.session or "")[:80]), repr((scope.agent or "")[:80])
    if scope.agent and scope.session:
        raise BadRequest(f"no session {session} of agent {agent} is stored: nothing to export")
    if scope.session:
        raise BadRequest(f"no session {session} is stored: nothing to export")
    raise BadRequest(f"no session of agent {agent} is stored: nothing to export")


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
    for row in _stream(conn, _MESSAGES.format(where=where), params):
        values = dict(zip(_MESSAGE_FIELDS, row, strict=True))
        values["message"] = json.loads(values["message"])
        values["contentHash"] = bytes(values["contentHash"]).hex()
        yield {"format": FORMAT, **values}


def _typed_records(conn: Connection, scope: ExportScope) -> Iterator[dict[str, Any]]:
    """The scope's sessions, turns, compactions and snapshots, then the subagent links touching its sessions."""
    where, params = sessions_where(scope)
    for kind, source, order, fields in _TABLES:
        sql = f"SELECT {', '.join(fields.values())} FROM {source} WHERE {where} ORDER BY {order}"
        yield from _lines(_stream(conn, sql, params), kind, tuple(fields))
    links, link_params = "TRUE", ()
    if scope.agent or scope.session:  # the whole store's links include those to sessions never stored
        keys = f"SELECT s.session_key FROM sessions s WHERE {where}"
        links, link_params = f"child_session_key IN ({keys}) OR parent_session_key IN ({keys})", params * 2
    sql = f"SELECT {', '.join(_LINK_FIELDS.values())} FROM subagent_links WHERE {links} ORDER BY id"
    yield from _lines(_stream(conn, sql, link_params), "subagentLink", tuple(_LINK_FIELDS))
    yield from _tombstones(conn, where, params)


def _tombstones(conn: Connection, where: str, params: tuple[Any, ...]) -> Iterator[dict[str, Any]]:
    """The scope's forgotten messages (identity only), so an import of this file keeps them forgotten."""
    rows = _stream(
        conn,
        "SELECT f.session_id, f.content_hash, f.window_key, f.forgotten_at FROM forgotten f"
        f" LEFT JOIN sessions s ON s.session_id = f.session_id WHERE {where} ORDER BY f.id",
        params,
    )
    for session_id, digest, window_key, at in rows:
        yield {"format": FORMAT, "type": "forgotten", "sessionId": session_id, "contentHash": bytes(digest).hex(),
               "windowKey": window_key, "forgottenAt": at}  # fmt: skip


def _lines(rows: Iterator[tuple[Any, ...]], kind: str, names: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """Rows as typed lines (booleans are booleans here already, as the SQLite export makes its 0/1 flags)."""
    for row in rows:
        yield {"format": FORMAT, "type": kind, **dict(zip(names, row, strict=True))}


def _stream(conn: Connection, query: str, params: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """The query's rows, fetched ``ROWS_PER_FETCH`` at a time from a server-side cursor."""
    with conn.cursor(name="lossless_export") as cursor:
        cursor.itersize = ROWS_PER_FETCH
        cursor.execute(query, params)
        yield from cursor
