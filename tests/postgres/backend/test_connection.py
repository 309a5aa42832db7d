"""What a caller of the PostgreSQL store sees when the server says no: the project's errors (a full disk is
507, a server gone or refusing writes is 503), never a driver exception; a transaction the server rolled back
for a conflict (serialisation failure, deadlock) is run again, so the hook never sees one.

The server's errors are real ones: raised by the server with their SQLSTATE (``RAISE ... USING ERRCODE``),
arriving through the driver as they would from a full disk or a deadlock, or a real terminated backend."""

from __future__ import annotations

import psycopg
import pytest

from openclaw_lossless.errors import StorageFull, StoreReadOnly, StoreUnavailable
from openclaw_lossless.store.postgres import connection
from openclaw_lossless.store.postgres.connection import Connection, Database
from tests.postgres.backend.conftest import Place

NOTE = "INSERT INTO meta (key, value) VALUES ('note', %s)"


def raise_state(conn: Connection, state: str) -> None:
    conn.execute(f"DO $$ BEGIN RAISE EXCEPTION 'as the server would' USING ERRCODE = '{state}'; END $$")


def notes(db: Database) -> list[str]:
    return [str(row[0]) for row in db.reader().execute("SELECT value FROM meta WHERE key = 'note'")]


def test_an_unreachable_server_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable, match=r"cannot connect .*postgresql://lossless:\*\*\*@/x"):
        Database("postgresql://lossless:secret@/x?host=/nonexistent-lossless-dir&port=5432", timeout=1.0)


def test_a_full_disk_is_storage_full_and_nothing_is_stored(store: Database) -> None:
    def work(conn: Connection) -> None:
        conn.execute(NOTE, ("half a turn",))
        raise_state(conn, "disk_full")

    with pytest.raises(StorageFull) as caught:
        store.write(work)

    assert caught.value.status == 507
    assert notes(store) == []


def test_a_server_refusing_writes_is_store_read_only(store: Database) -> None:
    def work(conn: Connection) -> None:
        conn.execute("SET TRANSACTION READ ONLY")  # what a standby or default_transaction_read_only answers
        conn.execute(NOTE, ("a turn",))

    with pytest.raises(StoreReadOnly):
        store.write(work)


def test_a_connection_cut_mid_write_is_store_unavailable_and_the_next_write_works(store: Database) -> None:
    def work(conn: Connection) -> None:
        conn.execute(NOTE, ("cut",))
        conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    with pytest.raises(StoreUnavailable):
        store.write(work)
    store.write(lambda conn: conn.execute(NOTE, ("next",)))

    assert notes(store) == ["next"]


@pytest.mark.parametrize("state", ["serialization_failure", "deadlock_detected"])
def test_a_transaction_rolled_back_for_a_conflict_is_run_again(store: Database, state: str) -> None:
    attempts: list[int] = []

    def work(conn: Connection) -> str:
        attempts.append(len(attempts) + 1)
        conn.execute(NOTE, (f"attempt {len(attempts)}",))
        if len(attempts) == 1:
            raise_state(conn, state)
        return "stored"

    assert store.write(work) == "stored"
    assert attempts == [1, 2]
    assert notes(store) == ["attempt 2"]  # the first attempt left nothing


def test_a_conflict_that_never_ends_is_store_unavailable(store: Database) -> None:
    attempts: list[int] = []

    def work(conn: Connection) -> None:
        attempts.append(1)
        conn.execute(NOTE, ("again",))
        raise_state(conn, "serialization_failure")

    with pytest.raises(StoreUnavailable, match="retry"):
        store.write(work)
    assert len(attempts) == connection.WRITE_ATTEMPTS
    assert notes(store) == []


def test_the_store_reports_its_size_and_takes_maintenance_outside_a_transaction(store: Database) -> None:
    empty = store.file_bytes()
    store.write(lambda conn: conn.execute(NOTE, ("x" * 100_000,)))

    with store.writer() as conn:
        conn.execute("VACUUM meta")  # refused inside a transaction block

    assert 0 < empty < store.file_bytes()


def test_the_turns_statements_are_never_compiled_whatever_the_servers_default(store: Database, place: Place) -> None:
    """A server built with LLVM compiles any statement priced above ``jit_above_cost`` first; the store's
    connections turn that off, for reads and writes, and so does the connection that replaces a dropped one."""

    def jit(conn: Connection) -> object:
        row = conn.execute("SHOW jit").fetchone()
        return None if row is None else row[0]

    with psycopg.connect(place.url, autocommit=True) as admin:
        assert jit(admin) == "on"  # the server's default
        assert jit(store.reader()) == "off"
        assert store.write(jit) == "off"
        # waits (up to 10 s) until the backend has gone: its goodbye is on the client's socket
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", (store.reader().info.backend_pid,))
        assert jit(store.reader()) == "off"
