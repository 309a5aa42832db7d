"""What the store holds, counted, per store and per agent, on PostgreSQL: the same commits, links, archives
and forgettings on SQLite and PostgreSQL give the same numbers, and the probe behind ``/healthz`` says why
a store cannot take a turn now (server gone, read-only, tables locked) in the project's own errors."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path
from types import ModuleType
from typing import Any

import psycopg
import pytest

from openclaw_lossless.errors import StoreReadOnly, StoreUnavailable
from openclaw_lossless.store.model.messages import turn_identities
from openclaw_lossless.store.postgres import agents, counts, messages, sessions
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.sqlite import agents as sqlite_agents
from openclaw_lossless.store.sqlite import counts as sqlite_counts
from openclaw_lossless.store.sqlite import messages as sqlite_messages
from openclaw_lossless.store.sqlite import migrations as sqlite_migrations
from openclaw_lossless.store.sqlite import sessions as sqlite_sessions
from openclaw_lossless.store.sqlite.connection import Database as SqliteDatabase
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.test_messages import said

SESSIONS = {"s1": "agent:main:s1", "s2": "agent:main:s2", "s3": "agent:ops:s3", "s4": "agent:ops:s4",
            "s5": "agent:quiet:s5"}  # fmt: skip
TURNS = [  # (session, key, texts, committed_at): s2's newest turn (by id) was stamped by a clock behind
    ("s1", "k1", ["one", "two"], 100.0),
    ("s2", "k2", ["three"], 300.0),
    ("s3", "k3", ["four", "five", "six"], 150.0),
    ("s2", "k4", ["seven"], 200.0),
    ("s1", "k5", ["eight"], 250.0),
]


def answers(db: Any, modules: tuple[ModuleType, ModuleType, ModuleType, ModuleType], mark: str) -> dict[str, Any]:
    """Build the scenario through one backend's modules and ask every count; session row ids as session ids."""
    sessions_of, messages_of, counts_of, agents_of = modules

    def run(query: str, *args: Any) -> None:
        db.write(lambda conn: conn.execute(query.replace("?", mark), args))

    before = counts_of.count_rows(db.reader())
    for sid, key in SESSIONS.items():
        db.write(lambda conn, sid=sid, key=key: sessions_of.ensure_session(conn, sid, key))
    for sid, key, texts, at in TURNS:

        def work(conn: Any, sid: str = sid, key: str = key, texts: list[str] = texts) -> Any:
            session = sessions_of.ensure_session(conn, sid, SESSIONS[sid])
            records = turn_identities([said(text) for text in texts], key)
            return messages_of.commit_turn(conn, session, key, records, heartbeat=False)

        db.write(work)
        run("UPDATE turns SET committed_at = ? WHERE advancement_key = ?", at, key)
    not_archived = counts_of.any_archived(db.reader())
    run("INSERT INTO snapshots (name, session_rowid, created_at) VALUES ('before', 1, 0)")
    run("INSERT INTO subagent_links (parent_session_key, child_session_key, spawned_at) VALUES (?, 'agent:main:x', 0)",
        SESSIONS["s1"])  # fmt: skip
    # Forgotten: a tombstone, and the message gone. Archived: a file of 2 messages, and the messages gone.
    run("INSERT INTO forgotten (session_id, content_hash, forgotten_at) SELECT 's3', content_hash, 0 FROM messages"
        " WHERE text = 'five'")  # fmt: skip
    run("DELETE FROM messages WHERE text IN ('five', 'one', 'two')")
    run("INSERT INTO archives (path, created_at, first_message_id, last_message_id, message_count)"
        " VALUES ('a.jsonl.gz', 0, 1, 2, 2)")  # fmt: skip
    conn = db.reader()
    names = sessions_of.session_ids(conn)
    return {
        "empty": asdict(before),
        "counts": asdict(counts_of.count_rows(conn)),
        "archived": (not_archived, counts_of.any_archived(conn)),
        "last_commits": agents_of.last_commits(conn),
        "sessions": {a: agents_of.session_count(conn, a) for a in ("main", "ops", "quiet", "nobody")},
        "messages": {a: agents_of.message_count(conn, a) for a in ("main", "ops", "quiet", "nobody")},
        "by_session": {names[rowid]: agent for rowid, agent in agents_of.agents_by_session(conn).items()},
    }


