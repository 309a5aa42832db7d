"""Sessions, agents and subagent links: who said what where, and what a session may recall.

OpenClaw names a session twice: ``sessionId`` (a new one after ``/new`` or ``/reset``) and ``sessionKey``
(``agent:<agentId>:<rest>``, stable across resets). The agent id comes from the key; recall scope is built
from agents and sessions, and a subagent's scope also includes its parent's sessions.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from openclaw_lossless.errors import BadRequest, InvalidSessionKey
from openclaw_lossless.store.connection import Connection

DEFAULT_AGENT = "main"
_SESSION_KEY = re.compile(r"^agent:([A-Za-z0-9][A-Za-z0-9_.\-]{0,127}):\S.*$", re.S)
_MAX_ID = 512


@dataclass(frozen=True)
class SessionRef:
    rowid: int
    session_id: str
    session_key: str | None
    agent_id: str


@dataclass(frozen=True)
class Scope:
    """Messages in scope: any of these agents' sessions, plus these extra sessions (a parent's)."""

    agent_ids: frozenset[str] = field(default_factory=frozenset)
    session_rowids: frozenset[int] = field(default_factory=frozenset)

    def contains(self, agent_id: str, session_rowid: int) -> bool:
        """Whether a message of this agent and session is in scope (the Python twin of ``sql``)."""
        return agent_id in self.agent_ids or session_rowid in self.session_rowids

    def sql(self, alias: str = "m") -> tuple[str, list[object]]:
        """A WHERE fragment selecting the scope's messages, with its parameters."""
        parts: list[str] = []
        params: list[object] = []
        if self.agent_ids:
            parts.append(f"{alias}.agent_id IN ({','.join('?' * len(self.agent_ids))})")
            params += sorted(self.agent_ids)
        if self.session_rowids:
            parts.append(f"{alias}.session_rowid IN ({','.join('?' * len(self.session_rowids))})")
            params += sorted(self.session_rowids)
        return ("(" + " OR ".join(parts) + ")" if parts else "0"), params


def agent_of(session_key: str | None) -> str:
    """The agent id a session key names; sessions without a key belong to the default agent."""
    if session_key is None:
        return DEFAULT_AGENT
    match = _SESSION_KEY.match(session_key)
    if (
        not match
        or len(session_key) > _MAX_ID
        or any(ord(ch) < 32 or 0xD800 <= ord(ch) <= 0xDFFF for ch in session_key)
    ):
        raise InvalidSessionKey(
            f"sessionKey must look like 'agent:<agentId>:<name>' (at most {_MAX_ID} characters), "
            f"got {session_key[:80]!r}"
        )
    return match.group(1)


def check_identifier(value: str, what: str) -> str:
    if not value or len(value) > _MAX_ID or any(ord(ch) < 32 or 0xD800 <= ord(ch) <= 0xDFFF for ch in value):
        raise BadRequest(f"{what} must be 1-{_MAX_ID} printable characters")
    return value


def ensure_session(conn: Connection, session_id: str, session_key: str | None) -> SessionRef:
    """The session's row, created on first sight; a later call may fill in a key seen for the first time."""
    check_identifier(session_id, "sessionId")
    agent_id = agent_of(session_key)
    now = time.time()
    row = conn.execute("SELECT id, session_key, agent_id FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
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


def find_session(conn: Connection, session_id: str) -> SessionRef | None:
    row = conn.execute("SELECT id, session_key, agent_id FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    return None if row is None else SessionRef(int(row[0]), session_id, row[1], str(row[2]))


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


def parent_key(conn: Connection, session_key: str | None) -> str | None:
    if session_key is None:
        return None
    row = conn.execute(
        "SELECT parent_session_key FROM subagent_links WHERE child_session_key = ?", (session_key,)
    ).fetchone()
    return None if row is None else str(row[0])


def recall_scope(conn: Connection, session: SessionRef, mode: str) -> Scope:
    """What ``session`` may recall: its agent's history (or only itself), plus its ancestors' sessions."""
    extra: set[int] = set()
    agents: set[str] = set()
    if mode == "agent":
        agents.add(session.agent_id)
    else:
        extra.add(session.rowid)
    key, seen = session.session_key, set[str]()
    while (key := parent_key(conn, key)) is not None and key not in seen:
        seen.add(key)
        extra.update(row[0] for row in conn.execute("SELECT id FROM sessions WHERE session_key = ?", (key,)))
    return Scope(frozenset(agents), frozenset(extra))
