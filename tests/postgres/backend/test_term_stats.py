"""Keyword search on PostgreSQL stays bounded as history grows, as on SQLite: words found everywhere are left
out of the query or cut to their newest matches, with the same choices as the SQLite store makes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

import psycopg
import pytest
from psycopg import sql

from openclaw_lossless.store.postgres import fulltext, migrations, term_stats
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.postgres.term_stats import TermStats
from openclaw_lossless.store.sqlite import fulltext as sqlite_fulltext
from openclaw_lossless.store.sqlite.term_stats import TermStats as SqliteTermStats
from tests.postgres.backend import test_fulltext
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.test_fulltext import MAIN, Twins, assert_same_ranking, expression, store_on_postgres

twins = test_fulltext.twins  # the same messages on SQLite and PostgreSQL
T = TypeVar("T")
LIMIT = 5
HISTORY = [("s0", "the zeppelin hangar lease ends in march, the budget too")]
HISTORY += [("s0", f"budget review number {n} went fine") for n in range(30)]
QUERIES = [
    ["zeppelin", "budget"],
    ["budget"],
    ["budget", "quixotic"],
    ["zeppelin", "quixotic", "budget"],
    ["quixotic"],
    ["hangar"],
    ["review", "fine", "lease", "march"],
]


def search(twins: Twins, words: list[str], terms: TermStats) -> list[int]:
    narrowed, after = terms.narrow(twins.postgres.reader(), expression(words))
    return [i for i, _ in fulltext.best_matches(twins.postgres.reader(), narrowed, after, MAIN, 100)]


def test_the_query_is_narrowed_as_on_sqlite(twins: Twins) -> None:
    twins.add(HISTORY)
    on_sqlite, on_postgres = SqliteTermStats(LIMIT), TermStats(LIMIT)

    for words in QUERIES:
        lite = on_sqlite.narrow(twins.sqlite.reader(), expression(words))
        pg = on_postgres.narrow(twins.postgres.reader(), expression(words))
        assert pg == lite, words
        ranked = sqlite_fulltext.best_matches(twins.sqlite.reader(), *lite, MAIN, 100)
        assert_same_ranking(ranked, fulltext.best_matches(twins.postgres.reader(), *pg, MAIN, 100))


def test_a_common_word_is_left_out_when_the_query_has_a_rarer_one(twins: Twins) -> None:
    ids = twins.add(HISTORY)

    assert len(search(twins, ["zeppelin", "budget"], TermStats(limit=0))) == 31  # no limit: every budget message
    assert search(twins, ["zeppelin", "budget"], TermStats(LIMIT)) == [ids[0]]


def test_a_query_of_common_words_ranks_only_their_newest_matches(twins: Twins) -> None:
    ids = twins.add(HISTORY)

    assert sorted(search(twins, ["budget"], TermStats(LIMIT))) == ids[-LIMIT:]


def test_a_word_no_message_holds_does_not_push_out_the_common_ones(twins: Twins) -> None:
    ids = twins.add(HISTORY)

    assert sorted(search(twins, ["budget", "quixotic"], TermStats(LIMIT))) == ids[-LIMIT:]
    assert search(twins, ["zeppelin", "quixotic", "budget"], TermStats(LIMIT)) == [ids[0]]
    assert search(twins, ["quixotic"], TermStats(LIMIT)) == []


def test_a_word_that_becomes_common_is_counted_again(twins: Twins) -> None:
    ids = twins.add(HISTORY)
    terms = TermStats(LIMIT)
    assert search(twins, ["hangar", "budget"], terms) == [ids[0]]

    more = twins.add([("s1", f"the hangar door number {n}") for n in range(8)])

    assert sorted(search(twins, ["hangar", "budget"], terms)) == more[-LIMIT:]  # both common now: newest hangars


def test_clear_forgets_counts_that_went_down(twins: Twins) -> None:
    """After archiving, a word is rarer than it was counted: until ``clear``, its old messages stay cut off."""
    ids = twins.add(HISTORY)
    terms = TermStats(LIMIT)
    assert search(twins, ["hangar", "budget"], terms) == [ids[0]]  # budget: common, left out
    twins.postgres.write(lambda conn: conn.execute("DELETE FROM messages WHERE id > %s", (ids[3],)))

    assert search(twins, ["hangar", "budget"], terms) == [ids[0]]  # still counted common
    terms.clear()

    assert sorted(search(twins, ["hangar", "budget"], terms)) == ids[:4]  # four budget messages: rare now


def test_hostile_words_are_counted_as_words(twins: Twins) -> None:
    ids = twins.add([("s0", "O'Brien paid the invoice"), ("s0", "plan a & b")])

    hostile = fulltext.expression_of(["o'brien", "a & b", 'x"'])
    narrowed, after = TermStats(LIMIT).narrow(twins.postgres.reader(), hostile)

    assert after == 0
    assert fulltext.words_of(narrowed) == ["o'brien", "a & b"]  # 'x"' matches nothing and is left out
    assert (narrowed, after) == SqliteTermStats(LIMIT).narrow(twins.sqlite.reader(), hostile)
    assert sorted(i for i, _ in fulltext.best_matches(twins.postgres.reader(), narrowed, 0, MAIN, 10)) == ids


@pytest.fixture
def second_store(place: Place) -> Iterator[Database]:
    schema = f"{place.schema}_b"
    db = Database(place.url, schema=schema, write_pool_size=2, read_pool_size=2)
    try:
        migrations.migrate(db)
        yield db
    finally:
        db.close()
        with psycopg.connect(place.url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_one_process_keeps_each_stores_counts_apart(twins: Twins, second_store: Database) -> None:
    """A word common in one store is not taken for common in another served by the same process."""
    twins.add(HISTORY)
    terms = TermStats(LIMIT)
    assert terms.narrow(twins.postgres.reader(), expression(["zeppelin", "budget"])) == ('"zeppelin"', 0)
    ids = store_on_postgres(second_store, [("s0", "budget for the zeppelin"), ("s0", "the budget again")])

    narrowed = terms.narrow(second_store.reader(), expression(["zeppelin", "budget"]))

    assert narrowed == ('"zeppelin" OR "budget"', 0)
    found = fulltext.best_matches(second_store.reader(), *narrowed, MAIN, 10)
    assert sorted(i for i, _ in found) == sorted(ids)


def index_scans(twins: Twins, run: Callable[[Connection], T]) -> tuple[T, int]:
    """What ``run`` returns, and how many scans of the keyword index it started: the backend's own count, before
    and after inside one transaction (not flushed within it). The planner is kept to indexes, as on a large
    store: on a few dozen rows it would rather read the table."""
    scans = "SELECT pg_stat_get_xact_numscans('messages_search'::regclass)"
    with twins.postgres.reader().transaction() as tx:
        tx.connection.execute("SET LOCAL enable_seqscan = off")
        before = tx.connection.execute(scans).fetchone()
        result = run(tx.connection)
        after = tx.connection.execute(scans).fetchone()
    assert before is not None and after is not None
    return result, int(after[0]) - int(before[0])


def index_scans_while_narrowing(twins: Twins, words: list[str], terms: TermStats) -> tuple[tuple[str, int], int]:
    return index_scans(twins, lambda conn: terms.narrow(conn, expression(words)))


def test_a_word_analyze_found_common_is_not_counted_on_the_index(twins: Twins) -> None:
    """Counting a common word reads every one of its postings (GIN has no scan that stops early), so a word the
    table's statistics put in well over ``limit`` messages is taken as common from them."""
    ids = twins.add(HISTORY)
    assert index_scans_while_narrowing(twins, ["zeppelin", "budget"], TermStats(LIMIT)) == (('"zeppelin"', 0), 2)
    twins.postgres.write(lambda conn: conn.execute("ANALYZE messages"))

    narrowed, scans = index_scans_while_narrowing(twins, ["zeppelin", "budget"], TermStats(LIMIT))

    assert (narrowed, scans) == (('"zeppelin"', 0), 1)  # only zeppelin counted: budget is in all 31
    assert search(twins, ["zeppelin", "budget"], TermStats(LIMIT)) == [ids[0]]
    assert sorted(search(twins, ["budget"], TermStats(LIMIT))) == ids[-LIMIT:]


