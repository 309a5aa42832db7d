"""The keyword lane on PostgreSQL ranks as FTS5 does on SQLite: the same messages, the same queries, the same
best matches in the same order with the same BM25 scores; scope, ``after`` and ``k`` bound what comes back;
hostile words are only words; a rebuild brings back what the index lost."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.capture.records import CaptureOptions, MessageRecord, capture
from openclaw_lossless.capture.redact import Redactor
from openclaw_lossless.store.model.sessions import Scope, SessionRef
from openclaw_lossless.store.postgres import fulltext, messages, sessions
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.postgres.term_stats import TermStats
from openclaw_lossless.store.sqlite import fulltext as sqlite_fulltext
from openclaw_lossless.store.sqlite import messages as sqlite_messages
from openclaw_lossless.store.sqlite import migrations as sqlite_migrations
from openclaw_lossless.store.sqlite import sessions as sqlite_sessions
from openclaw_lossless.store.sqlite.connection import Database as SqliteDatabase

OPTIONS = CaptureOptions(redactor=Redactor(()))
DAY = 86_400.0
MAY_8_2023 = 1_683_504_000.0
# Words both stemmers (FTS5's porter, PostgreSQL's snowball english) reduce alike, so the two rankings can be
# compared to the last digit; a few common ones to make long posting lists, rare ones for sharp IDFs.
COMMON = ["budget", "meeting", "garden", "river", "ticket", "number", "review", "plan", "team", "note"]
RARE = ["zeppelin", "hangar", "saffron", "risotto", "violin", "lisbon", "ferry", "marathon", "compost", "invoice"]
FILLER = ["and", "then", "we", "went", "over", "it", "again", "with", "more", "of", "those", "later", "today"]
QUERIES = [
    ["zeppelin", "budget"],
    ["budget"],
    ["saffron", "risotto", "garden"],
    ["violin", "lisbon", "ferry", "marathon"],
    ["team", "plan", "note", "review"],
    ["compost", "river", "2023"],
    ["may", "8"],
    ["invoice", "absentword"],
]


def said(text: str, at: float, role: str = "user") -> MessageRecord:
    return capture({"role": role, "content": text, "timestamp": int(at * 1000)}, OPTIONS)


def corpus(count: int, seed: int = 7) -> list[tuple[str, str]]:
    """``(session id, text)`` pairs: lengths from 3 to 60 words, some words repeated, two agents' sessions."""
    rng = random.Random(seed)
    made: list[tuple[str, str]] = []
    for n in range(count):
        words = [rng.choice(FILLER) for _ in range(rng.randint(2, 50))]
        words += [rng.choice(COMMON) for _ in range(rng.randint(1, 6))]
        words += [rng.choice(RARE) for _ in range(rng.choice([0, 0, 1, 3]))]
        rng.shuffle(words)
        made.append((f"s{n % 5}", " ".join(words)))
    return made


def agent_key(session_id: str) -> str:
    return f"agent:{'other' if session_id == 's4' else 'main'}:{session_id}"


def expression(words: Sequence[str]) -> str:
    return " OR ".join(f'"{word}"' for word in words)


@dataclass
class Twins:
    """The same messages stored on SQLite (the reference) and on PostgreSQL."""

    postgres: Database
    sqlite: SqliteDatabase

    def add(self, batch: Sequence[tuple[str, str]], start: float = MAY_8_2023) -> list[int]:
        ids: list[int] = []
        for n, (session_id, text) in enumerate(batch):
            record = said(text, start + n * DAY / 7)
            key = f"{session_id}-{text[:40]}-{n}-{start}"
            on_sqlite = self.sqlite.write(
                partial(_commit, sqlite_sessions, sqlite_messages, session_id=session_id, key=key, record=record)
            )
            on_postgres = self.postgres.write(
                partial(_commit, sessions, messages, session_id=session_id, key=key, record=record)
            )
            assert on_sqlite == on_postgres
            ids += on_postgres
        return ids

    def session(self, session_id: str) -> SessionRef:
        found = sessions.find_session(self.postgres.reader(), session_id)
        assert found is not None
        return found

    def both(self, words: Sequence[str], scope: Scope, k: int = 20, after: int = 0) -> tuple[list[Any], list[Any]]:
        query = expression(words)
        lite = sqlite_fulltext.best_matches(self.sqlite.reader(), query, after, scope, k)
        pg = fulltext.best_matches(self.postgres.reader(), query, after, scope, k)
        return lite, pg


