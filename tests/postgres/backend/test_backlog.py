"""The embedding backlog shared by several sidecars: claimed rows go to one worker only, and a worker that dies
holding rows loses none of them: its claim runs out and another worker takes them."""

from __future__ import annotations

import threading
import time

import pytest

from openclaw_lossless.store.postgres import backlog
from openclaw_lossless.store.postgres.connection import Database
from tests.postgres.backend import workers
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.multiprocess import CONTEXT
from tests.postgres.backend.test_messages import commit, said

QUEUED = 600
BATCH = 5
TAKEOVER_DEADLINE_S = 60.0


@pytest.fixture
def queued(store: Database) -> list[int]:
    """``QUEUED`` entries on the backlog (their messages need not exist: a worker drops such an entry)."""
    store.write(lambda conn: conn.execute("INSERT INTO embedding_backlog SELECT generate_series(1, %s)", (QUEUED,)))
    return list(range(1, QUEUED + 1))


def drain(place: Place, worker: str, start: threading.Barrier, taken: list[int]) -> None:
    """Claim small batches until none is left, as a sidecar's embedding worker would (never finishing them)."""
    db = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        start.wait()
        while batch := db.write(lambda conn: backlog.claim(conn, BATCH, worker=worker, lease_s=300)):
            taken += [row[0] for row in batch]
    finally:
        db.close()


def test_two_workers_claiming_at_once_never_share_a_row_and_take_every_row(place: Place, queued: list[int]) -> None:
    start = threading.Barrier(2)
    taken: dict[str, list[int]] = {"a": [], "b": []}
    threads = [threading.Thread(target=drain, args=(place, name, start, rows)) for name, rows in taken.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert taken["a"] and taken["b"]  # both took part
    assert not set(taken["a"]) & set(taken["b"])
    assert sorted(taken["a"] + taken["b"]) == queued


def test_rows_claimed_by_a_live_worker_are_passed_over_until_removed(store: Database, queued: list[int]) -> None:
    first = store.write(lambda conn: backlog.claim(conn, 10, worker="a", lease_s=300))
    rest = store.write(lambda conn: backlog.claim(conn, QUEUED, worker="b", lease_s=300))
    store.write(lambda conn: backlog.remove(conn, [row[0] for row in first]))

    assert [row[0] for row in first] == queued[:10]
    assert [row[0] for row in rest] == queued[10:]
    assert store.write(lambda conn: backlog.claim(conn, QUEUED, worker="c", lease_s=300)) == []
    assert backlog.size(store.reader()) == QUEUED - 10


def test_a_killed_workers_claim_runs_out_and_another_worker_takes_its_rows(
    place: Place, store: Database, queued: list[int]
) -> None:
    results = CONTEXT.Queue()
    doomed = CONTEXT.Process(target=workers.claim_and_die, args=(place.url, place.schema, 20, 1.0, results))
    doomed.start()
    try:
        name, held = results.get(timeout=120)
    finally:
        doomed.kill()
        doomed.join()

    taken: list[int] = []
    deadline = time.monotonic() + TAKEOVER_DEADLINE_S
    while len(taken) < QUEUED and time.monotonic() < deadline:
        taken += [row[0] for row in store.write(lambda conn: backlog.claim(conn, QUEUED, worker="b", lease_s=300))]
        time.sleep(0.1)

    assert (name, held) == ("doomed", queued[:20])
    assert sorted(taken) == queued  # the dead worker's rows too, once its lease ran out


def test_reindex_queues_every_message_once_and_the_cache_keeps_the_first_vector(store: Database) -> None:
    commit(store, "k1", [said("one"), said("two", role="assistant")])
    store.write(lambda conn: backlog.remove(conn, [row[0] for row in backlog.oldest(conn, 10)]))
    model = ("local", "all-MiniLM-L6-v2", "default", 384)

    queued = [store.write(backlog.queue_all) for _ in range(2)]
    store.write(lambda conn: backlog.cache_vectors(conn, model, [(b"h1", b"first"), (b"h2", b"other")]))
    store.write(lambda conn: backlog.cache_vectors(conn, model, [(b"h1", b"second")]))

    assert queued == [2, 0]
    assert backlog.size(store.reader()) == 2
    assert sorted(backlog.cached_vectors(store.reader(), model, [b"h1", b"h2", b"h3"])) == [
        (b"h1", b"first"),
        (b"h2", b"other"),
    ]
    assert backlog.cached_vectors(store.reader(), (*model[:3], 768), [b"h1"]) == []
