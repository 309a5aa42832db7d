"""What the store holds per agent: its last commit, its sessions and its messages, counted.

``activity.py`` and ``/v1/agents/{id}/status`` say what these mean to an operator; which tables and indexes
answer them is the store's business. The counts are both backends' (``store/statements/agents.py``); the last
commits are read the way SQLite's planner reads them best, so that statement stays here.
"""

from __future__ import annotations

from openclaw_lossless.store.statements import SQLITE
from openclaw_lossless.store.statements.agents import Tallies

# Per session, its newest turn through ``turns_by_session`` (session_rowid, id): one index seek a session, so
# the cost grows with the number of sessions, not with the turns ever stored. The outer scan reads the
# covering index ``sessions_by_agent``.
LAST_COMMITS_SQL = """
SELECT s.agent_id,
       max((SELECT t.committed_at FROM turns t WHERE t.session_rowid = s.id ORDER BY t.id DESC LIMIT 1))
FROM sessions s
GROUP BY s.agent_id
"""


_TALLIES = Tallies(SQLITE, LAST_COMMITS_SQL)  # the counts: the same statements on both backends
last_commits = _TALLIES.last_commits
session_count = _TALLIES.session_count
message_count = _TALLIES.message_count
agents_by_session = _TALLIES.agents_by_session
