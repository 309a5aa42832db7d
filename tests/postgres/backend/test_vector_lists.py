"""The IVFFlat index of a PostgreSQL store's vectors: made once the table holds enough vectors to learn its lists
from, made again when the table has outgrown it, by one sidecar at a time, without losing a vector written
while it is made, and started by a sidecar that finds a filled store without one."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from openclaw_lossless.embed.database_index import DatabaseIndex
from openclaw_lossless.embed.index import LATER_SHORTLIST
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.backend import postgres
from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.postgres import migrations, vectors
from openclaw_lossless.store.postgres.connection import Database, set_search_path
from tests.helpers import HashEmbedder, make_settings
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.test_vectors import DIMENSION, clustered, stored_messages, unit, vector_indexes, write


@pytest.fixture(autouse=True)
def small_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    """The index's rules at a test's scale: made from 200 vectors on, 50 a list, 4 lists read."""
    monkeypatch.setattr(vectors, "BUILD_AT", 200)
    monkeypatch.setattr(vectors, "LIST_ROWS", 50)
    monkeypatch.setattr(vectors, "PROBES", 4)
    monkeypatch.setattr(vectors, "READ_VECTORS", 0)
    monkeypatch.setattr(vectors, "EXACT_ROWS", 0)  # every search through the index, when there is one


def lists_index(db: Database) -> tuple[int, str | None] | None:
    """The valid index's lists and its comment (the vectors it was made for); None without one."""
    row = (
        db.reader()
        .execute(
            "SELECT c.reloptions, obj_description(c.oid, 'pg_class') FROM pg_class c"
            " JOIN pg_index i ON i.indexrelid = c.oid WHERE c.oid = to_regclass(%s) AND i.indisvalid",
            (vectors.INDEX,),
        )
        .fetchone()
    )
    if row is None:
        return None
    options = dict(str(option).split("=", 1) for option in row[0])
    return int(options["lists"]), row[1]


def add_vectors(db: Database, session_id: str, count: int, seed: int) -> tuple[list[int], np.ndarray]:
    rng = np.random.default_rng(seed)
    session, ids = stored_messages(db, "main", session_id, count)
    rows = clustered(count, rng, unit(rng.standard_normal((8, DIMENSION)).astype(np.float32)))
    write(db, ids, rows, [session] * count)
    return ids, rows


def test_the_index_is_made_once_there_are_enough_vectors_and_again_when_the_table_has_doubled(
    store: Database,
) -> None:
    add_vectors(store, "s1", 150, seed=1)
    assert not vectors.keep_index(store)
    assert lists_index(store) is None

    add_vectors(store, "s2", 100, seed=2)
    assert vectors.keep_index(store)
    assert lists_index(store) == (5, "250")
    assert not vectors.keep_index(store)  # made for what there is: nothing to do

    add_vectors(store, "s3", 200, seed=3)
    assert not vectors.keep_index(store)  # 450 < twice 250
    ids, rows = add_vectors(store, "s4", 100, seed=4)
    assert vectors.keep_index(store)
    assert lists_index(store) == (11, "550")
    assert [i for i, _ in vectors.nearest(store.reader(), rows[7], Scope(frozenset({"main"})), 1)] == [ids[7]]
    plan = (
        store.reader()
        .execute(
            "EXPLAIN SELECT message_id FROM message_vectors ORDER BY embedding <=> %s::real[]::halfvec LIMIT 5",
            (rows[7].tolist(),),
        )
        .fetchall()
    )
    assert any(vectors.INDEX in str(line[0]) for line in plan)


