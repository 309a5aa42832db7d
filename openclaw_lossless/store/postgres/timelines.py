"""A session's timeline on PostgreSQL: the SQLite module's calls (``store/sqlite/timelines.py``), read alike.

The page, its events and where each event sits are the SQLite module's rules (its docstring says why), kept
once there (``assemble_timeline``): this module supplies only the statements (``TimelineReads``);
its dataclasses (``Timeline``, ``Window``, the marks) and ``NO_MESSAGE`` are shared from there, so the web UI
draws either backend's timeline the same. As there, a page is one short range of ``messages_by_session``
and every event is read for that range only: the cost grows with the page, never with the history.
"""

from __future__ import annotations

from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.postgres.snapshots import AUTOMATIC_NAME
from openclaw_lossless.store.sqlite.messages import MessageView, message_view
from openclaw_lossless.store.sqlite.sessions import SessionRef
from openclaw_lossless.store.sqlite.snapshots import CompactionMark
from openclaw_lossless.store.sqlite.timelines import (
    NO_MESSAGE,
    KeyNeighbour,
    Parent,
    SessionSummary,
    SnapshotMark,
    SpawnMark,
    Timeline,
    Window,
    assemble_timeline,
    compaction_marks,
    key_neighbour,
    parent_mark,
    session_summaries_of,
    snapshot_marks,
    spawn_marks,
)

_VIEW = "id, role, kind, created_at, text, original, importance, importance_label, cites"


def session_summaries(conn: Connection, agent: str | None, limit: int) -> list[SessionSummary]:
    """The ``limit`` sessions last created (of one agent, or of all), each with its count and newest message.

    Each count and newest message is a range of ``messages_by_session``: the cost grows with the sessions
    listed and their messages, not with the rest of the store. No agent id holds a NUL (keys are checked) and
    PostgreSQL cannot compare one: such an agent has no sessions, as on SQLite.
    """
    if agent is not None and "\x00" in agent:
        return []
    where, params = ("WHERE s.agent_id = %s", [agent]) if agent is not None else ("", [])
    rows = conn.execute(
        "SELECT s.session_id, s.session_key, s.agent_id, s.created_at,"
        " (SELECT count(*) FROM messages m WHERE m.session_rowid = s.id),"
        " (SELECT created_at FROM messages m WHERE m.session_rowid = s.id ORDER BY m.id DESC LIMIT 1),"
        " (SELECT parent_session_key FROM subagent_links l WHERE l.child_session_key = s.session_key)"
        f" FROM sessions s {where} ORDER BY s.created_at DESC, s.id DESC LIMIT %s",
        [*params, limit],
    ).fetchall()
    return session_summaries_of(rows)


def read_timeline(conn: Connection, session: SessionRef, window: Window) -> Timeline:
    """The page ``window`` names, with the compactions, snapshots, spawns and resets that fall on it."""
    return assemble_timeline(session, window, _Reads(conn, session))