def test_a_word_near_the_limit_is_counted_even_when_analyzed(twins: Twins) -> None:
    """ANALYZE's figures are a sample's: a word within twice the limit is counted, so it is never cut off by a
    statistic that overstates it."""
    ids = twins.add([("s0", f"lease {n} for the hangar") for n in range(2 * LIMIT)])
    twins.postgres.write(lambda conn: conn.execute("ANALYZE messages"))

    narrowed, scans = index_scans_while_narrowing(twins, ["hangar"], TermStats(2 * LIMIT))

    assert (narrowed, scans) == (('"hangar"', 0), 1)
    assert sorted(search(twins, ["hangar"], TermStats(2 * LIMIT))) == ids


def test_narrowing_on_analyzed_statistics_matches_sqlite(twins: Twins) -> None:
    twins.add(HISTORY)
    twins.postgres.write(lambda conn: conn.execute("ANALYZE messages"))
    on_sqlite, on_postgres = SqliteTermStats(LIMIT), TermStats(LIMIT)

    for words in QUERIES:
        assert on_postgres.narrow(twins.postgres.reader(), expression(words)) == on_sqlite.narrow(
            twins.sqlite.reader(), expression(words)
        ), words


def test_a_common_word_ranked_alone_takes_its_weight_from_the_statistics(
    twins: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranked alone (every word common), a word's BM25 weight scales every score alike: its document frequency
    is taken from ANALYZE instead of reading all its postings, and the same messages come back in the same
    order."""
    ids = twins.add(HISTORY)
    narrowed = TermStats(LIMIT).narrow(twins.postgres.reader(), expression(["budget"]))
    counted, counting_scans = index_scans(twins, lambda conn: fulltext.best_matches(conn, *narrowed, MAIN, 100))
    monkeypatch.setattr(fulltext, "ESTIMATED_ABOVE", 2 * LIMIT)
    twins.postgres.write(lambda conn: conn.execute("ANALYZE messages"))
    fulltext.forget_counts()

    estimated, scans = index_scans(twins, lambda conn: fulltext.best_matches(conn, *narrowed, MAIN, 100))

    assert scans == counting_scans - 1  # budget's postings are not read for its count
    assert [i for i, _ in estimated] == [i for i, _ in counted]
    assert sorted(i for i, _ in estimated) == ids[-LIMIT:]


def test_where_the_newest_matches_start_is_kept_until_the_store_grows(twins: Twins) -> None:
    """Every word common: the newest ``limit`` matches of the first are ranked. Finding where they start reads
    back through the messages (tens of milliseconds at 1M), so the start is kept until the store has grown by a
    quarter of the limit; meanwhile the matches added since are ranked too, then it is found again."""
    limit = 8
    ids = twins.add([("s0", f"budget review number {n}") for n in range(20)])
    terms = TermStats(limit)
    assert sorted(search(twins, ["budget"], terms)) == ids[-limit:]

    added = twins.add([("s0", "the budget again")])  # one message: under a quarter of the limit

    assert sorted(search(twins, ["budget"], terms)) == ids[-limit:] + added
    assert sorted(search(twins, ["budget"], TermStats(limit))) == (ids + added)[-limit:]  # a new process: exact

    added += twins.add([("s0", "the budget once more")])  # two since the start was found: a quarter of 8

    assert sorted(search(twins, ["budget"], terms)) == (ids + added)[-limit:]


def test_where_the_newest_matches_start_is_found_even_when_the_word_grew_rarer_lately(twins: Twins) -> None:
    """The start is looked for among the newest messages that the word's share (ANALYZE's) says hold 1.25 times
    the limit of its matches; a word that was everywhere once and is rare lately has fewer there, and its start
    is then found further back: the newest ``limit`` matches are ranked either way."""
    limit = 5
    old = twins.add([("s0", f"budget report number {n}") for n in range(60)])
    twins.add([("s0", f"weather note number {n}") for n in range(150)])
    recent = twins.add([("s0", "the budget again"), ("s0", "a quiet day"), ("s0", "budget closed")])
    twins.postgres.write(lambda conn: conn.execute("ANALYZE messages"))

    assert sorted(search(twins, ["budget"], TermStats(limit))) == [*old[-3:], recent[0], recent[2]]

    steady = twins.add([("s0", f"budget line {n}") for n in range(40)])  # common lately too
    twins.postgres.write(lambda conn: conn.execute("ANALYZE messages"))

    assert sorted(search(twins, ["budget"], TermStats(limit))) == steady[-limit:]


@pytest.mark.parametrize("limit", [3, 9, 25, 60])
@pytest.mark.parametrize("bound", ["chosen", "in_index", "key_range"])
def test_where_the_newest_matches_start_is_exact_however_the_word_spreads_over_time(
    twins: Twins, limit: int, bound: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dense early, a burst in the middle, sparse lately: whatever the share ANALYZE gives the word, the start is
    the one after which exactly its newest ``limit`` matches lie (the whole history is probed when the window
    probed first holds fewer), or none when the word is in fewer messages; the same whichever way the window's
    bound is read (in the keyword index's scan, or as the primary key's range: ``term_stats._window``)."""
    if bound != "chosen":
        monkeypatch.setattr(term_stats, "PROBE_IDS_PER_MATCH", 10.0**9 if bound == "in_index" else 0.0)
    every = [1] * 40 + [5] * 120 + [1] * 30 + [9] * 150 + [25] * 200  # a match every n messages, by era
    texts = [f"budget review number {n}" if n % gap == 0 else f"weather note number {n}" for n, gap in enumerate(every)]
    ids = twins.add([("s0", text) for text in texts])
    twins.postgres.write(lambda conn: conn.execute("ANALYZE messages"))
    budget = [i for i, text in zip(ids, texts, strict=True) if text.startswith("budget")]

    narrowed = TermStats(limit).narrow(twins.postgres.reader(), expression(["budget"]))

    assert narrowed == ('"budget"', budget[-limit - 1] if len(budget) > limit else 0)


