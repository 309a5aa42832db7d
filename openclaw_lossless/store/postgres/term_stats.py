"""Which words of a keyword query are too common to rank over the whole history, cached per process (PostgreSQL).

The rule is the SQLite store's (``store/sqlite/term_stats.py`` says why): a word in more than ``limit``
messages is left out when the query has rarer words, the rarer ones are kept rarest first while their
messages add up to at most ``2 × limit``, and when every word is that common only the newest ``limit``
messages holding the first word are ranked. BM25 is then computed for at most ``2 × limit`` messages.

Here a word's count is taken on the GIN index, up to ``limit + 1`` messages (the words not cached all in one
statement; GIN reads every posting of the word even so), unless ANALYZE's statistics put it in more than
``ESTIMATE_MARGIN × limit`` messages: then it is common without counting. Counts are cached per process and
store (server, database, schema: one process may serve one store, a test several); a cached count is taken
again once the store has grown by a quarter of ``limit`` messages since. ``clear`` also drops the counts
``fulltext`` keeps for BM25, since both went down when messages were archived or forgotten (the statistics
follow at autovacuum's next ANALYZE).

Where the newest ``limit`` matches of a word start is cached the same way, unlike on SQLite. FTS5 finds it by
reading the word's postings backwards, a few milliseconds; here GIN has no ordered scan, and walking the
messages back from the newest reads every one of them until ``limit`` matched (at 1M messages, ~48,000 rows
for a name in a tenth of them: p50 47 ms; for a word in one message of 150, most of the table). Every word of
a long history's typical question is that common, so this ran on nearly every turn. A start taken before the
store grew by up to a quarter of ``limit`` ranks the matches added since too: at most ``limit + limit / 4``
messages, the newest ``limit`` among them.

A probe reads the word's matches on the GIN index within the newest ids that should hold ``PROBE_MARGIN``
times ``limit`` of them, by the share of messages ANALYZE's statistics give the word, and the whole history's
matches only when the statistics do not know the word (then it is in few messages: its postings are few) or
its recent messages held fewer than expected. Its cost is the matches in the window (a row of the table each)
and the bitmap that finds them: the window's bound goes into the keyword index's scan (``gin (id, search)``)
when its ids are few beside the word's postings, else it is the primary key's range ANDed with the word's
bitmap of every posting (``_window``).

A fresh process pays these on its first turns: on a 1M store, its first 100 turns learnt ~190 counts and 16
starts, and their ``assemble`` p95 was 87.6-120.6 ms against 55-59 for the turns after. Learning the words of
the store's newest 1,000 prompts in the background as ``serve`` starts was tried (2026-11-29, reverted): it
took 7.7 s of the server at 1M (2.1 at 100k) and brought the first 100 turns' p95 to 61.7 ms, but every
sidecar started does it, and in the scale benchmark 4 and 8 sidecars started at once committed 98 and 43
turns/s at 1M instead of ~265 and ~232 (p95 64 and 241 ms) while they learnt, and a fresh ``serve``'s
``assemble`` p95 over HTTP rose 89.6 -> 108.1 ms; the in-process p95 after learning, 57.8 ms, was within the
runs' scatter. What was learnt would have to be shared between sidecars (kept in the store), or learnt at a
pace the server does not feel, to be worth it.

Taking a start off the turn was tried too (2026-11-29, not kept): on a miss, the turn ranked the matches in the
newest ids its share says hold ``PROBE_MARGIN × limit`` of them and a background thread probed the exact start
for the turns after. Over a fresh process's first 100 turns at 1M (the same prompts, two rounds each way,
alternating) ``assemble`` p95 was 83.4 and 88.6 ms against 83.7 and 88.9: back to back, the background probe
took the next turns' cores, and the turn ranked a quarter more matches.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol, TypeVar

from openclaw_lossless.store.postgres import fulltext
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.sqlite.term_stats import CACHE_TERMS, DEFAULT_LIMIT, _Count, keep_rarest

# A word of one lexeme ANALYZE's statistics put in more than ``ESTIMATE_MARGIN × limit`` messages is common
# without counting it (``fulltext.ESTIMATES`` says why); they err low, and the margin keeps a word near the
# limit counted exactly.
ESTIMATE_MARGIN = 2
_COUNTS = (
    f"{fulltext.ESTIMATES} SELECT w.word, CASE WHEN e.estimate > %(common)s THEN %(over)s"
    " ELSE (SELECT count(*) FROM (SELECT 1 FROM messages WHERE search @@ phraseto_tsquery('lossless', w.word)"
    f" LIMIT %(over)s) c) END FROM unnest(%(words)s::text[]) AS w(word) {fulltext.ESTIMATE_OF_WORD}"
)
# The window probed holds this many times ``limit`` matches at the word's estimated share. ANALYZE's share is
# within a few percent for a word this common (and errs low: the window is then longer), so the margin is for
# a word rarer lately than on average; one rarer than ``1 / PROBE_MARGIN`` of it is probed again whole.
# Measured at 1M (63 of the store's common words, every probe the same start, the two alternating, two quiet
# runs): a margin of 2 took p50 28.5-34.3 ms, p95 55.4-80.8, mean 30.8-45.3; 1.25 took p50 21.1-24.1, p95
# 48.7-54.8, mean 23.3-28.6, the words probed again whole included. Widening the window step by step instead of
# probing the whole history lost (spans with an upper end, bounded as ``bigint`` in the keyword index, which
# read every id entry below each span's end).
PROBE_MARGIN = 1.25
_SHARE = (
    f"{fulltext.ESTIMATES} SELECT e.estimate / greatest((SELECT reltuples FROM pg_class"
    f" WHERE oid = 'messages'::regclass), 1) FROM (SELECT %s::text AS word) w {fulltext.ESTIMATE_OF_WORD}"
)
# The matches above ``from`` as a bitmap of the GIN index (materialized: under ``ORDER BY id DESC LIMIT`` the
# planner walks the primary key back instead, row by row); the one ``limit`` back from the newest, if any.
# Plain index scans are off for it (``_BITMAPS_ONLY``): the planner would also walk the primary key over the
# range and test each row's vector, priced below the bitmap since it does not count reading the vectors back;
# at 1M, for a name in a tenth of the messages, that took ~125 ms where the bitmap takes ~27.
# The window's bound goes into the keyword index while its ids are at most this many times the word's postings
# in the whole history (its estimated share of the messages): the index reads an entry per id above the bound
# (~0.09 µs each at 1M), the primary key's range costs ~0.02 µs an id plus ~0.1 µs a posting for the word's
# whole bitmap. Measured at 1M on 302 words in 1-20 % of the messages (two rounds, alternating which went
# first; the same start every time), against the range for every window: p50 13.1 -> 12.0 ms, p95 41.7 ->
# 20.6, mean 18.2 -> 14.0; for the names (8-12 %) p50 20.2 -> 11.7; no band slower. (The ranking's rule,
# ``fulltext.bound_in_index``, up to 8 ids a posting, put words in 3-5 % in the index: p50 17.9 against 12.9.)
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
    ``bigint`` entries cannot take); no bound for the whole history.

    The first is a common word's recent window: at 1M messages, a name in a tenth of them, its 6,253 matches
    among the newest 60,000 ids in a bitmap of 5.7-8.9 ms, against 16.1-18.7 for all its 102,578 postings
    ANDed with the range.
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
        self._cache: OrderedDict[Key, _Count] = OrderedDict()
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
            counted = {str(term): _Count(int(count), newest) for term, count in rows}
            self._keep(self._cache, {(*store, term): count for term, count in counted.items()})
            counts.update((term, count.count) for term, count in counted.items())
        return counts
