"""Doctor's read-only checks on PostgreSQL: a healthy store reports nothing, and a damaged one reports what is
damaged, named: a data page overwritten on disk, an index out of step with its table, a keyword entry that
no longer agrees with its text. With amcheck (installable by the test server's superuser) and without it (a
role that may not install it reads every row instead)."""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from openclaw_lossless.store.postgres import checks, file_maintenance, migrations
from openclaw_lossless.store.postgres.connection import Connection, Database
from tests.postgres import conftest as fixtures
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.test_messages import commit, said
from tests.postgres.server import PostgresServer

_roles = itertools.count(1)


def fill(store: Database) -> None:
    commit(store, "k1", [said("The herons were fishing by the old mill"), said("Noted.", role="assistant")])
    commit(store, "k2", [said("Café au lait at 8 o'clock")], session_id="s2")


def test_a_healthy_store_reports_nothing(store: Database) -> None:
    fill(store)
    conn = store.reader()

    assert checks.amcheck_usable(conn)  # the test server's superuser may install it (in a rolled-back transaction)
    assert checks.integrity_problems(conn) == ["ok"]
    assert checks.fts_problem(conn) is None
    assert checks.applied_migrations(conn) == {fn.__name__ for fn in migrations.MIGRATIONS}
    assert checks.has_table(conn, "messages") and not checks.has_table(conn, "messages_fts")
    extensions = {row[0] for row in conn.execute("SELECT extname FROM pg_extension")}
    assert "amcheck" not in extensions  # checking installed nothing


def test_a_store_not_yet_migrated_has_no_migrations_even_beside_another_store(store: Database, place: Place) -> None:
    other = Database(place.url, schema=f"{place.schema}_new", write_pool_size=1, read_pool_size=1)
    try:
        conn = other.reader()
        assert checks.store_schema(conn) == f"{place.schema}_new"
        assert checks.applied_migrations(conn) is None  # the store of ``place.schema`` has a migrations table
        assert not checks.has_table(conn, "messages")
    finally:
        other.close()


def test_keyword_entries_written_under_another_configuration_are_reported(store: Database) -> None:
    fill(store)
    # What an upgrade's changed stemmer or an altered configuration does to entries stored before it.
    store.write(
        lambda conn: conn.execute("ALTER TEXT SEARCH CONFIGURATION lossless ALTER MAPPING FOR asciiword WITH simple")
    )
    conn = store.reader()
    ids = [int(row[0]) for row in conn.execute("SELECT id FROM messages ORDER BY id")]

    problem = checks.fts_problem(conn)

    # herons/heron and noted/note now differ, and so does the third message: its date words ("May" stems to
    # "mai" under the store's Porter stemmer) are ascii words too.
    listed = ", ".join(f"msg:{i}" for i in ids)
    assert problem == f"3 of the messages' keyword entries differ from what their text gives now ({listed})"


def test_an_index_missing_rows_of_its_table_is_reported_by_amcheck(store: Database) -> None:
    fill(store)

    def lying_index(conn: Connection) -> None:
        """An index over a function declared immutable that then changes: the rows' entries are no longer found."""
        conn.execute("CREATE FUNCTION flip(x bigint) RETURNS bigint IMMUTABLE LANGUAGE sql AS 'SELECT x'")
        conn.execute("CREATE INDEX lying ON messages (flip(id))")
        conn.execute("CREATE OR REPLACE FUNCTION flip(x bigint) RETURNS bigint IMMUTABLE LANGUAGE sql AS 'SELECT -x'")

    store.write(lying_index)

    problems = checks.integrity_problems(store.reader())

    assert len(problems) == 1
    assert problems[0].startswith("index lying: heap tuple") and "lacks matching index tuple" in problems[0]


@pytest.fixture
def own_store(postgres_database: fixtures.Database) -> Iterator[Database]:
    """A store in a database of its own: the damage tests overwrite its files and install pg_buffercache."""
    db = Database(postgres_database.url, write_pool_size=2, read_pool_size=2)
    try:
        migrations.migrate(db)
        fill(db)
        yield db
    finally:
        db.close()


