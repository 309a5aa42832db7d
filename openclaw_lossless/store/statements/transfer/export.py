"""The export's statements, kept once: both backends read messages and typed records by them.

They use no placeholder of their own and no function one server lacks: a caller passes its condition in its
driver's style, and PostgreSQL its tables' byte order for ties (``store/postgres/transfer/export.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from openclaw_lossless.store.model.transfer.export import (
    FLAG_FIELDS,
    FORMAT,
    LINK_FIELDS,
    ExportScope,
    message_line,
)
from openclaw_lossless.store.statements import Connection

# The message lines' statement (plain SQL, the same on both backends; ``{where}`` over ``m`` messages and ``s``
# sessions) and the field each of its columns becomes.
MESSAGES = (
    "SELECT m.id, s.session_id, s.session_key, m.agent_id, m.role, m.kind, m.created_at, m.stored_at,"
    " m.original, m.text, m.content_hash, m.window_key, m.tokens, m.importance, m.importance_label, m.cites,"
    " t.advancement_key FROM messages m JOIN sessions s ON s.id = m.session_rowid"
    " LEFT JOIN turns t ON t.id = m.turn_rowid WHERE {where} ORDER BY m.id"
)


def export_records(conn: Connection, where: str = "1", params: tuple[Any, ...] = ()) -> Iterator[dict[str, Any]]:
    """Every message matching ``where`` (over ``m`` messages, ``s`` sessions), oldest first."""
    for row in conn.execute(MESSAGES.format(where=where), params):
        yield message_line(row)


# Per table: the type of its lines, its rows (joined to ``s``, the sessions in scope), their order, and the
# column of each field. Sessions and turns are ordered by what they carry, not by row ids an import does not
# keep, so a store exported, imported and exported again gives the same bytes.
EXPORT_TABLES: tuple[tuple[str, str, str, dict[str, str]], ...] = (
    ("session", "sessions s", "s.created_at, s.session_id",
     {"sessionId": "s.session_id", "sessionKey": "s.session_key", "agentId": "s.agent_id",
      "createdAt": "s.created_at", "lastSeenAt": "s.last_seen_at"}),
    ("turn", "turns x JOIN sessions s ON s.id = x.session_rowid", "x.committed_at, x.advancement_key",
     {"advancementKey": "x.advancement_key", "sessionId": "s.session_id", "committedAt": "x.committed_at",
      "messageCount": "x.message_count", "heartbeat": "x.heartbeat"}),
    ("compaction", "compactions x JOIN sessions s ON s.id = x.session_rowid", "x.id",
     {"id": "x.id", "sessionId": "s.session_id", "recordedAt": "x.recorded_at", "tokensBefore": "x.tokens_before",
      "tokensAfter": "x.tokens_after", "compacted": "x.compacted", "summary": "x.summary", "reason": "x.reason",
      "lastMessageId": "x.last_message_id", "status": "x.status"}),
    ("snapshot", "snapshots x JOIN sessions s ON s.id = x.session_rowid", "x.id",
     {"id": "x.id", "name": "x.name", "sessionId": "s.session_id", "lastMessageId": "x.last_message_id",
      "createdAt": "x.created_at", "automatic": "x.automatic", "compactionId": "x.compaction_id"}),
)  # fmt: skip


Rows = Callable[[str, tuple[Any, ...]], Iterable[Sequence[Any]]]


def typed_records(
    read: Rows,
    scope: ExportScope,
    where: str,
    params: tuple[Any, ...],
    tables: tuple[tuple[str, str, str, dict[str, str]], ...] = EXPORT_TABLES,
    always: str = "1",
) -> Iterator[dict[str, Any]]:
    """The lines after the messages: the scope's (``where``, ``params``: ``scope.sessions``) sessions, turns,
    compactions and snapshots, the subagent links touching its sessions, then its tombstones.

    Both backends export them through this one reading, supplying only ``read`` (run a statement, yield its
    rows), the tables' order (PostgreSQL orders ties by bytes) and their true, so the lines are the same bytes.
    """
    for kind, source, order, fields in tables:
        sql = f"SELECT {', '.join(fields.values())} FROM {source} WHERE {where} ORDER BY {order}"
        yield from _rows(read(sql, params), kind, tuple(fields))
    links, link_params = always, ()
    if scope.agent or scope.session:  # the whole store's links include those to sessions never stored
        keys = f"SELECT s.session_key FROM sessions s WHERE {where}"
        links, link_params = f"child_session_key IN ({keys}) OR parent_session_key IN ({keys})", params * 2
    sql = f"SELECT {', '.join(LINK_FIELDS.values())} FROM subagent_links WHERE {links} ORDER BY id"
    yield from _rows(read(sql, link_params), "subagentLink", tuple(LINK_FIELDS))
    yield from _tombstones(read, where, params)


def _tombstones(read: Rows, where: str, params: tuple[Any, ...]) -> Iterator[dict[str, Any]]:
    """The scope's forgotten messages (identity only), so an import of this file keeps them forgotten."""
    rows = read(
        "SELECT f.session_id, f.content_hash, f.window_key, f.forgotten_at FROM forgotten f"
        f" LEFT JOIN sessions s ON s.session_id = f.session_id WHERE {where} ORDER BY f.id",
        params,
    )
    for session_id, digest, window_key, at in rows:
        yield {"format": FORMAT, "type": "forgotten", "sessionId": session_id, "contentHash": bytes(digest).hex(),
               "windowKey": window_key, "forgottenAt": at}  # fmt: skip


def _rows(cursor: Iterable[Sequence[Any]], kind: str, names: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """Rows as typed lines; 0/1 flags as booleans (PostgreSQL's are booleans already, unchanged by ``bool``)."""
    for row in cursor:
        values = {name: bool(value) if name in FLAG_FIELDS else value for name, value in zip(names, row, strict=True)}
        yield {"format": FORMAT, "type": kind, **values}
