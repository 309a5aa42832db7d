"""A session's timeline on PostgreSQL: the SQLite module's calls (``store/sqlite/timeline.py``), read alike.

The page, its events and where each event sits follow the SQLite module's rules (its docstring says why);
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
from openclaw_lossless.store.sqlite.timeline import (
    NO_MESSAGE,
    Parent,
    SessionSummary,
    SnapshotMark,
    SpawnMark,
    Timeline,
    Window,
)

_VIEW = "id, role, kind, created_at, text, original, importance, importance_label, cites"
_NO_END = 2**62  # an id above any message's: a range without an upper bound
KeyNeighbour = tuple[str, float]  # a session of the same key: its id and when it began


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
    return [SessionSummary(str(r[0]), r[1], str(r[2]), float(r[3]), int(r[4]), r[5], r[6]) for r in rows]


def read_timeline(conn: Connection, session: SessionRef, window: Window) -> Timeline:
    """The page ``window`` names, with the compactions, snapshots, spawns and resets that fall on it."""
    page = _page(conn, session.rowid, window)
    first, last = (page[0].id, page[-1].id) if page else (None, None)
    before = _neighbour(conn, session.rowid, first, older=True) if first is not None else None
    after = _neighbour(conn, session.rowid, last, older=False) if last is not None else None
    low = NO_MESSAGE - 1 if before is None else before[0]  # the oldest page holds what came before any message
    high = None if after is None else last  # the newest page holds what came after its last message
    created_at, previous, following = _key_neighbours(conn, session)
    times = (None if before is None else before[1], None if after is None else page[-1].created_at)
    return Timeline(
        session=session,
        created_at=created_at,
        messages=page,
        total=_count(conn, session.rowid),
        older=first if before is not None else None,
        newer=last if after is not None else None,
        compactions=_compactions(conn, session.rowid, low, high),
        snapshots=_snapshots(conn, session.rowid, low, high),
        spawns=_spawns(conn, session, created_at, following, times),
        previous_session=None if previous is None else previous[0],
        next_session=None if following is None else following[0],
        parent=_parent(conn, session.session_key),
    )


def _count(conn: Connection, rowid: int) -> int:
    row = conn.execute("SELECT count(*) FROM messages WHERE session_rowid = %s", (rowid,)).fetchone()
    return 0 if row is None else int(row[0])


def _page(conn: Connection, rowid: int, window: Window) -> list[MessageView]:
    if window.at is not None:  # the message and what led to it: half the page before it
        older = _range(conn, rowid, "id < %s", window.at, "DESC", window.limit // 2)
        return older[::-1] + _range(conn, rowid, "id >= %s", window.at, "", window.limit - len(older))
    if window.after is not None:
        return _range(conn, rowid, "id > %s", window.after, "", window.limit)
    before = window.before if window.before is not None else _NO_END
    return _range(conn, rowid, "id < %s", before, "DESC", window.limit)[::-1]


def _range(conn: Connection, rowid: int, bound: str, value: int, order: str, limit: int) -> list[MessageView]:
    rows = conn.execute(
        f"SELECT {_VIEW} FROM messages WHERE session_rowid = %s AND {bound} ORDER BY id {order} LIMIT %s",
        (rowid, value, limit),
    ).fetchall()
    return [message_view(row) for row in rows]


def _neighbour(conn: Connection, rowid: int, message_id: int, *, older: bool) -> tuple[int, float] | None:
    """The id and time of the session's message just before (or after) ``message_id``: is there a page that way."""
    bound, order = ("id < %s", "DESC") if older else ("id > %s", "")
    row = conn.execute(
        f"SELECT id, created_at FROM messages WHERE session_rowid = %s AND {bound} ORDER BY id {order} LIMIT 1",
        (rowid, message_id),
    ).fetchone()
    return None if row is None else (int(row[0]), float(row[1]))


def _compactions(conn: Connection, rowid: int, low: int, high: int | None) -> list[CompactionMark]:
    """The session's compactions placed after a message in ``[low, high)`` (``high`` None: no end)."""
    rows = conn.execute(
        "SELECT c.id, c.recorded_at, c.status, c.reason, c.tokens_before, c.tokens_after, c.last_message_id,"
        f" ({AUTOMATIC_NAME}) FROM compactions c WHERE c.session_rowid = %s"
        " AND coalesce(c.last_message_id, %s) >= %s AND coalesce(c.last_message_id, %s) < %s ORDER BY c.id",
        (rowid, NO_MESSAGE, low, NO_MESSAGE, _NO_END if high is None else high),
    ).fetchall()
    return [CompactionMark(int(r[0]), float(r[1]), str(r[2]), r[3], r[4], r[5], r[6], r[7]) for r in rows]