def test_counts_and_agents_are_those_of_the_sqlite_store(store: Database, tmp_path: Path) -> None:
    lite = SqliteDatabase(tmp_path / "lossless.sqlite")
    try:
        sqlite_migrations.migrate(lite)
        on_sqlite = answers(lite, (sqlite_sessions, sqlite_messages, sqlite_counts, sqlite_agents), "?")
    finally:
        lite.close()

    on_postgres = answers(store, (sessions, messages, counts, agents), "%s")

    assert on_postgres == on_sqlite
    assert set(on_postgres["empty"].values()) == {0}
    assert on_postgres["counts"] == {
        "messages": 5, "sessions": 5, "agents": 3, "turns": 5, "snapshots": 1, "forgotten": 1, "subagents": 1,
        "archived_messages": 2, "archives": 1,
    }  # fmt: skip
    assert on_postgres["archived"] == (False, True)
    # main's newest turn by id (k5, 250) though k2 says 300; s2's newest (k4, 200) is older than k5 anyway.
    assert on_postgres["last_commits"] == {"main": 250.0, "ops": 150.0}
    assert on_postgres["sessions"] == {"main": 2, "ops": 2, "quiet": 1, "nobody": 0}
    assert on_postgres["messages"] == {"main": 3, "ops": 2, "quiet": 0, "nobody": 0}
    assert on_postgres["by_session"] == {"s1": "main", "s2": "main", "s3": "ops", "s4": "ops", "s5": "quiet"}


def test_the_newest_turn_by_id_decides_even_when_its_clock_was_behind(store: Database) -> None:
    for key, at in (("k1", 500.0), ("k2", 400.0)):  # one session: k2 committed after k1, by a slower clock

        def work(conn: Connection, key: str = key, at: float = at) -> None:
            session = sessions.ensure_session(conn, "s1", "agent:main:s1")
            messages.commit_turn(conn, session, key, [said(key)], heartbeat=False)
            conn.execute("UPDATE turns SET committed_at = %s WHERE advancement_key = %s", (at, key))

        store.write(work)

    assert agents.last_commits(store.reader()) == {"main": 400.0}


def test_the_vector_extension_version_is_pgvector_s(store: Database) -> None:
    named = counts.vector_extension(store.reader())

    assert re.fullmatch(r"pgvector \d+\.\d+\.\d+", named)
    assert (named.removeprefix("pgvector "),) == store.reader().execute(
        "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
    ).fetchone()


def test_the_probe_passes_on_a_store_that_takes_writes(store: Database) -> None:
    store.write(counts.probe)
    counts.probe(store.reader())


def test_the_probe_says_the_server_takes_no_writes(store: Database) -> None:
    def read_only(conn: Connection) -> None:
        conn.execute("SET TRANSACTION READ ONLY")  # what a standby or default_transaction_read_only gives
        counts.probe(conn)

    with pytest.raises(StoreReadOnly):
        store.write(read_only)


def test_the_probe_says_the_store_is_unavailable_when_the_server_dropped_its_connection(
    place: Place, store: Database
) -> None:
    conn = psycopg.connect(place.url, autocommit=True, options=f"-c search_path={place.schema},public")
    try:
        with psycopg.connect(place.url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
        with pytest.raises(StoreUnavailable):
            counts.probe(conn)
    finally:
        conn.close()


def test_the_probe_says_the_store_is_unavailable_while_a_migration_locks_its_tables(
    place: Place, store: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(counts, "PROBE_LOCK_TIMEOUT", "50ms")
    with psycopg.connect(place.url) as migration:  # a transaction holding what ALTER TABLE holds
        migration.execute(f'LOCK TABLE "{place.schema}".meta IN ACCESS EXCLUSIVE MODE')

        with pytest.raises(StoreUnavailable, match="stayed locked"):
            store.write(counts.probe)
        migration.rollback()

    store.write(counts.probe)
