"""Message vectors on PostgreSQL: written as int8 codes and read back as the same codes, replaced in place,
searched in the database within the agent's scope (another agent's vectors never come back), close to exact
search through the IVFFlat index, gone with their message, and started afresh for another dimension."""

from __future__ import annotations

import threading
import time

import numpy as np
import numpy.typing as npt
import pytest

from openclaw_lossless.store import quantize
from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.postgres import backlog, messages, sessions, vectors
from openclaw_lossless.store.postgres.connection import Connection, Database
from tests.postgres.backend.test_messages import said

DIMENSION = 384
Floats = npt.NDArray[np.float32]


def unit(rows: Floats) -> Floats:
    normed: Floats = (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)
    return normed


def clustered(count: int, rng: np.random.Generator, centres: Floats) -> Floats:
    """Unit vectors around a few topics, as chat messages' vectors sit (not spread evenly over the sphere)."""
    topics = centres[rng.integers(len(centres), size=count)]
    return unit(topics + 0.8 * rng.standard_normal((count, DIMENSION)).astype(np.float32) / np.sqrt(DIMENSION))


def stored_messages(db: Database, agent: str, session_id: str, count: int) -> tuple[int, list[int]]:
    """``count`` messages in a session of ``agent``: (the session's row, their ids)."""

    def work(conn: Connection) -> tuple[int, list[int]]:
        session = sessions.ensure_session(conn, session_id, f"agent:{agent}:{session_id}")
        records = [said(f"{session_id} message {n}", at=1_700_000_000.0 + n) for n in range(count)]
        return session.rowid, messages.insert_records(conn, session, records)

    return db.write(work)


def write(db: Database, ids: list[int], rows: Floats, sessions_of: list[int]) -> None:
    codes, scales = quantize.quantize(rows)
    db.write(lambda conn: vectors.write(conn, ids, codes, scales, sessions_of))


def found(db: Database, query: Floats, scope: Scope, k: int) -> list[int]:
    """The search's answer, the index made first if it is due (never, unless ``indexed`` lowered the bar)."""
    vectors.keep_index(db)
    return [ident for ident, _ in vectors.nearest(db.reader(), query, scope, k)]


def vector_indexes(db: Database) -> list[str]:
    rows = db.reader().execute("SELECT indexname FROM pg_indexes WHERE tablename = 'message_vectors' ORDER BY 1")
    return [str(row[0]) for row in rows]


def indexed(monkeypatch: pytest.MonkeyPatch) -> None:
    """An index on a table this small: made from the first vector, 100 vectors a list, 10 lists read."""
    monkeypatch.setattr(vectors, "BUILD_AT", 1)
    monkeypatch.setattr(vectors, "LIST_ROWS", 100)
    monkeypatch.setattr(vectors, "PROBES", 10)
    monkeypatch.setattr(vectors, "READ_VECTORS", 0)