def test_two_sidecars_checking_at_once_make_the_index_once(store: Database) -> None:
    add_vectors(store, "s1", 400, seed=5)
    made: list[bool] = []
    start = threading.Barrier(2)

    def check() -> None:
        start.wait()
        made.append(vectors.keep_index(store))

    threads = [threading.Thread(target=check) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(made) == [False, True]
    assert lists_index(store) == (8, "400")


def test_an_index_left_half_made_is_replaced(store: Database) -> None:
    """A sidecar killed while making the index leaves the next one unfinished under its temporary name."""
    add_vectors(store, "s1", 300, seed=6)
    store.write(lambda conn: conn.execute(f"CREATE INDEX {vectors.NEXT_INDEX} ON message_vectors (agent_id)"))

    assert vectors.keep_index(store)

    assert set(vector_indexes(store)) == {"message_vectors_pkey", vectors.INDEX}
    assert lists_index(store) == (6, "300")


def test_every_vector_written_while_the_index_is_made_is_found_through_it(store: Database) -> None:
    """Commits go on while the lists are learnt and filled (``CONCURRENTLY``), and none of their vectors is
    missing from the index made: each is found as its own nearest."""
    add_vectors(store, "s0", 3000, seed=7)
    written: list[tuple[list[int], np.ndarray]] = []
    building = threading.Thread(target=vectors.keep_index, args=(store,))
    building.start()
    during = 0
    while building.is_alive():
        during += 1
        written.append(add_vectors(store, f"w{during}", 20, seed=100 + during))
    building.join()
    assert during >= 1 and lists_index(store) is not None  # some commits did overlap the build

    scope = Scope(frozenset({"main"}))
    missed = [
        ident
        for ids, rows in written
        for ident, row in zip(ids, rows, strict=True)
        if [i for i, _ in vectors.nearest(store.reader(), row, scope, 1)] != [ident]
    ]
    assert missed == []


def test_a_sidecar_finding_a_filled_store_without_an_index_makes_one(place: Place) -> None:
    """A store copied in by ``migrate-store`` or import holds vectors and no index: the sidecar's start makes it."""
    db = Database(place.url, schema=place.schema, write_pool_size=2, read_pool_size=2)
    try:
        migrations.migrate(db)
        add_vectors(db, "s1", 300, seed=8)
        index = DatabaseIndex(db, DIMENSION)

        index.load(postgres(), db.reader())

        deadline = time.monotonic() + 60
        while lists_index(db) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert lists_index(db) == (6, "300")
    finally:
        db.close()


def test_a_build_that_fails_is_logged_and_not_tried_again_at_every_write(
    store: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Each try reads every vector, so a server that cannot give the build its memory is not asked every minute."""
    from openclaw_lossless.embed import database_index

    add_vectors(store, "s1", 3000, seed=9)
    monkeypatch.setattr(vectors, "BUILD_MEMORY", "1MB")  # pgvector refuses: k-means needs more
    monkeypatch.setattr(database_index, "UPKEEP_S", 0.0)
    index = DatabaseIndex(store, DIMENSION)

    failed = index.keep_index(force=True)
    assert failed is not None
    failed.join()

    assert lists_index(store) is None
    assert "the vector index could not be made" in caplog.text and "maintenance_work_mem" in caplog.text
    assert index.keep_index() is None  # after the worker's next write: not yet
    monkeypatch.setattr(vectors, "BUILD_MEMORY", "1GB")
    retried = index.keep_index(force=True)  # a restart asks again at once
    assert retried is not None
    retried.join()
    assert lists_index(store) == (60, "3000")


def lists_read(db: Database, rows: np.ndarray) -> int:
    """The lists a search of ``rows[0]`` was set to read (its ``SET LOCAL``, seen inside the same transaction)."""
    with db.reader().transaction() as tx:
        vectors.nearest(tx.connection, rows[0], Scope(frozenset({"main"})), 5)
        row = tx.connection.execute("SELECT current_setting('ivfflat.probes')").fetchone()
    assert row is not None
    return int(row[0])


def test_a_search_reads_as_many_lists_as_hold_its_share_of_vectors(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lists of a smaller store hold its neighbours further apart: a search reads about ``READ_VECTORS``
    vectors in whole lists (at least ``PROBES`` lists, at most all of them), by the rows a list held when the
    index was made. Without an index, ``PROBES``."""
    _, rows = add_vectors(store, "s1", 400, seed=11)
    monkeypatch.setattr(vectors, "PROBES", 1)
    monkeypatch.setattr(vectors, "READ_VECTORS", 100)
    assert lists_read(store, rows) == 1  # no index yet

    assert vectors.keep_index(store)
    assert lists_index(store) == (8, "400")  # 50 vectors a list

    assert lists_read(store, rows) == 2
    monkeypatch.setattr(vectors, "READ_VECTORS", 130)
    assert lists_read(store, rows) == 3  # whole lists: 2.6 rounded up
    monkeypatch.setattr(vectors, "PROBES", 5)
    assert lists_read(store, rows) == 5
    monkeypatch.setattr(vectors, "READ_VECTORS", 10_000)
    assert lists_read(store, rows) == 8  # every list, no more


def test_the_later_queries_of_a_search_read_a_quarter_of_the_first_ones_lists(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """assemble asks with the prompt in context, then with the prompt alone, and takes only the latter's few
    best: the second query reads ``LATER_SHORTLIST`` of the first's lists (rounded up), the share of its
    shortlist the SQLite index ranks for it, and still finds its own nearest in scope, each answer its own."""
    ids, rows = add_vectors(store, "s1", 400, seed=12)
    monkeypatch.setattr(vectors, "READ_VECTORS", 10_000)  # the first query reads every list
    assert vectors.keep_index(store)
    assert lists_index(store) == (8, "400")
    scope = Scope(frozenset({"main"}))
    conn = store.reader()
    with monkeypatch.context() as patched, conn.transaction():  # the search's SET LOCAL, read in its transaction
        patched.setattr(store, "reader", lambda: conn)
        DatabaseIndex(store, DIMENSION).search_many(rows[[0, 1]], scope, 5)  # as assemble asks
        row = conn.execute("SELECT current_setting('ivfflat.probes')").fetchone()
    assert row is not None and int(row[0]) == 2  # a quarter of 8
    found = vectors.nearest_many(store.reader(), rows[[0, 1]], scope, 5, later_share=LATER_SHORTLIST)
    (first_ids, _), (later_ids, _) = found
    assert lists_read(store, rows) == 8  # one query alone reads them all
    # A stored vector's list is the one whose centre is nearest it, so each query finds itself first.
    assert (first_ids[0], later_ids[0]) == (ids[0], ids[1])
    assert len(later_ids) == 5 and set(later_ids) <= set(ids)


def test_a_sidecar_stopped_while_its_index_is_made_cancels_the_build_and_the_next_start_makes_it(
    place: Place, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A build takes minutes of the server at 1M messages, and a supervisor stops a sidecar at any moment:
    closing cancels the build on the server and waits for its thread (none is left writing to a store this
    process has closed), says nothing alarming, and the next start finds the index still due and makes it."""
    settings = make_settings(
        tmp_path / "state", database_url=place.url, database_schema=place.schema, embedding_provider="none"
    )
    Sidecar(settings, start_worker=False, provider=HashEmbedder(DIMENSION)).close()  # the store and its tables
    db = Database(place.url, schema=place.schema, write_pool_size=2, read_pool_size=2)
    blocker = psycopg.connect(place.url)
    try:
        add_vectors(db, "s1", 300, seed=13)
        set_search_path(blocker, place.schema)
        # Taken by another session: a build (its lock) waits behind it, as one would be busy learning lists.
        blocker.execute(f"LOCK TABLE {vectors.TABLE} IN SHARE UPDATE EXCLUSIVE MODE")
        sidecar = Sidecar(settings, start_worker=False, provider=HashEmbedder(DIMENSION))
        deadline = time.monotonic() + 30
        while not build_waiting(db) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert build_waiting(db)

        sidecar.close()

        assert not [thread for thread in threading.enumerate() if thread.name == "lossless-vector-lists"]
        assert not build_waiting(db)  # cancelled on the server, not left waiting for the lock
        assert "could not be made" not in caplog.text and "still running at close" not in caplog.text
        blocker.rollback()
        assert lists_index(db) is None
        again = Sidecar(settings, start_worker=False, provider=HashEmbedder(DIMENSION))
        deadline = time.monotonic() + 60
        while lists_index(db) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        again.close()
        assert lists_index(db) == (6, "300")
    finally:
        blocker.close()
        db.close()


def build_waiting(db: Database) -> bool:
    """Whether a session is making the vector index (its ``CREATE INDEX``) or waiting to."""
    row = (
        db.reader()
        .execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query ILIKE %s"
            " AND state = 'active' AND pid <> pg_backend_pid()",
            (f"CREATE INDEX CONCURRENTLY%{vectors.NEXT_INDEX}%",),
        )
        .fetchone()
    )
    return row is not None and int(row[0]) > 0


class Clock:
    """``time`` for ``database_index``, running ``ahead`` seconds ahead of the real one."""

    ahead = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.ahead


def test_a_large_scope_is_counted_once_a_minute_and_still_answered_after_it_shrank(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a scope is small enough to rank whole is counted (up to ``EXACT_ROWS`` + 1 index entries) once,
    then taken as large for ``LARGE_SCOPE_TTL_S``; a scope forgetting shrank meanwhile is still answered, from
    what is left of it, and counted again once the time is up."""
    from openclaw_lossless.embed import database_index

    monkeypatch.setattr(vectors, "EXACT_ROWS", 300)
    ids, rows = add_vectors(store, "s1", 400, seed=14)
    assert vectors.keep_index(store)
    counted: list[bool] = []
    real = vectors.scope_is_small

    def counting(conn: Any, scope: Scope) -> bool:
        counted.append(real(conn, scope))
        return counted[-1]

    monkeypatch.setattr(vectors, "scope_is_small", counting)
    clock = Clock()
    monkeypatch.setattr(database_index, "time", clock)
    index = DatabaseIndex(store, DIMENSION)
    scope = Scope(frozenset({"main"}))

    assert index.search(rows[5], scope, 5)[0][0] == ids[5]
    assert index.search(rows[6], scope, 5)[0][0] == ids[6]
    assert counted == [False]  # large, counted once

    gone = ids[:350]
    store.write(lambda conn: conn.execute("DELETE FROM messages WHERE id = ANY(%s)", (gone,)))
    found = index.search(rows[380], scope, 20)
    assert found[0][0] == ids[380] and not set(gone) & {ident for ident, _ in found}
    assert counted == [False]
    counted.clear()

    clock.ahead = database_index.LARGE_SCOPE_TTL_S + 1
    index.search(rows[381], scope, 5)  # the minute is up: counted again
    found = index.search(rows[390], scope, 50)
    assert counted == [True, True]  # 50 left: small now, counted and ranked whole every time
    assert sorted(ident for ident, _ in found) == ids[350:]
