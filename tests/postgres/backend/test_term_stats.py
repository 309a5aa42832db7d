"""Keyword search on PostgreSQL stays bounded as history grows, as on SQLite: words found everywhere are left
out of the query or cut to their newest matches, with the same choices as the SQLite store makes."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from openclaw_lossless.store.postgres import fulltext, migrations
from openclaw_lossless.store.postgres.connection import Database
from openclaw_lossless.store.postgres.term_stats import TermStats
from openclaw_lossless.store.sqlite import fulltext as sqlite_fulltext
from openclaw_lossless.store.sqlite.term_stats import TermStats as SqliteTermStats
from tests.postgres.backend import test_fulltext
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.test_fulltext import MAIN, Twins, assert_same_ranking, expression, store_on_postgres

twins = test_fulltext.twins  # the same messages on SQLite and PostgreSQL
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