class _Reads:
    """The timeline's statements on PostgreSQL (``TimelineReads``); what is read when is the SQLite module's."""

    def __init__(self, conn: Connection, session: SessionRef) -> None:
        self.conn, self.rowid = conn, session.rowid

    def messages(self, op: str, value: int, descending: bool, limit: int) -> list[MessageView]:
        rows = self.conn.execute(
            f"SELECT {_VIEW} FROM messages WHERE session_rowid = %s AND id {op} %s"
            f" ORDER BY id {'DESC' if descending else ''} LIMIT %s",
            (self.rowid, value, limit),
        ).fetchall()
        return [message_view(row) for row in rows]

    def neighbour(self, message_id: int, *, older: bool) -> tuple[int, float] | None:
        bound, order = ("id < %s", "DESC") if older else ("id > %s", "")
        row = self.conn.execute(
            f"SELECT id, created_at FROM messages WHERE session_rowid = %s AND {bound} ORDER BY id {order} LIMIT 1",
            (self.rowid, message_id),
        ).fetchone()
        return None if row is None else (int(row[0]), float(row[1]))

    def count(self) -> int:
        row = self.conn.execute("SELECT count(*) FROM messages WHERE session_rowid = %s", (self.rowid,)).fetchone()
        return 0 if row is None else int(row[0])

    def created_at(self) -> float:
        row = self.conn.execute("SELECT created_at FROM sessions WHERE id = %s", (self.rowid,)).fetchone()
        assert row is not None, "the session of a timeline is stored"  # SessionRef comes from a read of it
        return float(row[0])

    def key_neighbours(self, key: str, created_at: float) -> tuple[KeyNeighbour | None, KeyNeighbour | None]:
        order = (key, created_at, created_at, self.rowid)
        previous = self.conn.execute(
            "SELECT session_id, created_at FROM sessions WHERE session_key = %s AND (created_at < %s OR"
            " (created_at = %s AND id < %s)) ORDER BY created_at DESC, id DESC LIMIT 1",
            order,
        ).fetchone()
        following = self.conn.execute(
            "SELECT session_id, created_at FROM sessions WHERE session_key = %s AND (created_at > %s OR"
            " (created_at = %s AND id > %s)) ORDER BY created_at, id LIMIT 1",
            order,
        ).fetchone()
        return key_neighbour(previous), key_neighbour(following)

    def compactions(self, low: int, high: int) -> list[CompactionMark]:
        rows = self.conn.execute(
            "SELECT c.id, c.recorded_at, c.status, c.reason, c.tokens_before, c.tokens_after, c.last_message_id,"
            f" ({AUTOMATIC_NAME}) FROM compactions c WHERE c.session_rowid = %s"
            " AND coalesce(c.last_message_id, %s) >= %s AND coalesce(c.last_message_id, %s) < %s ORDER BY c.id",
            (self.rowid, NO_MESSAGE, low, NO_MESSAGE, high),
        ).fetchall()
        return compaction_marks(rows)

    def snapshots(self, low: int, high: int) -> list[SnapshotMark]:
        rows = self.conn.execute(
            "SELECT name, created_at, last_message_id FROM snapshots WHERE session_rowid = %s AND NOT automatic"
            " AND coalesce(last_message_id, %s) >= %s AND coalesce(last_message_id, %s) < %s ORDER BY id",
            (self.rowid, NO_MESSAGE, low, NO_MESSAGE, high),
        ).fetchall()
        return snapshot_marks(rows)

    def first_of_key(self, key: str) -> bool:
        row = self.conn.execute(
            "SELECT id FROM sessions WHERE session_key = %s ORDER BY created_at, id LIMIT 1", (key,)
        ).fetchone()
        return row is not None and int(row[0]) == self.rowid

    def spawns(self, key: str, start: float, end: float) -> list[SpawnMark]:
        rows = self.conn.execute(
            "SELECT l.child_session_key, l.spawned_at, l.context_mode, l.ended_at, l.ended_reason,"
            " (SELECT s.session_id FROM sessions s WHERE s.session_key = l.child_session_key"
            "  ORDER BY s.created_at DESC, s.id DESC LIMIT 1)"
            " FROM subagent_links l WHERE l.parent_session_key = %s AND l.spawned_at >= %s AND l.spawned_at < %s"
            " ORDER BY l.spawned_at, l.id",
            (key, start, end),
        ).fetchall()
        return spawn_marks(rows)

    def parent(self, key: str) -> Parent | None:
        row = self.conn.execute(
            "SELECT parent_session_key, spawned_at, context_mode, ended_at, ended_reason FROM subagent_links"
            " WHERE child_session_key = %s",
            (key,),
        ).fetchone()
        if row is None:
            return None
        found = self.conn.execute(  # the parent's session current at the spawn, else (begun later) its first
            "SELECT session_id FROM sessions WHERE session_key = %s ORDER BY created_at <= %s DESC,"
            " CASE WHEN created_at <= %s THEN -created_at ELSE created_at END, id DESC LIMIT 1",
            (row[0], row[1], row[1]),
        ).fetchone()
        return parent_mark(row, found)
