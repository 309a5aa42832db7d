"""Small named values and the days' background reading on PostgreSQL, as on SQLite."""

from __future__ import annotations

from openclaw_lossless.store.postgres import message_days, meta
from openclaw_lossless.store.postgres.connection import Database
from tests.postgres.backend.test_messages import commit, said


def test_a_value_is_kept_replaced_and_removed(store: Database) -> None:
    store.write(lambda conn: meta.put(conn, "cursor", "1"))
    store.write(lambda conn: meta.put(conn, "cursor", "2"))
    assert meta.get(store.reader(), "cursor") == "2"
    store.write(lambda conn: meta.remove(conn, "cursor"))
    assert meta.get(store.reader(), "cursor") is None


def test_days_read_again_in_batches_come_back_once(store: Database) -> None:
    (_, ids) = commit(store, "k1", [said(f"last Saturday I climbed rock {n}", at=1_683_504_000 + n) for n in range(5)])
    store.write(lambda conn: conn.execute("DELETE FROM message_days"))
    store.write(message_days.read_again)

    steps = [store.write(lambda conn: message_days.backfill_step(conn, batch=2)) for _ in range(3)]

    assert steps == [True, True, False]
    assert not message_days.backfill_pending(store.reader())
    days = message_days.of(store.reader(), ids)
    assert sorted(days) == ids and all(len(spans) == 1 for spans in days.values())
