"""What the store holds per agent, on PostgreSQL: its last commit, its sessions and its messages, counted, for
``activity.py`` and ``/v1/agents/{id}/status``. The counts are both backends' (``store/statements/agents.py``);
the last commits are a lateral join here, the plan PostgreSQL reads best."""

from __future__ import annotations

from openclaw_lossless.store.statements import POSTGRES
from openclaw_lossless.store.statements.agents import Tallies

# Per session, its newest turn (the highest id, as on SQLite: ids rise in commit order, where the sidecars'
# clocks may not), then the latest of those per agent. A session without turns adds nothing, so an agent
# that never committed one is absent.
LAST_COMMITS_SQL = """
SELECT s.agent_id, max(t.committed_at)
FROM sessions s
CROSS JOIN LATERAL (SELECT committed_at FROM turns WHERE session_rowid = s.id ORDER BY id DESC LIMIT 1) t
GROUP BY s.agent_id
"""


_TALLIES = Tallies(POSTGRES, LAST_COMMITS_SQL)  # the counts: the same statements on both backends
last_commits = _TALLIES.last_commits
session_count = _TALLIES.session_count
message_count = _TALLIES.message_count
agents_by_session = _TALLIES.agents_by_session
