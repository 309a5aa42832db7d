"""How many lists a search of the IVFFlat index reads: measured with the queries a sidecar was asked
(``store/postgres/list_reads.py``), kept with the index, and enough to keep the nearest messages of queries
like them, more for queries the lists serve worse."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

from openclaw_lossless.embed.database_index import DatabaseIndex
from openclaw_lossless.store.postgres import list_reads, vectors
from openclaw_lossless.store.postgres.connection import Database
from openclaw_lossless.store.sqlite.sessions import Scope
from tests.postgres.backend.test_vector_lists import lists_index, lists_read
from tests.postgres.backend.test_vectors import DIMENSION, clustered, stored_messages, unit, write

SCOPE = Scope(frozenset({"main"}))


@pytest.fixture(autouse=True)
def small_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index at a test's scale (50 vectors a list), every search through it, and the ``READ_VECTORS``
    rule reading every list, so what the measure saves shows."""
    monkeypatch.setattr(vectors, "BUILD_AT", 200)
    monkeypatch.setattr(vectors, "LIST_ROWS", 50)
    monkeypatch.setattr(vectors, "PROBES", 1)
    monkeypatch.setattr(vectors, "READ_VECTORS", 10**6)
    monkeypatch.setattr(vectors, "EXACT_ROWS", 0)


def filled(store: Database) -> np.ndarray:
    """4,000 vectors about 8 topics, the index made (80 lists, not measured); the topics."""
    rng = np.random.default_rng(1)
    topics = unit(rng.standard_normal((8, DIMENSION)).astype(np.float32))
    for n in range(4):
        session, ids = stored_messages(store, "main", f"s{n}", 1000)
        write(store, ids, clustered(1000, rng, topics), [session] * 1000)
    # The statistics a real store has: without them the planner takes the agent's rows for a few and ranks
    # them all, never asking the index.
    store.write(lambda conn: conn.execute("ANALYZE message_vectors"))
    assert vectors.keep_index(store)
    assert lists_index(store) == (80, "4000")
    return topics


def recall(store: Database, queries: np.ndarray) -> float:
    """The mean share of each query's exact top 20 (by distance, ties as found) its search returned."""
    conn = store.reader()
    shares = []
    for query in queries:
        with conn.transaction():
            conn.execute("SET LOCAL enable_indexscan = off")
            exact = conn.execute(
                "SELECT embedding <=> %(q)s::real[]::halfvec d FROM message_vectors ORDER BY d LIMIT 20",
                {"q": query.tolist()},
                prepare=False,
            ).fetchall()
        found = {ident for ident, _ in vectors.nearest(conn, query, SCOPE, 20)}
        near = conn.execute(
            "SELECT count(*) FROM message_vectors WHERE message_id = ANY(%s)"
            " AND embedding <=> %s::real[]::halfvec <= %s",
            (sorted(found), query.tolist(), float(exact[-1][0]) + 1e-6),
        ).fetchone()
        assert near is not None
        shares.append(min(20, int(near[0])) / 20)
    return float(np.mean(shares))


def test_a_search_reads_the_lists_measured_with_the_queries_asked_and_keeps_their_nearest(store: Database) -> None:
    topics = filled(store)
    rng = np.random.default_rng(21)
    assert lists_read(store, clustered(1, rng, topics)) == 80  # not measured yet: the rule, every list

    # Queries about the topics of the messages, searched in the agent's scope.
    asked = [(query, SCOPE) for query in clustered(list_reads.QUERIES, rng, topics)]
    assert vectors.keep_index(store, asked=asked)

    made = lists_index(store)
    assert made is not None and made[1] is not None
    made_for, reads = (int(part) for part in made[1].split())
    assert made_for == 4000 and 1 <= reads < 80
    assert vectors.index_state(store.reader()).reads == reads
    fresh = clustered(40, rng, topics)  # other questions about the same topics
    assert lists_read(store, fresh) == reads
    assert recall(store, fresh) >= 0.97  # the measure's target, 0.99 of the asked queries' top 20, less a margin
    assert not vectors.keep_index(store, asked=asked)  # measured: nothing more to do until the index is made again


def test_queries_the_lists_serve_worse_make_a_search_read_more_of_them(store: Database) -> None:
    """Queries between the topics (mixes of two) have their nearest spread over more lists than queries about
    one topic: made again and measured with them, the index is read further."""
    topics = filled(store)
    rng = np.random.default_rng(22)
    assert vectors.keep_index(store, asked=[(query, SCOPE) for query in clustered(list_reads.QUERIES, rng, topics)])
    on_topic = vectors.index_state(store.reader()).reads

    pairs = rng.integers(len(topics), size=(list_reads.QUERIES, 2))
    between = unit(topics[pairs[:, 0]] + topics[pairs[:, 1]] + 0.8 * rng.standard_normal((len(pairs), DIMENSION)))
    assert vectors.keep_index(store, force=True, asked=[(query, SCOPE) for query in between.astype(np.float32)])

    further = vectors.index_state(store.reader()).reads
    assert on_topic is not None and further is not None and further > on_topic
    assert recall(store, between[:30].astype(np.float32)) >= 0.97


def test_a_sidecar_measures_an_index_once_it_has_searched_through_it_enough_and_a_restart_does_not_again(
    store: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(list_reads, "QUERIES", 30)
    caplog.set_level(logging.INFO, logger="openclaw_lossless")
    topics = filled(store)
    rng = np.random.default_rng(23)
    index = DatabaseIndex(store, DIMENSION)
    for query in clustered(29, rng, topics):
        index.search(query, SCOPE, 5)
    assert lists_index(store) == (80, "4000")  # 29 searches: not enough to measure with

    index.search(clustered(1, rng, topics)[0], SCOPE, 5)
    upkeep(index)

    made = lists_index(store)
    assert made is not None and made[1] is not None and made[1].startswith("4000 ")
    assert "a vector search reads" in caplog.text and "for the last 30 searches" in caplog.text
    restarted = DatabaseIndex(store, DIMENSION)
    for query in clustered(30, rng, topics):
        restarted.search(query, SCOPE, 5)
    upkeep(restarted)
    assert lists_index(store) == made  # measured once, kept by the index for every sidecar


def upkeep(index: DatabaseIndex) -> None:
    """Wait for the index's upkeep thread, if one is running."""
    for thread in threading.enumerate():
        if thread.name == "lossless-vector-lists":
            thread.join(60)
