"""Export: the store read out as JSONL lines, messages first, then the records that point into them.

The file's layout and why it is so are in this package's docstring (``store/sqlite/transfer/__init__.py``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

from openclaw_lossless.errors import BadRequest
from openclaw_lossless.store.sqlite.connection import Connection

FORMAT = "openclaw-lossless/v1"


# The message lines' statement (plain SQL, the same on both backends; ``{where}`` over ``m`` messages and ``s``
# sessions) and the field each of its columns becomes.
MESSAGES = (
    "SELECT m.id, s.session_id, s.session_key, m.agent_id, m.role, m.kind, m.created_at, m.stored_at,"
    " m.original, m.text, m.content_hash, m.window_key, m.tokens, m.importance, m.importance_label, m.cites,"
    " t.advancement_key FROM messages m JOIN sessions s ON s.id = m.session_rowid"
    " LEFT JOIN turns t ON t.id = m.turn_rowid WHERE {where} ORDER BY m.id"
)
_MESSAGE_FIELDS = ("id", "sessionId", "sessionKey", "agentId", "role", "kind", "createdAt", "storedAt", "message",
                   "text", "contentHash", "windowKey", "tokens", "importance", "importanceLabel", "cites",
                   "advancementKey")  # fmt: skip


def export_records(conn: Connection, where: str = "1", params: tuple[Any, ...] = ()) -> Iterator[dict[str, Any]]:
    """Every message matching ``where`` (over ``m`` messages, ``s`` sessions), oldest first."""
    for row in conn.execute(MESSAGES.format(where=where), params):
        yield message_line(row)


def message_line(row: Sequence[Any]) -> dict[str, Any]:
    """A row of ``MESSAGES`` as its export line. Both backends build message lines here, so an export from
    either gives the same bytes (the parity tests compare them)."""
    values = dict(zip(_MESSAGE_FIELDS, row, strict=True))
    values["message"] = json.loads(values["message"])
    values["contentHash"] = bytes(values["contentHash"]).hex()
    return {"format": FORMAT, **values}


@dataclass(frozen=True)
class ExportScope:
    """What an export covers: the whole store, one agent's sessions, or one session."""

    agent: str | None = None
    session: str | None = None

    def messages(self, mark: str = "?", always: str = "1") -> tuple[str, tuple[Any, ...]]:
        """A WHERE fragment over ``m`` (messages) and ``s`` (sessions); ``mark`` is the driver's placeholder and
        ``always`` its true, so both backends select a scope's rows by this one rule."""
        clauses, params = [always], []
        if self.agent:
            clauses.append(f"m.agent_id = {mark}")
            params.append(self.agent)
        if self.session:
            clauses.append(f"s.session_id = {mark}")
            params.append(self.session)
        return " AND ".join(clauses), tuple(params)

    def sessions(self, mark: str = "?", always: str = "1") -> tuple[str, tuple[Any, ...]]:
        """A WHERE fragment over ``s``: a session is the agent's if it is now, or if it has the agent's messages
        (``mark`` and ``always`` as in ``messages``)."""
        clauses, params = [always], []
        if self.agent:
            clauses.append(
                f"(s.agent_id = {mark} OR s.id IN (SELECT session_rowid FROM messages WHERE agent_id = {mark}))"
            )
            params += [self.agent, self.agent]
        if self.session:
            clauses.append(f"s.session_id = {mark}")
            params.append(self.session)
        return " AND ".join(clauses), tuple(params)


def check_scope(conn: Connection, scope: ExportScope) -> None:
    """Refuse a scope naming no stored session: an empty export of a typo would look like a success."""
    where, params = scope.sessions()
    refuse_unstored(scope, lambda: conn.execute(f"SELECT 1 FROM sessions s WHERE {where} LIMIT 1", params).fetchone())


def refuse_unstored(scope: ExportScope, first_session: Callable[[], object]) -> None:
    """Refuse a scope naming an agent or a session when ``first_session`` (its backend's look-up of one of the
    scope's sessions, asked only then) finds none; both backends refuse with these words."""
    if not scope.agent and not scope.session:
        return
    if first_session() is not None:
        return
    session, agent = repr((scope.session or "")[:80]), repr((scope.agent or "")[:80])
    if scope.agent and scope.session:
        raise BadRequest(f"no session {session} of agent {agent} is stored: nothing to export")
    if scope.session:
        raise BadRequest(f"no session {session} is stored: nothing to export")
    raise BadRequest(f"no session of agent {agent} is stored: nothing to export")


def export_store(conn: Connection, scope: ExportScope) -> Iterator[dict[str, Any]]:
    """The scope's messages, then its sessions, turns, compactions, snapshots and subagent links.

    Read in one transaction, so a sidecar writing meanwhile cannot leave a snapshot pointing past the
    messages exported.
    """
    conn.execute("BEGIN")
    try:
        where, params = scope.messages()
        yield from export_records(conn, where, params)
        yield from _typed_records(conn, scope)
    finally:
        conn.execute("COMMIT")


# Per table: the type of its lines, its rows (joined to ``s``, the sessions in scope), their order, and the
# column of each field. Sessions and turns are ordered by what they carry, not by row ids an import does not
# keep, so a store exported, imported and exported again gives the same bytes.
_TABLES: tuple[tuple[str, str, str, dict[str, str]], ...] = (
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
_LINK_FIELDS = {"id": "id", "parentSessionKey": "parent_session_key", "childSessionKey": "child_session_key",
                "contextMode": "context_mode", "spawnedAt": "spawned_at", "endedAt": "ended_at",
                "endedReason": "ended_reason"}  # fmt: skip
_FLAGS = frozenset({"heartbeat", "compacted", "automatic"})  # 0/1 columns, true/false in the file


def _typed_records(conn: Connection, scope: ExportScope) -> Iterator[dict[str, Any]]:
    """The scope's sessions, turns, compactions and snapshots, then the subagent links touching its sessions."""
    where, params = scope.sessions()
    yield from typed_records(conn.execute, scope, where, params)


Rows = Callable[[str, tuple[Any, ...]], Iterable[Sequence[Any]]]


def typed_records(
    read: Rows,
    scope: ExportScope,
    where: str,
    params: tuple[Any, ...],
    tables: tuple[tuple[str, str, str, dict[str, str]], ...] = _TABLES,
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
    sql = f"SELECT {', '.join(_LINK_FIELDS.values())} FROM subagent_links WHERE {links} ORDER BY id"
    yield from _rows(read(sql, link_params), "subagentLink", tuple(_LINK_FIELDS))
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
        values = {name: bool(value) if name in _FLAGS else value for name, value in zip(names, row, strict=True)}
        yield {"format": FORMAT, "type": kind, **values}


def write_jsonl(records: Iterable[dict[str, Any]], out: IO[str]) -> Counter[str]:
    """Write the records; returns how many of each type (``message`` for message lines)."""
    counts: Counter[str] = Counter()
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        counts[str(record.get("type", "message"))] += 1
    return counts
