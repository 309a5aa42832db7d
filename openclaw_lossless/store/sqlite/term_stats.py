"""Which words of a keyword query are too common to rank over the whole history, cached per process.

Why: FTS5 ranks an OR query by computing BM25 for every message that holds any of its words, so a query with
a word found in a third of a million messages costs hundreds of milliseconds, and the cost grows with the
history. Such a word says little (BM25 weighs it by its inverse document frequency, near the floor), so:

- a word in more than ``limit`` messages is left out of the BM25 query when the query has rarer words, and
  the rarer words are kept rarest first while their messages add up to at most ``2 × limit``;
- when every word is that common, only the newest ``limit`` messages holding the query's first word (the
  prompt's own) are ranked.

Either way BM25 is computed for at most ``2 × limit`` messages, whatever the size of the history. A word's
count is taken with one bounded FTS5 scan (stopping after ``limit + 1`` matches) and cached; a cached count
is taken again once the store has grown by a quarter of ``limit`` messages since.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict

from openclaw_lossless.store.model.term_stats import CACHE_TERMS, DEFAULT_LIMIT, TermCount, keep_rarest
from openclaw_lossless.store.sqlite.connection import Connection

_QUOTED = re.compile(r'"((?:[^"]|"")+)"')


_COUNT = "SELECT count(*) FROM (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? LIMIT ?)"
_PROBE = "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?"


class TermStats:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._cache: OrderedDict[str, TermCount] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every count (after messages were archived: counts went down)."""
        with self._lock:
            self._cache.clear()

    def narrow(self, conn: Connection, expression: str) -> tuple[str, int]:
        """The MATCH expression to run and the rowid the matches must exceed (0: the whole history)."""
        terms = _QUOTED.findall(expression)
        if len(terms) == 0 or self.limit <= 0:
            return expression, 0
        newest = int(conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0])
        counts = {term: self._count(conn, term, newest) for term in terms}
        kept = keep_rarest(terms, counts, self.limit)
        if kept is None:
            return expression, 0
        if kept:
            return " OR ".join(f'"{term}"' for term in kept), 0
        # every word is common: rank the newest matches of the first held (the prompt's own)
        rarest = next(term for term in terms if counts[term] > 0)
        row = conn.execute(_PROBE, (f'"{rarest}"', self.limit)).fetchone()
        return f'"{rarest}"', 0 if row is None else int(row[0])

    def _count(self, conn: Connection, term: str, newest: int) -> int:
        """Messages holding ``term``, counted up to ``limit + 1`` (cached until the store grows)."""
        with self._lock:
            known = self._cache.get(term)
            if known is not None and newest - known.probed_at < max(1, self.limit // 4):
                self._cache.move_to_end(term)
                return known.count
        count = int(conn.execute(_COUNT, (f'"{term}"', self.limit + 1)).fetchone()[0])
        with self._lock:
            self._cache[term] = TermCount(count, newest)
            if len(self._cache) > CACHE_TERMS:
                self._cache.popitem(last=False)
        return count