def _commit(
    sessions_of: Any, messages_of: Any, conn: Any, *, session_id: str, key: str, record: MessageRecord
) -> list[int]:
    session = sessions_of.ensure_session(conn, session_id, agent_key(session_id))
    ids: list[int] = messages_of.commit_turn(conn, session, key, [record], heartbeat=False)[1]
    return ids


def store_on_postgres(db: Database, batch: Sequence[tuple[str, str]]) -> list[int]:
    """Messages stored on PostgreSQL alone (one per turn), for a second store of the same process."""
    ids: list[int] = []
    for n, (session_id, text) in enumerate(batch):
        record = said(text, MAY_8_2023 + n)
        ids += db.write(partial(_commit, sessions, messages, session_id=session_id, key=f"k{n}", record=record))
    return ids


@pytest.fixture
def twins(store: Database, tmp_path: Path) -> Iterator[Twins]:
    lite = SqliteDatabase(tmp_path / "lossless.sqlite")
    try:
        sqlite_migrations.migrate(lite)
        fulltext.forget_counts()
        yield Twins(store, lite)
    finally:
        lite.close()


MAIN = Scope(frozenset({"main"}))


def assert_same_ranking(lite: list[tuple[int, float]], pg: list[tuple[int, float]]) -> None:
    assert [i for i, _ in pg] == [i for i, _ in lite]
    assert [score for _, score in pg] == pytest.approx([score for _, score in lite], rel=1e-9)


def test_the_best_matches_and_their_scores_are_fts5s(twins: Twins) -> None:
    twins.add(corpus(240))

    for words in QUERIES:
        lite, pg = twins.both(words, MAIN)
        assert len(lite) > 0 or words == ["absentword"], words
        assert_same_ranking(lite, pg)


def test_a_word_said_many_times_in_a_message_weighs_as_often_as_it_was_said(twins: Twins) -> None:
    """A query of one word reads the word's count in each message from ``ts_rank`` (``fulltext.tf_bounds``),
    not from its positions: every count a vector keeps for a lexeme, 1 to 256, must score as the positions
    do (the same word beside one no message holds is ranked from them), in FTS5's order."""
    rng = random.Random(3)
    twins.add(
        [("s0", " ".join(["alpha"] * n + rng.choices(FILLER, k=rng.randint(0, 40)))) for n in range(1, 257)]
        + [("s0", " ".join(rng.choices(FILLER, k=30))) for _ in range(40)]
    )
    ranked = partial(fulltext.best_matches, twins.postgres.reader(), after=0, scope=MAIN, k=300)

    alone, counted = ranked(expression(["alpha"])), ranked(expression(["alpha", "quixotic"]))

    assert len(alone) == 256 and [i for i, _ in alone] == [i for i, _ in counted]
    assert [score for _, score in alone] == pytest.approx([score for _, score in counted], rel=1e-12)
    assert [i for i, _ in alone] == [i for i, _ in twins.both(["alpha"], MAIN, k=300)[0]]


def test_the_ranking_follows_the_store_as_it_grows(twins: Twins) -> None:
    """The corpus figures are kept between queries: once the store has grown, they are taken again."""
    twins.add(corpus(60, seed=1))
    assert_same_ranking(*twins.both(["zeppelin", "budget", "garden"], MAIN))

    twins.add([(session, text + " zeppelin zeppelin") for session, text in corpus(60, seed=2)], MAY_8_2023 + 90 * DAY)
    assert_same_ranking(*twins.both(["zeppelin", "budget", "garden"], MAIN))

    twins.add([("s0", "zeppelin budget"), ("s1", "garden zeppelin")], MAY_8_2023 + 99 * DAY)  # a turn's worth
    assert_same_ranking(*twins.both(["zeppelin", "budget", "garden"], MAIN))


