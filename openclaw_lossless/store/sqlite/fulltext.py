"""The messages' full-text index (FTS5) searched: the best BM25 matches within a scope.

``recall/search.py`` turns user text into a safe MATCH expression and owns the deadline; how the index is
joined to the messages so the search stays fast at any history size is the store's business.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.sqlite.connection import Connection, sqlite_module
from openclaw_lossless.store.sqlite.sessions import scope_sql


def best_matches(conn: Connection, expression: str, after: int, scope: Scope, k: int) -> list[tuple[int, float]]:
    """``(message id, bm25)`` of the ``k`` best matches of ``expression`` in scope with an id above ``after``.

    BM25 here is FTS5's: lower is better. CROSS JOIN keeps FTS5 the outer loop: with a plain JOIN the planner
    may walk every message of the agent (messages_by_agent) and probe FTS5 for each, a scan that grows with
    the history. The scope is checked in the narrow messages_scope index, not the table's rows (migration
    m005 says why).
    """
    where, params = scope_sql(scope, "m")
    rows = conn.execute(
        "SELECT m.id, bm25(messages_fts) FROM messages_fts"
        " CROSS JOIN messages m INDEXED BY messages_scope ON m.id = messages_fts.rowid"
        f" WHERE messages_fts MATCH ? AND messages_fts.rowid > ? AND {where} ORDER BY bm25(messages_fts) LIMIT ?",
        [expression, after, *params, k],
    ).fetchall()
    return [(int(row[0]), float(row[1])) for row in rows]


@contextlib.contextmanager
def deadline(conn: Connection, at: float) -> Iterator[None]:
    """Statements on ``conn`` inside give up at ``at`` (monotonic) with ``TimeoutError``: SQLite calls a
    progress handler every 2,000 steps of its virtual machine, which interrupts the statement once late."""
    conn.set_progress_handler(lambda: int(time.monotonic() > at), 2000)
    try:
        yield
    except sqlite_module().OperationalError as exc:
        if "interrupted" in str(exc):
            raise TimeoutError("keyword search passed its deadline") from exc
        raise
    finally:
        conn.set_progress_handler(None, 0)


def rebuild(conn: Connection, batch: int) -> Iterator[int]:
    """Empty the index and fill it again from the messages, ``batch`` at a time; yields each batch's count.

    What FTS5's own ``rebuild`` does, in steps a progress bar can follow. Run it to the end inside one write
    transaction: readers keep the old index until it commits, and an interrupted rebuild leaves it as it was.
    """
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('delete-all')")
    last = 0
    while True:
        end = conn.execute("SELECT id FROM messages WHERE id > ? ORDER BY id LIMIT 1 OFFSET ?", (last, batch - 1))
        found = end.fetchone()
        upto = 2**62 if found is None else int(found[0])
        yield conn.execute(
            "INSERT INTO messages_fts(rowid, text, date_terms, grams)"
            " SELECT id, text, date_terms, grams FROM messages WHERE id > ? AND id <= ?",
            (last, upto),
        ).rowcount
        if found is None:
            return
        last = upto
