"""Sessions on PostgreSQL: the SQLite module's calls (``store/sqlite/sessions.py``), safe with several sidecars.

What is not SQL (``SessionRef``, ``Scope``, ``agent_of``, ``check_identifier``) is the SQLite module's, shared.
Two sidecars seeing a session for the first time at the same moment get one row: the insert yields to the
other's (``ON CONFLICT DO NOTHING``, which waits for the other transaction), then the row is read.
"""

from __future__ import annotations

import time
from functools import partial

from openclaw_lossless.errors import NotFound
from openclaw_lossless.store.model.sessions import (
    Lineage,
    Scope,
    SessionRef,
    agent_of,
    check_identifier,
    required,
    scope_of,
)
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.statements import POSTGRES
from openclaw_lossless.store.statements.spawns import Spawned

_COLUMNS = "id, session_id, session_key, agent_id"


def _ref(row: tuple[object, ...]) -> SessionRef:
    return SessionRef(int(str(row[0])), str(row[1]), None if row[2] is None else str(row[2]), str(row[3]))


def ensure_session(conn: Connection, session_id: str, session_key: str | None) -> SessionRef:
    """The session's row, created on first sight; a later call may fill in a key seen for the first time.

    A subagent's session registered at spawn becomes the first session the host names under the child's key.
    """
    check_identifier(session_id, "sessionId")
    agent_id = agent_of(session_key)
    now = time.time()
    found = find_session(conn, session_id)
    if found is None and session_key is not None and (spawned := _unused_spawned(conn, session_key)) is not None:
        conn.execute("UPDATE sessions SET session_id = %s, last_seen_at = %s WHERE id = %s", (session_id, now, spawned))
        return SessionRef(spawned, session_id, session_key, agent_id)
    if found is None:
        row = conn.execute(
            "INSERT INTO sessions (session_id, session_key, agent_id, created_at, last_seen_at)"
            f" VALUES (%s, %s, %s, %s, %s) ON CONFLICT (session_id) DO NOTHING RETURNING {_COLUMNS}",
            (session_id, session_key, agent_id, now, now),
        ).fetchone()
        if row is not None:
            return _ref(row)
        found = find_session(conn, session_id)  # another sidecar's insert won; a new statement sees it
        if found is None:  # pragma: no cover - the conflicting row is committed before DO NOTHING returns
            raise NotFound(f"session {session_id[:80]!r} vanished while being created")
    if found.session_key is None and session_key is not None:
        row = conn.execute(
            f"UPDATE sessions SET session_key = %s, agent_id = %s WHERE id = %s AND session_key IS NULL"
            f" RETURNING {_COLUMNS}",
            (session_key, agent_id, found.rowid),
        ).fetchone()
        return _ref(row) if row is not None else session_by_rowid(conn, found.rowid)
    return found


def register_spawned(conn: Connection, child_key: str) -> None:
    """Register a subagent's session at spawn, before the host names it: its id is its key until then."""
    if latest_session_for_key(conn, child_key) is None:
        ensure_session(conn, child_key, child_key)


_SPAWNED = Spawned(POSTGRES)  # a spawn rolled back, and a session's parent: the same statements on both backends
unregister_spawned = _SPAWNED.unregister_spawned
_unused_spawned = _SPAWNED.unused_spawned
parent_key = _SPAWNED.parent_key


def find_session(conn: Connection, session_id: str) -> SessionRef | None:
    if "\x00" in session_id:  # PostgreSQL text holds no NUL, so no stored session has one: as SQLite answers
        return None
    row = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE session_id = %s", (session_id,)).fetchone()
    return None if row is None else _ref(row)


def require_session(conn: Connection, session_id: str) -> SessionRef:
    """The session an operator named; not stored is their mistake to fix (404), so it says so."""
    return required(find_session(conn, session_id), session_id)


def latest_session(conn: Connection) -> SessionRef:
    """The most recently active session: what ``recover`` and ``snapshot create`` mean when none is named."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM sessions WHERE NOT starts_with(session_id, 'memory-files:')"
        " ORDER BY last_seen_at DESC, id DESC LIMIT 1"
    ).fetchone()
    if row is None:
        raise NotFound("the store holds no sessions yet")
    return _ref(row)


def agent_ids(conn: Connection) -> frozenset[str]:
    """Every agent the store holds a session of: the scope ``all`` stands for."""
    return frozenset(str(row[0]) for row in conn.execute("SELECT DISTINCT agent_id FROM sessions"))


def session_ids(conn: Connection) -> dict[int, str]:
    return {int(row[0]): str(row[1]) for row in conn.execute("SELECT id, session_id FROM sessions")}


def session_by_rowid(conn: Connection, rowid: int) -> SessionRef:
    row = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE id = %s", (rowid,)).fetchone()
    if row is None:
        raise NotFound(f"no session row {rowid} is stored")
    return _ref(row)


def latest_session_for_key(conn: Connection, session_key: str) -> SessionRef | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM sessions WHERE session_key = %s ORDER BY last_seen_at DESC, id DESC LIMIT 1",
        (session_key,),
    ).fetchone()
    return None if row is None else _ref(row)


def recall_scope(conn: Connection, session: SessionRef, mode: str) -> Scope:
    """What ``session`` may recall: its agent's history (or only itself), plus its ancestors' sessions; the
    agent's history leaves out its subagents' transcripts but for the session's own and its ancestors'."""
    return scope_of(
        session, mode, Lineage(partial(parent_key, conn), partial(_sessions_of, conn), partial(spawned_sessions, conn))
    )


def _sessions_of(conn: Connection, session_key: str | None) -> set[int]:
    if session_key is None:
        return set()
    return {int(row[0]) for row in conn.execute("SELECT id FROM sessions WHERE session_key = %s", (session_key,))}


def spawned_sessions(conn: Connection, agent_id: str) -> set[int]:
    """The sessions of ``agent_id``'s subagents: one range of the links' child keys (``COLLATE "C"``, so the
    range is exactly the keys starting ``agent:<id>:``), each joined to its sessions by ``sessions_by_key``."""
    prefix = f"agent:{agent_id}:"
    rows = conn.execute(
        "SELECT s.id FROM subagent_links l JOIN sessions s ON s.session_key = l.child_session_key"
        " WHERE l.child_session_key >= %s AND l.child_session_key < %s",
        (prefix, prefix[:-1] + chr(ord(":") + 1)),
    )
    return {int(row[0]) for row in rows}