def test_another_agents_messages_are_never_returned(twins: Twins) -> None:
    ids = twins.add([("s0", "the hangar lease"), ("s4", "the hangar lease"), ("s1", "a hangar in lisbon")])
    theirs = ids[1]

    lite, pg = twins.both(["hangar", "lease"], MAIN)

    assert theirs not in [i for i, _ in pg]
    assert sorted(i for i, _ in pg) == [ids[0], ids[2]]
    assert_same_ranking(lite, pg)
    assert [i for i, _ in twins.both(["hangar"], Scope(frozenset({"other"})))[1]] == [theirs]


def test_excluded_and_extra_sessions_are_honoured(twins: Twins) -> None:
    ids = twins.add([("s0", "ferry ticket"), ("s1", "ferry ticket"), ("s4", "ferry ticket")])
    s1, s4 = twins.session("s1"), twins.session("s4")

    scope = Scope(frozenset({"main"}), session_rowids=frozenset({s4.rowid}), excluded=frozenset({s1.rowid}))
    lite, pg = twins.both(["ferry"], scope)

    assert sorted(i for i, _ in pg) == [ids[0], ids[2]]
    assert_same_ranking(lite, pg)
    assert twins.both(["ferry"], Scope())[1] == []  # an empty scope holds nothing


def test_only_messages_after_the_given_id_are_ranked(twins: Twins) -> None:
    ids = twins.add([("s0", f"budget note {n}") for n in range(6)])

    lite, pg = twins.both(["budget"], MAIN, after=ids[3])

    assert sorted(i for i, _ in pg) == ids[4:]
    assert_same_ranking(lite, pg)


def test_the_bound_on_ids_is_one_the_keyword_index_reads(twins: Twins) -> None:
    """The keyword index holds the ids beside the words (``btree_gin``), and the ranking's bound on them is typed
    so the index takes it: a common word's newest matches are then read from the postings above the bound, not
    every posting of the word (at a million messages ~15 ms a query; the time is the benchmark's, the plan is
    this test's). Only the keyword index is left to plan with, in a transaction rolled back."""
    ids = twins.add([("s0", f"budget note {n}") for n in range(40)])
    query = "SELECT m.id FROM messages m WHERE m.search @@ to_tsquery('lossless', 'budget') AND " + fulltext.newer_than(
        "m"
    )
    with twins.postgres.reader().transaction(force_rollback=True) as conn:
        conn.connection.execute("SET LOCAL enable_seqscan = off")
        conn.connection.execute("ALTER TABLE messages DROP CONSTRAINT messages_pkey CASCADE")
        for index in ("messages_by_agent", "messages_by_session", "messages_scope"):
            conn.connection.execute(f"DROP INDEX {index}")
        plan = conn.connection.execute("EXPLAIN (FORMAT JSON) " + query, (ids[29],)).fetchone()
        found = conn.connection.execute(query, (ids[29],)).fetchall()

    assert sorted(row[0] for row in found) == ids[30:]
    assert plan is not None
    assert sorted(index_conditions(plan[0][0]["Plan"])) == ["id > ", "search @@"], plan  # both, in the scan


