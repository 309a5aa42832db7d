"""``DatabaseIndex``: ``VectorIndex``'s calls answered by PostgreSQL. On the same vectors it answers what the
in-memory index over a SQLite store answers, and a vector one sidecar writes (or forgets) is found (or gone)
for another at once, with nothing loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from openclaw_lossless.embed.database_index import DatabaseIndex
from openclaw_lossless.embed.index import VectorIndex, store_vectors
from openclaw_lossless.store.backend import SQLITE, Backend, postgres
from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.postgres.connection import Database
from openclaw_lossless.store.sqlite import migrations as sqlite_migrations
from openclaw_lossless.store.sqlite.connection import Database as SqliteDatabase
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.test_messages import said
from tests.postgres.backend.test_vectors import DIMENSION, clustered, stored_messages, unit, write

Floats = npt.NDArray[np.float32]
LAYOUT = [("main", "m1", 500), ("main", "m2", 300), ("main", "sub", 100), ("other", "o1", 400)]


def fill(db: SqliteDatabase | Database, ops: Backend, vectors_of: dict[str, Floats]) -> dict[str, int]:
    """The layout's sessions, messages and vectors in either store, the vectors stored as the embedding worker
    stores them (``store_vectors``); the session rows by session id."""
    rows: dict[str, int] = {}
    for agent, session_id, count in LAYOUT:

        def work(conn: Any, agent: str = agent, session_id: str = session_id, count: int = count) -> int:
            session = ops.sessions.ensure_session(conn, session_id, f"agent:{agent}:{session_id}")
            records = [said(f"{session_id} message {n}", at=1_700_000_000.0 + n) for n in range(count)]
            ids = ops.messages.insert_records(conn, session, records)
            store_vectors(ops, conn, ids, vectors_of[session_id], [session.rowid] * count)
            return session.rowid

        rows[session_id] = db.write(work)
    return rows


def test_database_index_answers_what_the_in_memory_index_answers_on_the_same_vectors(
    store: Database, tmp_path: Path
) -> None:
    rng = np.random.default_rng(6)
    centres = unit(rng.standard_normal((12, DIMENSION)).astype(np.float32))
    vectors_of = {session_id: clustered(count, rng, centres) for _, session_id, count in LAYOUT}
    lite = SqliteDatabase(tmp_path / "lossless.sqlite")
    try:
        sqlite_migrations.migrate(lite)
        lite_rows = fill(lite, SQLITE, vectors_of)
        memory = VectorIndex(DIMENSION)
        memory.load(SQLITE, lite.reader())
        pg_rows = fill(store, postgres(), vectors_of)
        database = DatabaseIndex(store, DIMENSION)
        queries = clustered(10, rng, centres)
        assert lite_rows == pg_rows  # the same row ids on both, so one scope names the same sessions on both
        scopes = [
            Scope(frozenset({"main"}), excluded=frozenset({pg_rows["sub"]})),
            Scope(session_rowids=frozenset({pg_rows["sub"], pg_rows["m1"]})),
            Scope(frozenset({"other"})),
        ]
        for scope in scopes:
            for query in queries:
                assert_same(memory.search(query, scope, 20), database.search(query, scope, 20))
            pair = np.stack([queries[0], queries[1]])
            assert_same_many(memory.search_many(pair, scope, 20), database.search_many(pair, scope, 20))
        some = [*range(1, 1300, 37), 10**9]
        (memory_ids, memory_rows), (database_ids, database_rows) = memory.vectors(some), database.vectors(some)
        assert memory_ids == database_ids
        assert np.allclose(memory_rows, database_rows, atol=2e-3)
        assert database.vector(10**9) is None and memory.vector(10**9) is None
        assert len(database) == len(memory) == 1300
    finally:
        lite.close()


def assert_same(expected: list[tuple[int, float]], got: list[tuple[int, float]]) -> None:
    """The same messages with the same cosines; two whose cosines tie within half precision may swap places."""
    assert len(got) == len(expected)
    cosine_of = dict(expected)
    shared = [ident for ident, _ in got if ident in cosine_of]
    assert len(shared) >= len(expected) - 1
    for ident, cosine in got:
        if ident in cosine_of:
            assert abs(cosine - cosine_of[ident]) < 2e-3
    assert np.all(np.diff([cosine for _, cosine in got]) <= 1e-6)  # best first


def assert_same_many(expected: list[tuple[int, Floats]], got: list[tuple[int, Floats]]) -> None:
    assert_same([(i, float(c[0])) for i, c in expected], [(i, float(c[0])) for i, c in got])
    second = {ident: float(c[1]) for ident, c in expected}
    assert all(abs(float(c[1]) - second[i]) < 2e-3 for i, c in got if i in second)


def test_a_vector_one_sidecar_writes_or_forgets_is_found_or_gone_for_another_at_once(
    place: Place, store: Database
) -> None:
    other = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        index = DatabaseIndex(other, DIMENSION)
        first = index.search(unit(np.ones(DIMENSION, dtype=np.float32)), Scope(frozenset({"main"})), 5)
        session, ids = stored_messages(store, "main", "s1", 3)
        rows = unit(np.random.default_rng(7).standard_normal((3, DIMENSION)).astype(np.float32))
        write(store, ids, rows, [session] * 3)

        seen = index.search(rows[2], Scope(frozenset({"main"})), 1)
        store.write(lambda conn: conn.execute("DELETE FROM messages WHERE id = %s", (ids[2],)))

        assert first == []
        assert [ident for ident, _ in seen] == [ids[2]] and abs(seen[0][1] - 1.0) < 2e-3
        assert index.vector(ids[2]) is None
        assert ids[2] not in [ident for ident, _ in index.search(rows[2], Scope(frozenset({"main"})), 3)]
        assert len(index) == 2
    finally:
        other.close()


def test_what_only_a_copy_needs_changes_nothing(store: Database) -> None:
    session, ids = stored_messages(store, "main", "s1", 2)
    rows = unit(np.random.default_rng(8).standard_normal((2, DIMENSION)).astype(np.float32))
    write(store, ids, rows, [session] * 2)
    index = DatabaseIndex(store, DIMENSION)

    index.load(postgres(), store.reader())
    index.add(ids, rows, ["main", "main"], [session] * 2)
    index.forget_ids(ids)
    index.forget_through(ids[-1])

    assert index.loaded.is_set() and index.searches_while_loading == 0 and index.nbytes == 0
    assert index.vectors(ids)[0] == ids  # forgetting is the store's business, in the forgetting transaction
    assert len(index) == 2
