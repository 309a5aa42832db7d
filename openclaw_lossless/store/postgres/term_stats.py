"""Which words of a keyword query are too common to rank over the whole history, cached per process (PostgreSQL).

The rule is the SQLite store's (``store/sqlite/term_stats.py`` says why): a word in more than ``limit``
messages is left out when the query has rarer words, the rarer ones are kept rarest first while their
messages add up to at most ``2 × limit``, and when every word is that common only the newest ``limit``
messages holding the first word are ranked. BM25 is then computed for at most ``2 × limit`` messages.

Here a word's count is taken on the GIN index, up to ``limit + 1`` messages, unless ANALYZE's statistics put it
in more than ``ESTIMATE_MARGIN × limit`` messages: then it is common without counting. Counts are cached per
process and store (server, database, schema), and taken again once the store has grown by a quarter of
``limit`` messages. ``clear`` also drops the counts ``fulltext`` keeps for BM25 (archiving and forgetting).

Where the newest ``limit`` matches of a word start is cached the same way, unlike on SQLite (GIN has no
ordered scan): a probe reads the word's matches within the newest ids that should hold ``PROBE_MARGIN`` times
``limit`` of them by ANALYZE's share, and the whole history's only when the statistics do not know the word or
its recent messages held fewer. A start taken before the store grew by up to a quarter of ``limit`` ranks the
matches added since too. Why, what else was tried, and the figures: docs/decisions/0003-postgres-keyword-probe.md.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol, TypeVar

from openclaw_lossless.store.model.term_stats import CACHE_TERMS, DEFAULT_LIMIT, TermCount, keep_rarest
from openclaw_lossless.store.postgres import fulltext
from openclaw_lossless.store.postgres.connection import Connection

# A word of one lexeme ANALYZE's statistics put in more than ``ESTIMATE_MARGIN × limit`` messages is common
# without counting it (``fulltext.ESTIMATES`` says why); they err low, and the margin keeps a word near the
# limit counted exactly.
ESTIMATE_MARGIN = 2
_COUNTS = (
    f"{fulltext.ESTIMATES} SELECT w.word, CASE WHEN e.estimate > %(common)s THEN %(over)s"
    " ELSE (SELECT count(*) FROM (SELECT 1 FROM messages WHERE search @@ phraseto_tsquery('lossless', w.word)"
    f" LIMIT %(over)s) c) END FROM unnest(%(words)s::text[]) AS w(word) {fulltext.ESTIMATE_OF_WORD}"
)
# The window probed holds this many times ``limit`` matches at the word's estimated share (ANALYZE's share errs
# low; the margin is for a word rarer lately); one rarer than ``1 / PROBE_MARGIN`` of it is probed again whole.
# Why 1.25: docs/decisions/0003-postgres-keyword-probe.md.
PROBE_MARGIN = 1.25
_SHARE = (
    f"{fulltext.ESTIMATES} SELECT e.estimate / greatest((SELECT reltuples FROM pg_class"
    f" WHERE oid = 'messages'::regclass), 1) FROM (SELECT %s::text AS word) w {fulltext.ESTIMATE_OF_WORD}"
)
# The matches above ``from`` as a bitmap of the GIN index (materialized: under ``ORDER BY id DESC LIMIT`` the
# planner walks the primary key back instead, row by row); the one ``limit`` back from the newest, if any.
# Plain index scans are off for it (``_BITMAPS_ONLY``): the planner would walk the primary key and test each
# row's vector, priced too low. The window's bound goes into the keyword index while its ids are at most this
# many times the word's postings in the whole history, else it is the primary key's range (decision 0003).
PROBE_IDS_PER_MATCH = 1.5
_BITMAPS_ONLY = "SELECT set_config('enable_indexscan', 'off', true)"
_PROBE = (
    "WITH m AS MATERIALIZED (SELECT id FROM messages WHERE search @@ phraseto_tsquery('lossless', %s::text)"
    " AND {bound}) SELECT id FROM m ORDER BY id DESC LIMIT 1 OFFSET %s"
)


Key = tuple[object, ...]  # the store (server, database, schema), then the word


def _window(since: int, newest: int, matches: int) -> tuple[str, list[int]]:
    """``id > since`` as SQL and its parameter, where it costs least: in the keyword index's scan
    (``fulltext.newer_than``) while its id entries up to ``newest`` are few beside the word's ``matches``, else
    as the primary key's range, ANDed with the word's bitmap (an ``integer`` bound, which the index's
    ``bigint`` entries cannot take); no bound for the whole history. Figures: docs/decisions/0003.
    """
    if since <= 0:
        return "true", []
    if newest - since <= PROBE_IDS_PER_MATCH * matches:
        return fulltext.newer_than("messages"), [since]
    return "id > %s", [since]


class _Probed(Protocol):
    @property
    def probed_at(self) -> int: ...


P = TypeVar("P", bound=_Probed)


@dataclass(frozen=True)
class _Start:
    after: int  # the id the newest ``limit`` matches exceed (0: every match)
    probed_at: int  # the newest message id when found


class TermStats:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._cache: OrderedDict[Key, TermCount] = OrderedDict()
        self._starts: OrderedDict[Key, _Start] = OrderedDict()
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every count, and the ranking's corpus figures (after messages were archived: counts went down)."""
        with self._lock:
            self._cache.clear()
            self._starts.clear()
        fulltext.forget_counts()

    def narrow(self, conn: Connection, expression: str) -> tuple[str, int]:
        """The expression to run and the id the matches must exceed (0: the whole history)."""
        terms = fulltext.words_of(expression)
        if len(terms) == 0 or self.limit <= 0:
            return expression, 0
        store, newest = fulltext.store_of(conn)
        counts = self._counts(conn, store, terms, newest)
        kept = keep_rarest(terms, counts, self.limit)
        if kept is None:
            return expression, 0
        if kept:
            return fulltext.expression_of(kept), 0
        # every word is common: rank the newest matches of the first held (the prompt's own)
        first = next(term for term in terms if counts[term] > 0)
        return fulltext.expression_of([first]), self._start(conn, store, first, newest)

    def _start(self, conn: Connection, store: tuple[object, ...], term: str, newest: int) -> int:
        """The id the newest ``limit`` messages holding ``term`` exceed (0: it is in fewer), probed again once
        the store has grown by a quarter of ``limit``."""
        key = (*store, term)
        known = self._known(self._starts, [key], newest)
        if key in known:
            return known[key].after
        start = _Start(self._probe(conn, term, newest), newest)
        self._keep(self._starts, {key: start})
        return start.after

    def _probe(self, conn: Connection, term: str, newest: int) -> int:
        """Where the newest ``limit`` matches of ``term`` start: first within the newest ids its estimated
        share says hold ``PROBE_MARGIN × limit`` of them, then (too few there, or no estimate) in the whole store."""
        row = fulltext.in_time(conn).execute(_SHARE, (term,)).fetchone()
        share = 0.0 if row is None or row[0] is None else float(row[0])
        window = math.ceil(PROBE_MARGIN * (self.limit + 1) / share) if share > 0 else newest
        with conn.transaction():  # for ``_BITMAPS_ONLY``, one ``SET LOCAL`` for both windows
            fulltext.in_time(conn).execute(_BITMAPS_ONLY)
            for since in dict.fromkeys((max(0, newest - window), 0)):
                bound, params = _window(since, newest, math.ceil(share * newest))
                found = fulltext.in_time(conn).execute(_PROBE.format(bound=bound), [term, *params, self.limit])
                row = found.fetchone()
                if row is not None:
                    return int(row[0])
        return 0

    def _known(self, cache: OrderedDict[Key, P], keys: list[Key], newest: int) -> dict[Key, P]:
        """The entries of ``keys`` that still stand: taken before the store grew by a quarter of ``limit``."""
        found: dict[Key, P] = {}
        with self._lock:
            for key in keys:
                known = cache.get(key)
                if known is not None and newest - known.probed_at < max(1, self.limit // 4):
                    cache.move_to_end(key)
                    found[key] = known
        return found

    def _keep(self, cache: OrderedDict[Key, P], entries: dict[Key, P]) -> None:
        """Keep ``entries``, dropping the least recently used beyond ``CACHE_TERMS``."""
        with self._lock:
            cache.update(entries)
            while len(cache) > CACHE_TERMS:
                cache.popitem(last=False)

    def _counts(self, conn: Connection, store: tuple[object, ...], terms: list[str], newest: int) -> dict[str, int]:
        """Messages holding each term, counted up to ``limit + 1`` (cached until the store grows); the terms not
        cached are counted in one statement, not one round trip each."""
        known = self._known(self._cache, [(*store, term) for term in terms], newest)
        counts = {str(key[-1]): count.count for key, count in known.items()}
        missing = [term for term in dict.fromkeys(terms) if term not in counts]
        if missing:
            bounds = {"common": ESTIMATE_MARGIN * self.limit, "over": self.limit + 1, "words": missing}
            rows = fulltext.in_time(conn).execute(_COUNTS, bounds).fetchall()
            counted = {str(term): TermCount(int(count), newest) for term, count in rows}
            self._keep(self._cache, {(*store, term): count for term, count in counted.items()})
            counts.update((term, count.count) for term, count in counted.items())
        return counts