def _snapshots(conn: Connection, rowid: int, low: int, high: int | None) -> list[SnapshotMark]:
    """The session's snapshots named by an operator (automatic ones show with their compaction)."""
    rows = conn.execute(
        "SELECT name, created_at, last_message_id FROM snapshots WHERE session_rowid = %s AND NOT automatic"
        " AND coalesce(last_message_id, %s) >= %s AND coalesce(last_message_id, %s) < %s ORDER BY id",
        (rowid, NO_MESSAGE, low, NO_MESSAGE, _NO_END if high is None else high),
    ).fetchall()
    return [SnapshotMark(str(r[0]), float(r[1]), r[2]) for r in rows]


def _key_neighbours(conn: Connection, session: SessionRef) -> tuple[float, KeyNeighbour | None, KeyNeighbour | None]:
    """The session's start, and the sessions of its key just before and after it (a ``/new`` apart)."""
    row = conn.execute("SELECT created_at FROM sessions WHERE id = %s", (session.rowid,)).fetchone()
    assert row is not None, "the session of a timeline is stored"  # SessionRef comes from a read of it
    created_at = float(row[0])
    if session.session_key is None:
        return created_at, None, None
    order = (session.session_key, created_at, created_at, session.rowid)
    previous = conn.execute(
        "SELECT session_id, created_at FROM sessions WHERE session_key = %s AND (created_at < %s OR"
        " (created_at = %s AND id < %s)) ORDER BY created_at DESC, id DESC LIMIT 1",
        order,
    ).fetchone()
    following = conn.execute(
        "SELECT session_id, created_at FROM sessions WHERE session_key = %s AND (created_at > %s OR"
        " (created_at = %s AND id > %s)) ORDER BY created_at, id LIMIT 1",
        order,
    ).fetchone()
    return (
        created_at,
        None if previous is None else (str(previous[0]), float(previous[1])),
        None if following is None else (str(following[0]), float(following[1])),
    )


def _spawns(
    conn: Connection,
    session: SessionRef,
    created_at: float,
    following: KeyNeighbour | None,
    times: tuple[float | None, float | None],
) -> list[SpawnMark]:
    """Subagents spawned from this session's key while it was the key's current session, within the page.

    A spawn names the parent's key, not its session: it belongs to the session of that key that had begun and
    not yet been replaced by a ``/new`` when it happened.
    """
    if session.session_key is None:
        return []
    span_start = float("-inf") if _first_of_key(conn, session) else created_at
    span_end = float("inf") if following is None else following[1]
    low, high = times
    start = span_start if low is None else max(span_start, low)
    end = span_end if high is None else min(span_end, high)
    rows = conn.execute(
        "SELECT l.child_session_key, l.spawned_at, l.context_mode, l.ended_at, l.ended_reason,"
        " (SELECT s.session_id FROM sessions s WHERE s.session_key = l.child_session_key"
        "  ORDER BY s.created_at DESC, s.id DESC LIMIT 1)"
        " FROM subagent_links l WHERE l.parent_session_key = %s AND l.spawned_at >= %s AND l.spawned_at < %s"
        " ORDER BY l.spawned_at, l.id",
        (session.session_key, start, end),
    ).fetchall()
    return [SpawnMark(str(r[0]), r[5], float(r[1]), r[2], r[3], r[4]) for r in rows]


def _first_of_key(conn: Connection, session: SessionRef) -> bool:
    row = conn.execute(
        "SELECT id FROM sessions WHERE session_key = %s ORDER BY created_at, id LIMIT 1", (session.session_key,)
    ).fetchone()
    return row is not None and int(row[0]) == session.rowid


def _parent(conn: Connection, session_key: str | None) -> Parent | None:
    """Who spawned this session, and the parent's session that was current then."""
    if session_key is None:
        return None
    row = conn.execute(
        "SELECT parent_session_key, spawned_at, context_mode, ended_at, ended_reason FROM subagent_links"
        " WHERE child_session_key = %s",
        (session_key,),
    ).fetchone()
    if row is None:
        return None
    found = conn.execute(  # the parent's session current at the spawn, else (begun later) its first
        "SELECT session_id FROM sessions WHERE session_key = %s ORDER BY created_at <= %s DESC,"
        " CASE WHEN created_at <= %s THEN -created_at ELSE created_at END, id DESC LIMIT 1",
        (row[0], row[1], row[1]),
    ).fetchone()
    return Parent(str(row[0]), None if found is None else str(found[0]), float(row[1]), row[2], row[3], row[4])