def test_where_the_newest_matches_start_is_found_on_the_keyword_index_not_row_by_row(twins: Twins) -> None:
    """The probe reads the word's matches in its window through the keyword index's bitmap. The planner would
    rather walk the ids of the window one by one and test each message's vector (it does not price reading the
    vectors back): ~125 ms for a name in a tenth of 1M messages, against ~27. No row of the window is fetched
    one at a time through an index of the ids, and the start is the one the whole history gives."""
    limit = 5
    texts = [f"budget review number {n}" if n % 10 == 0 else f"weather note number {n}" for n in range(2000)]
    ids = twins.add([("s0", text) for text in texts])
    budget = [i for i, text in zip(ids, texts, strict=True) if text.startswith("budget")]
    twins.postgres.write(lambda conn: conn.execute("ANALYZE messages"))
    walked = (  # rows fetched one at a time through the messages' indexes, in this transaction
        "SELECT sum(pg_stat_get_xact_tuples_fetched(indexrelid)) FROM pg_index WHERE indrelid = 'messages'::regclass"
    )

    def probe(conn: Connection) -> tuple[tuple[str, int], int]:
        before = conn.execute(walked).fetchone()
        narrowed = TermStats(limit).narrow(conn, expression(["budget"]))
        after = conn.execute(walked).fetchone()
        assert before is not None and after is not None
        return narrowed, int(after[0]) - int(before[0])

    (narrowed, fetched), _ = index_scans(twins, probe)

    assert fetched == 1  # the newest message, whose id is the probe's upper end; not the window's 120
    assert narrowed == ('"budget"', budget[-limit - 1])