@pytest.fixture
def checker(postgres_database: fixtures.Database, own_store: Database) -> Iterator[Connection]:
    """A connection as a role that may read the store but not install amcheck (not a superuser)."""
    role = f"checker_{os.getpid()}_{next(_roles)}"
    with psycopg.connect(postgres_database.url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA lossless TO {}").format(sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA lossless TO {}").format(sql.Identifier(role)))
    conn = psycopg.connect(postgres_database.url, user=role, autocommit=True, options="-c search_path=lossless,public")
    try:
        yield conn
    finally:
        conn.close()
        with psycopg.connect(postgres_database.url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_without_amcheck_a_healthy_store_reports_nothing(checker: Connection) -> None:
    assert not checks.amcheck_usable(checker)
    assert checks.integrity_problems(checker) == ["ok"]
    assert checks.fts_problem(checker) is None


def test_amcheck_installed_but_not_granted_reads_every_row_instead_of_reporting_damage(
    checker: Connection, postgres_database: fixtures.Database
) -> None:
    """amcheck's functions are not granted to PUBLIC: a role without them must not see "permission denied"
    from every check as damage, but fall back to reading each row, and say the full check did not run."""
    with psycopg.connect(postgres_database.url, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS amcheck SCHEMA public")
    try:
        assert not checks.amcheck_usable(checker)
        assert checks.integrity_problems(checker) == ["ok"]
    finally:
        with psycopg.connect(postgres_database.url, autocommit=True) as admin:
            admin.execute("DROP EXTENSION amcheck")


def test_an_index_the_server_marks_invalid_is_reported_without_amcheck(
    checker: Connection, postgres_database: fixtures.Database
) -> None:
    with psycopg.connect(postgres_database.url, autocommit=True) as admin:  # what a failed concurrent build leaves
        admin.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'lossless.messages_by_agent'::regclass"
        )

    problems = checks.integrity_problems(checker)

    assert problems == [
        "index messages_by_agent: marked invalid by the server"
        " (rebuild it: REINDEX INDEX CONCURRENTLY messages_by_agent)"
    ]


def overwrite_first_page(server: PostgresServer, url: str, table: str) -> None:
    """Write garbage over the table's first data page on disk, once the server holds no copy of it in memory."""
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION IF NOT EXISTS pg_buffercache")
        admin.execute("CHECKPOINT")
        relative = admin.execute("SELECT pg_relation_filepath(%s)", (table,)).fetchone()
        admin.execute("SELECT pg_buffercache_evict_relation(%s::regclass)", (table,))
    assert relative is not None
    with open(server.data_dir / str(relative[0]), "r+b") as data:
        data.write(b"\xff" * 64)


def test_a_damaged_data_page_is_reported_with_and_without_amcheck(
    own_store: Database,
    checker: Connection,
    postgres_server: PostgresServer,
    postgres_database: fixtures.Database,
) -> None:
    overwrite_first_page(postgres_server, postgres_database.url, "lossless.messages")

    with_amcheck = checks.integrity_problems(own_store.reader())
    without = checks.integrity_problems(checker)

    assert with_amcheck[0].startswith('table messages: invalid page in block 0 of relation "base/')
    assert without == with_amcheck[:1]
    # amcheck also names each index whose check reads that page; the GIN index holds its own copy of the words.
    assert {p.split(":")[0] for p in with_amcheck[1:]} == {
        "index messages_by_agent", "index messages_by_session", "index messages_pkey", "index messages_scope",
        "index messages_session_rowid_content_hash_key",
    }  # fmt: skip
    assert checks.integrity_problems(own_store.reader(), limit=2) == with_amcheck[:2]


def test_file_maintenance_is_left_to_the_server(store: Database) -> None:
    """No WAL to truncate and no secure_delete to switch: the calls do nothing and answer that it was off,
    which is what the rescan sets back when it ends."""
    file_maintenance.checkpoint_fully(store)

    assert file_maintenance.set_secure_delete(store, True) is False
    assert file_maintenance.set_secure_delete(store, False) is False


def test_a_keyword_index_rebuild_stopped_part_way_is_reported_with_what_to_do(store: Database, place: Place) -> None:
    fill(store)
    options = f"-c search_path={place.schema},public"
    writer = psycopg.connect(place.url, options=options)  # a transaction the rebuild must wait for
    writer.execute("UPDATE messages SET tokens = tokens WHERE id = (SELECT min(id) FROM messages)")
    rebuild = psycopg.connect(place.url, autocommit=True, options=options)
    stopped: list[Exception] = []

    def run() -> None:
        try:
            rebuild.execute("REINDEX INDEX CONCURRENTLY messages_search")
        except psycopg.errors.QueryCanceled as exc:
            stopped.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        while not waiting(store, rebuild.info.backend_pid):
            assert thread.is_alive(), "the rebuild did not wait for the open write"
            time.sleep(0.01)
        store.reader().execute("SELECT pg_cancel_backend(%s)", (rebuild.info.backend_pid,))
        thread.join(30)
    finally:
        writer.rollback()
        writer.close()
        rebuild.close()
    assert stopped

    problems = checks.integrity_problems(store.reader())

    assert problems == [
        "index messages_search_ccnew: marked invalid by the server"
        " (a rebuild stopped part way left it: DROP INDEX CONCURRENTLY messages_search_ccnew)"
    ]


def waiting(store: Database, pid: int) -> bool:
    row = store.reader().execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return row is not None and row[0] == "Lock"
