"""What the store holds per agent: its last commit, its sessions and its messages, counted.

``activity.py`` and ``/v1/agents/{id}/status`` say what these mean to an operator; which tables and indexes
answer them is the store's business, so the SQL stays here.
"""

from __future__ import annotations

from openclaw_lossless.store.sqlite.connection import Connection

# Per session, its newest turn through ``turns_by_session`` (session_rowid, id): one index seek a session, so
# the cost grows with the number of sessions, not with the turns ever stored. The outer scan reads the
# covering index ``sessions_by_agent``.
LAST_COMMITS_SQL = """
SELECT s.agent_id,
       max((SELECT t.committed_at FROM turns t WHERE t.session_rowid = s.id ORDER BY t.id DESC LIMIT 1))
FROM sessions s
GROUP BY s.agent_id
"""


def last_commits(conn: Connection) -> dict[str, float]:
    """The time of each agent's last committed turn (agents that never committed one are absent)."""
    return {str(agent): float(at) for agent, at in conn.execute(LAST_COMMITS_SQL).fetchall() if at is not None}


def session_count(conn: Connection, agent_id: str) -> int:
    return int(conn.execute("SELECT count(*) FROM sessions WHERE agent_id = ?", (agent_id,)).fetchone()[0])


def message_count(conn: Connection, agent_id: str) -> int:
    return int(conn.execute("SELECT count(*) FROM messages WHERE agent_id = ?", (agent_id,)).fetchone()[0])


def agents_by_session(conn: Connection) -> dict[int, str]:
    """Each session's row id to its agent, for the vector index to tag every row it loads."""
    return {int(row[0]): str(row[1]) for row in conn.execute("SELECT id, agent_id FROM sessions")}
