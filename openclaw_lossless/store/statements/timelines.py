"""A session's timeline as both backends read it: the statements of ``TimelineReads``, kept once.

What is read when, and where each event sits, is ``assemble_timeline``'s (``store/sqlite/timelines.py``, whose
docstring says why); this module supplies the statements, each one short range of ``messages_by_session``
or of the session's events, so a page costs what it holds on either store.
"""

from __future__ import annotations

from openclaw_lossless.store.model.messages import MessageView, message_view
from openclaw_lossless.store.model.sessions import SessionRef
from openclaw_lossless.store.model.snapshots import CompactionMark
from openclaw_lossless.store.model.timelines import (
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
from openclaw_lossless.store.statements import Connection, Dialect

_VIEW = "id, role, kind, created_at, text, original, importance, importance_label, cites"
# A compaction's automatic snapshot; the first by id, should an import have given it two (PostgreSQL refuses
# a subquery of two rows, and SQLite's scan of the table, in id order, answers the same one).
_AUTOMATIC_NAME = "SELECT sn.name FROM snapshots sn WHERE sn.compaction_id = c.id ORDER BY sn.id LIMIT 1"


class Timelines:
    """``api.Timelines`` on either backend: the index of sessions and one page of a session's timeline."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    def session_summaries(self, conn: Connection, agent: str | None, limit: int) -> list[SessionSummary]:
        """The ``limit`` sessions last created (of one agent, or of all), each with its count and newest message.

        Each count and newest message is a range of ``messages_by_session``: the cost grows with the sessions
        listed and their messages, not with the rest of the store. No agent id holds a NUL (keys are checked),
        and PostgreSQL cannot compare one: such an agent has no sessions on either store.
        """
        if agent is not None and "\x00" in agent:
            return []
        where, params = ("WHERE s.agent_id = ?", [agent]) if agent is not None else ("", [])
        rows = conn.execute(
            self.dialect.sql(
                "SELECT s.session_id, s.session_key, s.agent_id, s.created_at,"
                " (SELECT count(*) FROM messages m WHERE m.session_rowid = s.id),"
                " (SELECT created_at FROM messages m WHERE m.session_rowid = s.id ORDER BY m.id DESC LIMIT 1),"
                " (SELECT parent_session_key FROM subagent_links l WHERE l.child_session_key = s.session_key)"
                f" FROM sessions s {where} ORDER BY s.created_at DESC, s.id DESC LIMIT ?"
            ),
            [*params, limit],
        ).fetchall()
        return session_summaries_of(rows)

    def read_timeline(self, conn: Connection, session: SessionRef, window: Window) -> Timeline:
        """The page ``window`` names, with the compactions, snapshots, spawns and resets that fall on it."""
        return assemble_timeline(session, window, Reads(self.dialect, conn, session))


class Reads:
    """The timeline's statements (``TimelineReads``) for one session on one connection."""

    def __init__(self, dialect: Dialect, conn: Connection, session: SessionRef) -> None:
        self.sql, self.conn, self.rowid = dialect.sql, conn, session.rowid
        self.false = dialect.false

    def messages(self, op: str, value: int, descending: bool, limit: int) -> list[MessageView]:
        rows = self.conn.execute(
            self.sql(
                f"SELECT {_VIEW} FROM messages WHERE session_rowid = ? AND id {op} ?"
                f" ORDER BY id {'DESC' if descending else ''} LIMIT ?"
            ),
            (self.rowid, value, limit),
        ).fetchall()
        return [message_view(row) for row in rows]

    def neighbour(self, message_id: int, *, older: bool) -> tuple[int, float] | None:
        bound, order = ("id < ?", "DESC") if older else ("id > ?", "")
        row = self.conn.execute(
            self.sql(
                f"SELECT id, created_at FROM messages WHERE session_rowid = ? AND {bound} ORDER BY id {order} LIMIT 1"
            ),
            (self.rowid, message_id),
        ).fetchone()
        return None if row is None else (int(row[0]), float(row[1]))

    def count(self) -> int:
        row = self.conn.execute(self.sql("SELECT count(*) FROM messages WHERE session_rowid = ?"), (self.rowid,))
        return int(row.fetchone()[0])

    def created_at(self) -> float:
        row = self.conn.execute(self.sql("SELECT created_at FROM sessions WHERE id = ?"), (self.rowid,)).fetchone()
        assert row is not None, "the session of a timeline is stored"  # SessionRef comes from a read of it
        return float(row[0])

    def key_neighbours(self, key: str, created_at: float) -> tuple[KeyNeighbour | None, KeyNeighbour | None]:
        order = (key, created_at, created_at, self.rowid)
        previous = self.conn.execute(
            self.sql(
                "SELECT session_id, created_at FROM sessions WHERE session_key = ? AND (created_at < ? OR"
                " (created_at = ? AND id < ?)) ORDER BY created_at DESC, id DESC LIMIT 1"
            ),
            order,
        ).fetchone()
        following = self.conn.execute(
            self.sql(
                "SELECT session_id, created_at FROM sessions WHERE session_key = ? AND (created_at > ? OR"
                " (created_at = ? AND id > ?)) ORDER BY created_at, id LIMIT 1"
            ),
            order,
        ).fetchone()
        return key_neighbour(previous), key_neighbour(following)

    def compactions(self, low: int, high: int) -> list[CompactionMark]:
        rows = self.conn.execute(
            self.sql(
                "SELECT c.id, c.recorded_at, c.status, c.reason, c.tokens_before, c.tokens_after, c.last_message_id,"
                f" ({_AUTOMATIC_NAME}) FROM compactions c WHERE c.session_rowid = ?"
                " AND coalesce(c.last_message_id, ?) >= ? AND coalesce(c.last_message_id, ?) < ? ORDER BY c.id"
            ),
            (self.rowid, NO_MESSAGE, low, NO_MESSAGE, high),
        ).fetchall()
        return compaction_marks(rows)

    def snapshots(self, low: int, high: int) -> list[SnapshotMark]:
        rows = self.conn.execute(
            self.sql(
                "SELECT name, created_at, last_message_id FROM snapshots WHERE session_rowid = ?"
                f" AND automatic = {self.false}"
                " AND coalesce(last_message_id, ?) >= ? AND coalesce(last_message_id, ?) < ? ORDER BY id"
            ),
            (self.rowid, NO_MESSAGE, low, NO_MESSAGE, high),
        ).fetchall()
        return snapshot_marks(rows)

    def first_of_key(self, key: str) -> bool:
        row = self.conn.execute(
            self.sql("SELECT id FROM sessions WHERE session_key = ? ORDER BY created_at, id LIMIT 1"), (key,)
        ).fetchone()
        return row is not None and int(row[0]) == self.rowid

    def spawns(self, key: str, start: float, end: float) -> list[SpawnMark]:
        rows = self.conn.execute(
            self.sql(
                "SELECT l.child_session_key, l.spawned_at, l.context_mode, l.ended_at, l.ended_reason,"
                " (SELECT s.session_id FROM sessions s WHERE s.session_key = l.child_session_key"
                "  ORDER BY s.created_at DESC, s.id DESC LIMIT 1)"
                " FROM subagent_links l WHERE l.parent_session_key = ? AND l.spawned_at >= ? AND l.spawned_at < ?"
                " ORDER BY l.spawned_at, l.id"
            ),
            (key, start, end),
        ).fetchall()
        return spawn_marks(rows)

    def parent(self, key: str) -> Parent | None:
        row = self.conn.execute(
            self.sql(
                "SELECT parent_session_key, spawned_at, context_mode, ended_at, ended_reason FROM subagent_links"
                " WHERE child_session_key = ?"
            ),
            (key,),
        ).fetchone()
        if row is None:
            return None
        found = self.conn.execute(  # the parent's session current at the spawn, else (begun later) its first
            self.sql(
                "SELECT session_id FROM sessions WHERE session_key = ? ORDER BY created_at <= ? DESC,"
                " CASE WHEN created_at <= ? THEN -created_at ELSE created_at END, id DESC LIMIT 1"
            ),
            (row[0], row[1], row[1]),
        ).fetchone()
        return parent_mark(row, found)
