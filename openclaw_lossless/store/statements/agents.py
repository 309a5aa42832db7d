"""What the store holds per agent, counted alike on both backends (``api.Agents``).

Each count is one range of an index on ``agent_id``. Only the last commit per agent is written apart: each
backend's ``LAST_COMMITS_SQL`` walks ``turns_by_session`` in the way its planner reads it best.
"""

from __future__ import annotations

from openclaw_lossless.store.statements import Connection, Dialect


class Tallies:
    """An agent's last commits, sessions and messages, in one backend's dialect."""

    def __init__(self, dialect: Dialect, last_commits_sql: str) -> None:
        self.sql, self.last_commits_sql = dialect.sql, last_commits_sql

    def last_commits(self, conn: Connection) -> dict[str, float]:
        """The time of each agent's last committed turn (agents that never committed one are absent)."""
        rows = conn.execute(self.last_commits_sql).fetchall()
        return {str(agent): float(at) for agent, at in rows if at is not None}

    def session_count(self, conn: Connection, agent_id: str) -> int:
        return self._count(conn, "SELECT count(*) FROM sessions WHERE agent_id = ?", agent_id)

    def message_count(self, conn: Connection, agent_id: str) -> int:
        return self._count(conn, "SELECT count(*) FROM messages WHERE agent_id = ?", agent_id)

    def _count(self, conn: Connection, statement: str, agent_id: str) -> int:
        row = conn.execute(self.sql(statement), (agent_id,)).fetchone()
        return 0 if row is None else int(row[0])

    def agents_by_session(self, conn: Connection) -> dict[int, str]:
        """Each session's row id to its agent, for the vector index to tag every row it loads."""
        return {int(row[0]): str(row[1]) for row in conn.execute("SELECT id, agent_id FROM sessions")}
