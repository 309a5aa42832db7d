"""Sessions and recall scope as both backends see them: who a session is, and what it may recall.

The types (``SessionRef``, ``Scope``) and the pure rules (``agent_of``, ``check_identifier``, ``scope_of``)
live here so that no caller needs a backend to name a session; each backend renders ``Scope`` in its own SQL
(``scope_sql`` in ``sqlite/sessions.py`` and ``postgres/fulltext.py``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from openclaw_lossless.errors import BadRequest, InvalidSessionKey, NotFound

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
    """Messages in scope: these agents' sessions but the ``excluded`` ones, plus these extra sessions.

    ``session_rowids`` (the session's own, its parent's) are in scope even when ``excluded`` names them: a
    subagent recalls its own transcript and its parent's, while its parent's agent scope leaves it out.
    """

    agent_ids: frozenset[str] = field(default_factory=frozenset)
    session_rowids: frozenset[int] = field(default_factory=frozenset)
    excluded: frozenset[int] = field(default_factory=frozenset)

    def contains(self, agent_id: str, session_rowid: int) -> bool:
        """Whether a message of this agent and session is in scope (the Python twin of each backend's ``scope_sql``)."""
        if session_rowid in self.session_rowids:
            return True
        return agent_id in self.agent_ids and session_rowid not in self.excluded


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


def required(found: SessionRef | None, session_id: str) -> SessionRef:
    """The session an operator named, as either backend found it; not stored is a 404 that says so."""
    if found is None:
        raise NotFound(f"no session {session_id[:80]!r} is stored")
    return found


@dataclass(frozen=True)
class Lineage:
    """The reads a recall scope needs, bound to one backend's connection (``scope_of`` walks them)."""

    parent_key: Callable[[str | None], str | None]  # the key of the session that spawned this key's, or None
    sessions_of: Callable[[str | None], set[int]]  # every session (row id) under a key
    spawned_sessions: Callable[[str], set[int]]  # the sessions of an agent's subagents


def scope_of(session: SessionRef, mode: str, lineage: Lineage) -> Scope:
    """``recall_scope`` over either backend's reads: both use it, so a session recalls the same messages on
    SQLite and on PostgreSQL."""
    extra = ancestor_sessions(session.session_key, lineage)
    if mode != "agent":
        return Scope(session_rowids=frozenset(extra | {session.rowid}))
    own = lineage.sessions_of(session.session_key) | {session.rowid}
    children = lineage.spawned_sessions(session.agent_id) - extra - own
    return Scope(frozenset({session.agent_id}), frozenset(extra), frozenset(children))


def ancestor_sessions(session_key: str | None, lineage: Lineage) -> set[int]:
    """The sessions of every ancestor of ``session_key``, one parent link at a time (a cycle of links is walked
    once): the walk both backends use, each reading the links with its own statement."""
    found: set[int] = set()
    key, seen = session_key, set[str]()
    while (key := lineage.parent_key(key)) is not None and key not in seen:
        seen.add(key)
        found |= lineage.sessions_of(key)
    return found