@pytest.fixture(params=["exact", "index"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each search test twice: scopes ranked whole (small, as here), and forced through an IVFFlat index."""
    if request.param == "index":
        monkeypatch.setattr(vectors, "EXACT_ROWS", 0)
        indexed(monkeypatch)
    return str(request.param)


def test_vectors_read_back_as_their_codes_and_a_second_write_replaces_the_first(store: Database) -> None:
    session, ids = stored_messages(store, "main", "s1", 3)
    rng = np.random.default_rng(1)
    first = unit(rng.standard_normal((3, DIMENSION)).astype(np.float32))
    write(store, ids, first, [session] * 3)
    again = unit(rng.standard_normal((1, DIMENSION)).astype(np.float32))
    write(store, [ids[1]], again, [session])
    write(store, [ids[2] + 1000], again, [session])  # no such message: no vector

    (block,) = list(vectors.read_all(store.reader(), DIMENSION))
    codes, scales = quantize.quantize(np.vstack([first[0], again[0], first[2]]))

    assert block.ids.tolist() == ids
    assert np.array_equal(block.codes, codes)
    assert np.allclose(block.scales, scales, rtol=1e-3)
    assert block.sessions.tolist() == [session] * 3
    assert vectors.id_range(store.reader()) == (ids[0], ids[2])
    assert vectors.count(store.reader()) == 3


def test_another_agents_vectors_are_never_returned_even_when_they_are_the_nearest(store: Database, path: str) -> None:
    """Every one of the other agent's vectors is nearer the query than any of main's: the index's first
    candidates all belong to the other agent, and main's answer lies past them."""
    rng = np.random.default_rng(2)
    subject = unit(rng.standard_normal(DIMENSION).astype(np.float32))
    other_session, other_ids = stored_messages(store, "other", "o1", 300)
    main_session, main_ids = stored_messages(store, "main", "m1", 60)
    hidden_session, hidden_ids = stored_messages(store, "main", "m2", 20)  # a subagent's: excluded
    write(store, other_ids, unit(subject + 0.08 * rng.standard_normal((300, DIMENSION)).astype(np.float32)),
          [other_session] * 300)  # fmt: skip
    write(store, main_ids, unit(rng.standard_normal((60, DIMENSION)).astype(np.float32)), [main_session] * 60)
    write(store, hidden_ids, unit(subject + 0.05 * rng.standard_normal((20, DIMENSION)).astype(np.float32)),
          [hidden_session] * 20)  # fmt: skip
    scope = Scope(frozenset({"main"}), excluded=frozenset({hidden_session}))

    answer = found(store, subject, scope, 10)
    with_parent = found(store, subject, Scope(session_rowids=frozenset({hidden_session, main_session})), 10)

    assert len(answer) == 10 and set(answer) <= set(main_ids)
    assert answer == exact_ranking(store, subject, main_ids, 10)
    assert set(with_parent) <= set(hidden_ids)  # a subagent sees its own session, the nearest of all
    assert found(store, subject, Scope(), 10) == []


def test_a_small_scope_is_ranked_whole_even_where_the_planner_would_rather_use_the_index(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a large store the planner orders by the IVFFlat index and filters the nearest lists' rows (here it is
    told to, sorting being priced out); those are all the other agent's, and the asked session's nearest lie
    elsewhere. The scope, small enough to rank whole, must still get its exact answer."""
    indexed(monkeypatch)
    rng = np.random.default_rng(9)
    subject = unit(rng.standard_normal(DIMENSION).astype(np.float32))
    other_session, other_ids = stored_messages(store, "other", "o1", 400)
    asked_session, asked_ids = stored_messages(store, "main", "m1", 60)
    write(store, other_ids, unit(subject + 0.08 * rng.standard_normal((400, DIMENSION)).astype(np.float32)),
          [other_session] * 400)  # fmt: skip
    write(store, asked_ids, unit(rng.standard_normal((60, DIMENSION)).astype(np.float32)), [asked_session] * 60)
    assert vectors.keep_index(store)
    conn = store.reader()
    conn.execute("SET enable_sort = off")  # the planner's choice at a million rows: the index gives the order
    try:
        answer = [i for i, _ in vectors.nearest(conn, subject, Scope(session_rowids=frozenset({asked_session})), 10)]
    finally:
        conn.execute("RESET enable_sort")

    assert answer == exact_ranking(store, subject, asked_ids, 10)


def exact_ranking(db: Database, query: Floats, ids: list[int], k: int) -> list[int]:
    """The exact cosine ranking of ``ids`` over their vectors as stored."""
    held, rows = vectors.embeddings(db.reader(), ids)
    cosines = unit(rows) @ unit(query)
    order = np.lexsort((np.array(held), -cosines))[:k]
    return [held[int(i)] for i in order]


def test_the_top_20_overlaps_exact_search_in_scope(store: Database, path: str) -> None:
    """3,000 clustered vectors of two agents and a subagent: the scoped search finds at least 98 % of the exact
    top 20, averaged over 40 queries."""
    rng = np.random.default_rng(3)
    centres = unit(rng.standard_normal((30, DIMENSION)).astype(np.float32))
    layout = [("main", "m1", 1200), ("main", "m2", 600), ("main", "sub", 200), ("other", "o1", 1000)]
    held: dict[str, tuple[int, list[int]]] = {}
    for agent, session_id, count in layout:
        held[session_id] = session, ids = stored_messages(store, agent, session_id, count)
        write(store, ids, clustered(count, rng, centres), [session] * count)
    store.write(lambda conn: conn.execute("ANALYZE message_vectors"))
    scope = Scope(frozenset({"main"}), excluded=frozenset({held["sub"][0]}))
    in_scope = held["m1"][1] + held["m2"][1]

    overlaps = []
    for query in clustered(40, rng, centres):
        truth = exact_ranking(store, query, in_scope, 20)
        overlaps.append(len(set(found(store, query, scope, 20)) & set(truth)) / 20)

    assert float(np.mean(overlaps)) >= 0.98


def test_a_forgotten_message_has_no_vector_and_is_never_found(store: Database) -> None:
    session, ids = stored_messages(store, "main", "s1", 5)
    rows = unit(np.random.default_rng(4).standard_normal((5, DIMENSION)).astype(np.float32))
    write(store, ids, rows, [session] * 5)
    store.write(lambda conn: backlog.remove(conn, ids))
    store.write(lambda conn: conn.execute("DELETE FROM messages WHERE id = %s", (ids[0],)))

    held, _ = vectors.embeddings(store.reader(), ids)

    assert held == ids[1:]
    assert ids[0] not in found(store, rows[0], Scope(frozenset({"main"})), 5)
    assert vectors.unaccounted(store.reader()) == (0, 0)


def test_a_message_without_a_vector_is_counted_until_queued(store: Database) -> None:
    session, ids = stored_messages(store, "main", "s1", 4)
    write(store, ids[:3], unit(np.ones((3, DIMENSION), dtype=np.float32)), [session] * 3)
    store.write(lambda conn: backlog.remove(conn, ids))

    before = vectors.unaccounted(store.reader())
    queued = store.write(vectors.queue_missing)

    assert before == (1, 0)
    assert queued == 1
    assert vectors.unaccounted(store.reader()) == (0, 0)
    assert backlog.size(store.reader()) == 1


def test_recreate_drops_every_vector_and_takes_the_new_dimension(store: Database) -> None:
    session, ids = stored_messages(store, "main", "s1", 3)
    write(store, ids, unit(np.ones((3, DIMENSION), dtype=np.float32)), [session] * 3)

    store.write(lambda conn: vectors.recreate(conn, 8))
    small = unit(np.random.default_rng(5).standard_normal((3, 8)).astype(np.float32))
    write(store, ids, small, [session] * 3)

    conn = store.reader()
    assert vectors.exists(conn) and vectors.in_current_format(conn)
    assert vectors.table_dimension(conn) == 8
    assert vectors.count(conn) == 3
    assert found(store, small[1], Scope(frozenset({"main"})), 1) == [ids[1]]
    indexes = [str(r[0]) for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'message_vectors'")]
    assert indexes == ["message_vectors_pkey"]  # the lists come once there are vectors to learn them from
    with pytest.raises(Exception, match="expected 8 dimensions"):
        write(store, ids[:1], unit(np.ones((1, DIMENSION), dtype=np.float32)), [session])


def test_two_sidecars_preparing_a_new_store_at_once_recreate_its_vector_table_once(store: Database) -> None:
    """The second sidecar to start waits for the first's preparation, then keeps what the first began to embed.

    Without the hold both read "no embedder recorded"; the second then drops the table the first made (and
    the vectors written into it) and queues every message again."""
    from openclaw_lossless.embed.index import _prepare, prepare_table
    from openclaw_lossless.embed.provider import ProviderIdentity
    from openclaw_lossless.store.backend import Store, postgres

    ops = postgres()
    identity = ProviderIdentity("local", "model", "int8", DIMENSION)
    session, ids = stored_messages(store, "main", "s", 3)
    second: list[bool] = []
    started = threading.Event()

    def second_sidecar() -> None:
        started.set()
        second.append(prepare_table(Store(store, ops), identity))

    def first_sidecar(conn: Connection) -> None:
        _prepare(ops, conn, identity)
        codes, scales = quantize.quantize(unit(np.ones((1, DIMENSION), dtype=np.float32)))
        vectors.write(conn, ids[:1], codes, scales, [session])
        thread.start()
        started.wait(10)
        time.sleep(0.5)  # the second is now at its first statement, inside its own transaction

    thread = threading.Thread(target=second_sidecar)
    store.write(first_sidecar)
    thread.join(30)

    assert second == [False]
    assert vectors.count(store.reader()) == 1


def test_the_health_checks_count_is_exact_for_a_small_store_and_the_servers_estimate_for_a_large_one(
    store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/healthz`` and the metrics ask for ``estimated_count``: a poll must not read every vector's entry."""
    rowid, ids = stored_messages(store, "main", "s1", 300)
    write(
        store, ids, unit(np.random.default_rng(3).standard_normal((300, DIMENSION)).astype(np.float32)), [rowid] * 300
    )
    with store.writer() as conn:
        conn.execute("ALTER TABLE message_vectors SET (autovacuum_enabled = false)")  # no ANALYZE but this one
        conn.execute("ANALYZE message_vectors")  # what autovacuum does as a table grows
    store.write(lambda conn: conn.execute("DELETE FROM message_vectors WHERE message_id = ANY(%s)", (ids[:100],)))
    reader = store.reader()

    assert vectors.estimated_count(reader) == vectors.count(reader) == 200  # below the bar: counted

    monkeypatch.setattr(vectors, "COUNTED_EXACTLY", 150)
    assert vectors.count(reader) == 200
    assert 280 <= vectors.estimated_count(reader) <= 320  # the rows ANALYZE saw per page, times the pages now
