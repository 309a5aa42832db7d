"""What the store holds per agent, on PostgreSQL (``store/sqlite/agents.py``'s calls): its last commit, its
sessions and its messages, counted, for ``activity.py`` and ``/v1/agents/{id}/status``."""

from __future__ import annotations

from openclaw_lossless.store.postgres.connection import Connection

# Per session, its newest turn (the highest id, as on SQLite: ids rise in commit order, where the sidecars'
# clocks may not), then the latest of those per agent. A session without turns adds nothing, so an agent
# that never committed one is absent.
LAST_COMMITS_SQL = """
SELECT s.agent_id, max(t.committed_at)
FROM sessions s
CROSS JOIN LATERAL (SELECT committed_at FROM turns WHERE session_rowid = s.id ORDER BY id DESC LIMIT 1) t
GROUP BY s.agent_id
"""


def last_commits(conn: Connection) -> dict[str, float]:
    """The time of each agent's last committed turn (agents that never committed one are absent)."""
    return {str(agent): float(at) for agent, at in conn.execute(LAST_COMMITS_SQL).fetchall() if at is not None}


def session_count(conn: Connection, agent_id: str) -> int:
    row = conn.execute("SELECT count(*) FROM sessions WHERE agent_id = %s", (agent_id,)).fetchone()
    return 0 if row is None else int(row[0])


def message_count(conn: Connection, agent_id: str) -> int:
    row = conn.execute("SELECT count(*) FROM messages WHERE agent_id = %s", (agent_id,)).fetchone()
    return 0 if row is None else int(row[0])


def agents_by_session(conn: Connection) -> dict[int, str]:
    """Each session's row id to its agent, for the vector index to tag every row it loads."""
    return {int(row[0]): str(row[1]) for row in conn.execute("SELECT id, agent_id FROM sessions")}
