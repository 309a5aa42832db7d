"""Sessions, agents and subagent links: who said what where, and what a session may recall.

OpenClaw names a session twice: ``sessionId`` (a new one after ``/new`` or ``/reset``) and ``sessionKey``
(``agent:<agentId>:<rest>``, stable across resets). The agent id comes from the key; recall scope is built
from agents and sessions: a subagent's scope also includes its parent's sessions, and a parent's leaves out
its subagents' transcripts (it recalls the outcome records copied when a child ends, ``subagents.py``).
"""

from __future__ import annotations

import json
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
from openclaw_lossless.store.sqlite.connection import Connection
from openclaw_lossless.store.statements import SQLITE
from openclaw_lossless.store.statements.spawns import Spawned


def scope_sql(scope: Scope, alias: str = "m") -> tuple[str, list[object]]:
    """A WHERE fragment selecting ``scope``'s messages in SQLite's SQL, with its parameters."""
    parts: list[str] = []
    params: list[object] = []
    if scope.agent_ids:
        agents = f"{alias}.agent_id IN ({','.join('?' * len(scope.agent_ids))})"
        params += sorted(scope.agent_ids)
        if scope.excluded:  # one JSON parameter however many subagents the agent has spawned
            agents = f"({agents} AND {alias}.session_rowid NOT IN (SELECT value FROM json_each(?)))"
            params.append(json.dumps(sorted(scope.excluded)))
        parts.append(agents)
    if scope.session_rowids:
        parts.append(f"{alias}.session_rowid IN ({','.join('?' * len(scope.session_rowids))})")
        params += sorted(scope.session_rowids)
    return ("(" + " OR ".join(parts) + ")" if parts else "0"), params


def ensure_session(conn: Connection, session_id: str, session_key: str | None) -> SessionRef:
    """The session's row, created on first sight; a later call may fill in a key seen for the first time.

    A subagent's session registered at spawn (``register_spawned``) becomes the first session the host
    names under the child's key.
    """
    check_identifier(session_id, "sessionId")
    agent_id = agent_of(session_key)
    now = time.time()
    row = conn.execute("SELECT id, session_key, agent_id FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row is None and session_key is not None and (spawned := _unused_spawned(conn, session_key)) is not None:
        conn.execute("UPDATE sessions SET session_id = ?, last_seen_at = ? WHERE id = ?", (session_id, now, spawned))
        return SessionRef(spawned, session_id, session_key, agent_id)
    if row is None:
        cursor = conn.execute(
            "INSERT INTO sessions (session_id, session_key, agent_id, created_at, last_seen_at) VALUES (?, ?, ?, ?, ?)",
            (session_id, session_key, agent_id, now, now),
        )
        return SessionRef(int(cursor.lastrowid), session_id, session_key, agent_id)
    if row[1] is None and session_key is not None:
        conn.execute("UPDATE sessions SET session_key = ?, agent_id = ? WHERE id = ?", (session_key, agent_id, row[0]))
        return SessionRef(int(row[0]), session_id, session_key, agent_id)
    return SessionRef(int(row[0]), session_id, row[1], str(row[2]))


def register_spawned(conn: Connection, child_key: str) -> None:
    """Register a subagent's session at spawn, before the host names it: its id is its key until then.

    Nothing is registered when the key already has a session (a child spawned again under its old key).
    """
    if latest_session_for_key(conn, child_key) is None:
        ensure_session(conn, child_key, child_key)


_SPAWNED = Spawned(SQLITE)  # a spawn rolled back, and a session's parent: the same statements on both backends
unregister_spawned = _SPAWNED.unregister_spawned
_unused_spawned = _SPAWNED.unused_spawned
parent_key = _SPAWNED.parent_key


def find_session(conn: Connection, session_id: str) -> SessionRef | None:
    row = conn.execute("SELECT id, session_key, agent_id FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return None if row is None else SessionRef(int(row[0]), session_id, row[1], str(row[2]))


def require_session(conn: Connection, session_id: str) -> SessionRef:
    """The session an operator named; not stored is their mistake to fix (404), so it says so."""
    return required(find_session(conn, session_id), session_id)


def latest_session(conn: Connection) -> SessionRef:
    """The most recently active session: what ``recover`` and ``snapshot create`` mean when none is named."""
    # never an agent's workspace memory-file session (store/sqlite/memory_files.py): no one converses there
    row = conn.execute(
        "SELECT session_id FROM sessions WHERE session_id NOT LIKE 'memory-files:%' ORDER BY last_seen_at DESC LIMIT 1"
    ).fetchone()
    if row is None:
        raise NotFound("the store holds no sessions yet")
    return require_session(conn, str(row[0]))


def agent_ids(conn: Connection) -> frozenset[str]:
    """Every agent the store holds a session of: the scope ``all`` stands for."""
    return frozenset(str(row[0]) for row in conn.execute("SELECT DISTINCT agent_id FROM sessions"))


def session_ids(conn: Connection) -> dict[int, str]:
    """Each session's row id to its OpenClaw ``sessionId``, to name the session of many hits at once."""
    return {int(row[0]): str(row[1]) for row in conn.execute("SELECT id, session_id FROM sessions")}


def session_by_rowid(conn: Connection, rowid: int) -> SessionRef:
    row = conn.execute("SELECT session_id, session_key, agent_id FROM sessions WHERE id = ?", (rowid,)).fetchone()
    return SessionRef(rowid, str(row[0]), row[1], str(row[2]))


def latest_session_for_key(conn: Connection, session_key: str) -> SessionRef | None:
    row = conn.execute(
        "SELECT id, session_id, agent_id FROM sessions WHERE session_key = ? ORDER BY last_seen_at DESC, id DESC"
        " LIMIT 1",
        (session_key,),
    ).fetchone()
    return None if row is None else SessionRef(int(row[0]), str(row[1]), session_key, str(row[2]))


def recall_scope(conn: Connection, session: SessionRef, mode: str) -> Scope:
    """What ``session`` may recall: its agent's history (or only itself), plus its ancestors' sessions.

    The agent's history leaves out the transcripts of the subagents spawned in it, but for the session's own
    (every session under its key) and its ancestors': what a child found reaches its parent as outcome
    records, not as a transcript.
    """
    return scope_of(
        session, mode, Lineage(partial(parent_key, conn), partial(_sessions_of, conn), partial(spawned_sessions, conn))
    )


def _sessions_of(conn: Connection, session_key: str | None) -> set[int]:
    if session_key is None:
        return set()
    return {int(row[0]) for row in conn.execute("SELECT id FROM sessions WHERE session_key = ?", (session_key,))}


def spawned_sessions(conn: Connection, agent_id: str) -> set[int]:
    """The sessions of ``agent_id``'s subagents (children linked at spawn, ended or not).

    A child's key names its agent (``agent:<agentId>:...``), so the agent's children are one range of the
    links' unique index on the child key, each joined to its sessions by ``sessions_by_key``: the cost grows
    with the agent's subagents, never with its messages. CROSS JOIN keeps the links outer: the same key range
    over ``sessions_by_key`` would walk every session of the agent.
    """
    prefix = f"agent:{agent_id}:"
    rows = conn.execute(
        "SELECT s.id FROM subagent_links l CROSS JOIN sessions s ON s.session_key = l.child_session_key"
        " WHERE l.child_session_key >= ? AND l.child_session_key < ?",
        (prefix, prefix[:-1] + chr(ord(":") + 1)),
    )
    return {int(row[0]) for row in rows}
