"""Sessions and reads on PostgreSQL: what one sidecar commits, another reads at once; a subagent's session
registered at spawn becomes the one the host names, and recall scope keeps the SQLite rules."""

from __future__ import annotations

import threading

import psycopg

from openclaw_lossless.store.postgres import messages, sessions
from openclaw_lossless.store.postgres.connection import Connection, Database
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.test_messages import commit, said


def test_a_commit_on_one_sidecar_is_read_at_once_on_another(place: Place, store: Database) -> None:
    other = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        reader = other.reader()
        assert messages.count(reader) == 0  # the reader has read before: no snapshot of that moment stays

        (_, ids) = commit(store, "k1", [said("written on the first sidecar")])

        assert messages.texts(other.reader(), ids) == {ids[0]: "written on the first sidecar"}
        assert other.reader() is reader  # the same thread keeps its connection
    finally:
        other.close()


def test_a_thread_that_ended_gives_its_read_connection_back(place: Place, store: Database) -> None:
    db = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        for _ in range(3):  # a pool of one: each new thread gets it only if the last one's came back
            thread = threading.Thread(target=lambda: messages.count(db.reader()))
            thread.start()
            thread.join()
        assert db.reader_count() == 1
        assert messages.count(db.reader()) == 0
    finally:
        db.close()


def test_a_spawned_subagents_session_is_adopted_and_scoped(store: Database) -> None:
    parent_key, child_key = "agent:main:main", "agent:main:subagent:7"

    def spawn(conn: Connection) -> None:
        sessions.ensure_session(conn, "parent-1", parent_key)
        conn.execute(
            "INSERT INTO subagent_links (parent_session_key, child_session_key, spawned_at) VALUES (%s, %s, 0)",
            (parent_key, child_key),
        )
        sessions.register_spawned(conn, child_key)

    store.write(spawn)
    spawned = sessions.require_session(store.reader(), child_key)
    child = store.write(lambda conn: sessions.ensure_session(conn, "child-1", child_key))
    conn = store.reader()
    parent = sessions.require_session(conn, "parent-1")

    assert child.rowid == spawned.rowid and child.session_id == "child-1"
    assert sessions.find_session(conn, child_key) is None
    assert sessions.parent_key(conn, child_key) == parent_key
    parent_scope = sessions.recall_scope(conn, parent, "agent")
    child_scope = sessions.recall_scope(conn, child, "agent")
    assert not parent_scope.contains("main", child.rowid)  # a parent never recalls its child's transcript
    assert child_scope.contains("main", parent.rowid) and child_scope.contains("main", child.rowid)
    assert sessions.agent_ids(conn) == frozenset({"main"})
    assert sessions.session_ids(conn) == {parent.rowid: "parent-1", child.rowid: "child-1"}


def test_after_the_server_drops_every_connection_reads_and_writes_go_on(place: Place, store: Database) -> None:
    """A restarted or failed-over server closes every connection: the pools notice before handing one out and
    take a fresh one, so no write or read fails for it."""
    reader = store.reader()
    messages.count(reader)
    with psycopg.connect(place.url, autocommit=True) as admin:
        admin.execute(  # waits (up to 10 s) until each backend has gone: its goodbye is on the client's socket
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )

    assert messages.count(store.reader()) == 0
    (_, ids) = commit(store, "k1", [said("after the restart")])

    assert messages.texts(store.reader(), ids) == {ids[0]: "after the restart"}
    assert store.reader() is not reader
