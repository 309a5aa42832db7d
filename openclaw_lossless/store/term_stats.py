"""Which words of a keyword query are too common to rank over the whole history, cached per process.

Why: FTS5 ranks an OR query by computing BM25 for every message that holds any of its words, so a query with
a word found in a third of a million messages costs hundreds of milliseconds, and the cost grows with the
history. Such a word says little (BM25 weighs it by its inverse document frequency, near the floor), so:

- a word in more than ``limit`` messages is left out of the BM25 query when the query has rarer words;
- when every word is that common, only the newest ``limit`` messages holding the rarest of them are ranked.

Either way the work per query is bounded by ``limit`` postings per word, whatever the size of the history.
A word's count is probed with one bounded FTS5 scan (newest first, stopping after ``limit + 1`` matches)
and cached; a cached verdict is re-probed once the store has grown by a quarter of ``limit`` messages since.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from openclaw_lossless.store.connection import Connection

DEFAULT_LIMIT = 20000
CACHE_TERMS = 20000
_QUOTED = re.compile(r'"((?:[^"]|"")+)"')


@dataclass(frozen=True)
class _Verdict:
    cutoff: int | None  # rowid of the (limit + 1)-th newest match; None when the word is rare
    probed_at: int  # the newest message id when probed


class TermStats:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._cache: OrderedDict[str, _Verdict] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every verdict (after messages were archived: counts went down)."""
        with self._lock:
            self._cache.clear()

    def narrow(self, conn: Connection, expression: str) -> tuple[str, int]:
        """The MATCH expression to run and the rowid the matches must exceed (0: the whole history)."""
        terms = _QUOTED.findall(expression)
        if len(terms) == 0 or self.limit <= 0:
            return expression, 0
        newest = int(conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0])
        verdicts = {term: self._verdict(conn, term, newest) for term in terms}
        rare = [term for term in terms if verdicts[term].cutoff is None]
        if rare:
            return " OR ".join(f'"{term}"' for term in rare), 0
        rarest = min(terms, key=lambda term: verdicts[term].cutoff or 0)
        return f'"{rarest}"', verdicts[rarest].cutoff or 0

    def _verdict(self, conn: Connection, term: str, newest: int) -> _Verdict:
        with self._lock:
            known = self._cache.get(term)
            if known is not None and newest - known.probed_at < self.limit // 4:
                self._cache.move_to_end(term)
                return known
        row = conn.execute(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (f'"{term}"', self.limit),
        ).fetchone()
        verdict = _Verdict(None if row is None else int(row[0]), newest)
        with self._lock:
            self._cache[term] = verdict
            if len(self._cache) > CACHE_TERMS:
                self._cache.popitem(last=False)
        return verdict