def test_a_word_thin_over_a_long_history_is_bounded_on_its_rows_not_in_the_index(
    twins: Twins, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index reads an entry per id above the bound: for a word in one message of 40, its newest matches lie
    above many more ids than it has matches in the whole history, and testing each match's row is the cheaper
    way (at 1M, a word in 1 % of the messages: ~31 ms against ~102). A dense word keeps the bound in the index.
    Either way the ranking is FTS5's."""
    texts = [f"budget line {n} of the ledger" if n % 40 == 0 else f"note {n} on the weather" for n in range(800)]
    ids = twins.add([("s0", text) for text in texts])
    budget = [i for i, text in zip(ids, texts, strict=True) if text.startswith("budget")]
    bounds: list[str] = []
    ranking = fulltext._best_matches_sql

    def noted(count: int, where: str) -> str:
        bounds.append(where)
        return ranking(count, where)

    monkeypatch.setattr(fulltext, "_best_matches_sql", noted)

    for word, after in (("budget", budget[-11]), ("note", ids[-11])):
        lite, pg = twins.both([word], MAIN, after=after)
        assert_same_ranking(lite, pg)
        assert len(pg) == 10

    assert [where.split(" AND ")[0] for where in bounds] == ["(m.id + 0) > %s::bigint", "m.id > %s::bigint"]
    query = "SELECT m.id FROM messages m WHERE m.search @@ to_tsquery('lossless', 'budget') AND " + fulltext.newer_than(
        "m", in_index=False
    )
    with twins.postgres.reader().transaction(force_rollback=True) as conn:
        conn.connection.execute("SET LOCAL enable_seqscan = off")
        plan = conn.connection.execute("EXPLAIN (FORMAT JSON) " + query, (budget[-11],)).fetchone()
    assert plan is not None
    assert index_conditions(plan[0][0]["Plan"]) == ["search @@"], plan  # the word's postings only


def index_conditions(node: dict[str, Any]) -> list[str]:
    """Which of the two conditions the plan's scans of ``messages_search`` read the index with."""
    found = [c for c in ("id > ", "search @@") if c in str(node.get("Index Cond", ""))]
    for child in node.get("Plans", []):
        found += index_conditions(child)
    return found


def test_k_bounds_the_answer_to_the_best(twins: Twins) -> None:
    twins.add(corpus(80))

    lite, pg = twins.both(["budget", "zeppelin"], MAIN, k=3)
    everything = twins.both(["budget", "zeppelin"], MAIN, k=1000)[1]

    assert len(pg) == 3 and pg == everything[:3]
    assert_same_ranking(lite, pg)
    assert fulltext.best_matches(twins.postgres.reader(), expression(["budget"]), 0, MAIN, 0) == []


HOSTILE = [
    "o'brien",
    "a & b | !c",
    "x:*",
    "(drop",
    "table); drop table messages; --",
    "back\\slash",
    'say ""hello""',
    "<->",
    "&",
    "__",
]


def test_hostile_words_are_only_words(twins: Twins) -> None:
    """Quotes, colons, tsquery operators and SQL in a word neither fail nor escape: each is searched as the
    text it is, and finds what FTS5 finds for it."""
    ids = twins.add([("s0", "O'Brien paid the invoice"), ("s0", "a and b but not c"), ("s0", "say hello to x")])

    for word in HOSTILE:
        query = fulltext.expression_of([word, "invoice"])
        lite = sqlite_fulltext.best_matches(twins.sqlite.reader(), query, 0, MAIN, 10)
        pg = fulltext.best_matches(twins.postgres.reader(), query, 0, MAIN, 10)
        assert [i for i, _ in pg] == [i for i, _ in lite], word
    found = fulltext.best_matches(twins.postgres.reader(), fulltext.expression_of(["o'brien"]), 0, MAIN, 10)
    assert [i for i, _ in found] == [ids[0]]
    assert messages.count(twins.postgres.reader()) == 3
    # A NUL, which a PostgreSQL text cannot hold (FTS5 refuses it: "unterminated string"), fails nothing here:
    # stored text has it as U+FFFD, and so does the word.
    nul = fulltext.best_matches(twins.postgres.reader(), fulltext.expression_of(["the\x00invoice"]), 0, MAIN, 10)
    assert nul == []


def test_a_malformed_expression_is_refused_not_guessed(store: Database) -> None:
    for bad in ["budget", '"budget" AND "plan"', '"budget" OR', '"unclosed']:
        with pytest.raises(ValueError, match="keyword expression"):
            fulltext.best_matches(store.reader(), bad, 0, MAIN, 10)


def test_accents_are_folded_both_ways(twins: Twins) -> None:
    ids = twins.add([("s0", "coffee at the café in Zürich"), ("s0", "a cafe near zurich station"), ("s0", "naïve")])

    for words in (["cafe"], ["café"], ["ZURICH"], ["zürich"], ["naive"]):
        lite, pg = twins.both([w.lower() for w in words], MAIN)
        assert_same_ranking(lite, pg)
        assert len(pg) >= 1, words
    assert sorted(i for i, _ in twins.both(["cafe"], MAIN)[1]) == ids[:2]


def test_the_date_a_message_was_written_is_searchable(twins: Twins) -> None:
    ids = twins.add([("s0", "the ferry left"), ("s0", "the ferry came back")], MAY_8_2023)

    lite, pg = twins.both(["8", "may", "2023"], MAIN)

    assert [i for i, _ in pg][:1] == [ids[0]]  # written on 8 May 2023; the second a few hours later, same day
    assert_same_ranking(lite, pg)


def test_a_rebuild_brings_back_what_the_index_lost(twins: Twins) -> None:
    """The date words are written beside the text at insert; a store that lost them (an older import, a
    bug) finds messages by their date again after a rebuild, and nothing else changes."""
    ids = twins.add(corpus(30))
    before = twins.both(["budget", "zeppelin"], MAIN)[1]
    twins.postgres.write(lambda conn: conn.execute("UPDATE messages SET date_terms = NULL"))
    assert fulltext.best_matches(twins.postgres.reader(), expression(["2023"]), 0, MAIN, 50) == []

    batches = twins.postgres.write(lambda conn: list(fulltext.rebuild(conn, 7)))

    assert batches == [7, 7, 7, 7, 2]
    dated = fulltext.best_matches(twins.postgres.reader(), expression(["2023"]), 0, MAIN, 50)
    assert sorted(i for i, _ in dated) == sorted(
        i for (session, _), i in zip(corpus(30), ids, strict=True) if session != "s4"
    )
    assert twins.both(["budget", "zeppelin"], MAIN)[1] == before


def test_a_rebuild_uses_the_current_text_search_configuration(store: Database) -> None:
    """What ``rebuild`` is for on PostgreSQL: after the configuration changes, stored vectors are re-derived."""
    ids = store.write(
        partial(_commit, sessions, messages, session_id="s0", key="k", record=said("running late", MAY_8_2023))
    )
    store.write(
        lambda conn: conn.execute("ALTER TEXT SEARCH CONFIGURATION lossless ALTER MAPPING FOR asciiword WITH simple")
    )
    assert fulltext.best_matches(store.reader(), expression(["running"]), 0, MAIN, 5) == []  # stored: 'run'

    store.write(lambda conn: list(fulltext.rebuild(conn, 100)))

    assert [i for i, _ in fulltext.best_matches(store.reader(), expression(["running"]), 0, MAIN, 5)] == ids


def test_a_search_past_its_deadline_stops_with_timeout_error(store: Database) -> None:
    conn = store.reader()
    before = conn.execute("SHOW statement_timeout").fetchone()

    with pytest.raises(TimeoutError), fulltext.deadline(conn, time.monotonic() + 0.05):
        conn.execute("SELECT pg_sleep(30)")

    assert conn.execute("SHOW statement_timeout").fetchone() == before
    with fulltext.deadline(conn, time.monotonic() + 30):
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert conn.execute("SHOW statement_timeout").fetchone() == before


def test_a_deadline_inside_a_write_leaves_the_transaction_usable(store: Database) -> None:
    def work(conn: Connection) -> object:
        with fulltext.deadline(conn, time.monotonic() + 30):
            conn.execute("SELECT 1")
        row = conn.execute("SHOW statement_timeout").fetchone()
        return None if row is None else row[0]

    assert store.write(work) == "0"


def test_a_keyword_search_whose_time_ran_out_between_statements_stops(twins: Twins) -> None:
    """The server's timeout bounds each statement; a search is several (narrowing, counting, ranking), so
    one that is out of time before a statement starts stops there, however quick that statement would be,
    as SQLite's progress handler stops it; the connection serves on after."""
    twins.add(corpus(20))
    conn = twins.postgres.reader()

    def search(at: float, pause: float) -> list[tuple[int, float]]:
        with fulltext.deadline(conn, at):
            time.sleep(pause)  # the turn's other work: each statement alone would still be allowed 0.5 s
            narrowed, after = TermStats().narrow(conn, expression(["budget", "zeppelin"]))
            return fulltext.best_matches(conn, narrowed, after, MAIN, 10)

    with pytest.raises(TimeoutError):
        search(time.monotonic() + 0.5, 0.6)

    assert search(time.monotonic() + 30, 0) != []
