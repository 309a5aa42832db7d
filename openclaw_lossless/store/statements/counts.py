"""What ``/stats`` counts, kept once: each a ``count(*)`` both servers run as written."""

from __future__ import annotations

COUNTS = {
    "messages": "SELECT count(*) FROM messages",
    "sessions": "SELECT count(*) FROM sessions",
    "agents": "SELECT count(DISTINCT agent_id) FROM sessions",
    "turns": "SELECT count(*) FROM turns",
    "snapshots": "SELECT count(*) FROM snapshots",
    "forgotten": "SELECT count(*) FROM forgotten",
    "subagents": "SELECT count(*) FROM subagent_links",
    "archived_messages": "SELECT coalesce(sum(message_count), 0) FROM archives",
    "archives": "SELECT count(*) FROM archives",
}
