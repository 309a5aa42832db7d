"""The messages' full-text index (FTS5) searched: the best BM25 matches within a scope.

``recall/search.py`` turns user text into a safe MATCH expression and owns the deadline; how the index is
joined to the messages so the search stays fast at any history size is the store's business.
"""

from __future__ import annotations

from openclaw_lossless.store.connection import Connection
from openclaw_lossless.store.sessions import Scope


def best_matches(conn: Connection, expression: str, after: int, scope: Scope, k: int) -> list[tuple[int, float]]:
    """``(message id, bm25)`` of the ``k`` best matches of ``expression`` in scope with an id above ``after``.

    BM25 here is FTS5's: lower is better. CROSS JOIN keeps FTS5 the outer loop: with a plain JOIN the planner
    may walk every message of the agent (messages_by_agent) and probe FTS5 for each, a scan that grows with
    the history. The scope is checked in the narrow messages_scope index, not the table's rows (migration
    m005 says why).
    """
    where, params = scope.sql("m")
    rows = conn.execute(
        "SELECT m.id, bm25(messages_fts) FROM messages_fts"
        " CROSS JOIN messages m INDEXED BY messages_scope ON m.id = messages_fts.rowid"
        f" WHERE messages_fts MATCH ? AND messages_fts.rowid > ? AND {where} ORDER BY bm25(messages_fts) LIMIT ?",
        [expression, after, *params, k],
    ).fetchall()
    return [(int(row[0]), float(row[1])) for row in rows]
