"""The PostgreSQL schema is applied once, however many sidecars start at the same moment, and a store written
by a newer version is refused before anything is written to it."""

from __future__ import annotations

import random
import string
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg import sql

from openclaw_lossless.errors import SchemaTooNew
from openclaw_lossless.recall.search import fts_query
from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.postgres import archive, fulltext, keyword_pairs, messages, migrations, sessions, vectors
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.statements.keyword_pairs import PairsProgress
from tests.postgres.backend import workers
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.multiprocess import run_together
from tests.postgres.backend.test_messages import MAY_8_2023, commit, said
from tests.postgres.backend.test_vectors import stored_messages, unit, vector_indexes, write
from tests.postgres.server import PostgresServer

ALL = [fn.__name__ for fn in migrations.MIGRATIONS]
ORIGINAL = list(migrations.MIGRATIONS)


def with_grams_column(db: Database) -> None:
    """The column (m009's) and table (m010's) this version's inserts write and read, on a store migrated only
    part of the way, so a test of an earlier migration can fill it with this version's code; m009 and m010
    keep them as they find them."""
    db.write(lambda conn: conn.execute("ALTER TABLE messages ADD COLUMN grams text"))
    db.write(lambda conn: migrations.m010_archived_identities(conn))


def recorded(place: Place) -> list[str]:
    with psycopg.connect(place.url) as conn:
        table = sql.Identifier(place.schema, "migrations")
        return [row[0] for row in conn.execute(sql.SQL("SELECT name FROM {} ORDER BY name").format(table))]


def test_four_sidecars_starting_at_once_apply_each_migration_once(place: Place) -> None:
    reports = run_together(workers.migrate, [(place.url, place.schema)] * 4)

    assert not [r for r in reports.values() if isinstance(r, str)], reports
    assert sorted(reports.values()) == [[], [], [], ALL]  # one applied everything, three found it done
    assert recorded(place) == sorted(ALL)


def test_a_second_start_applies_nothing_and_the_store_answers(store: Database) -> None:
    assert migrations.migrate(store) == []
    cursor = store.reader().execute(
        "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename IN ('sessions', 'turns', 'messages',"
        " 'message_days', 'embedding_backlog', 'message_vectors', 'snapshots', 'compactions', 'subagent_links',"
        " 'forgotten', 'meta', 'migrations')",
        (store.schema,),
    )
    assert cursor.fetchone() == (12,)


def test_a_store_written_by_a_newer_version_is_refused_untouched(place: Place) -> None:
    with psycopg.connect(place.url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(place.schema)))
        conn.execute(
            sql.SQL("CREATE TABLE {} (name text PRIMARY KEY, applied_at double precision NOT NULL)").format(
                sql.Identifier(place.schema, "migrations")
            )
        )
        conn.execute(
            sql.SQL("INSERT INTO {} VALUES ('m999_from_the_future', 0)").format(
                sql.Identifier(place.schema, "migrations")
            )
        )
    db = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        with pytest.raises(SchemaTooNew, match="m999_from_the_future"):
            migrations.migrate(db)
    finally:
        db.close()
    assert recorded(place) == ["m999_from_the_future"]  # nothing applied beside it


def test_extensions_an_operator_installed_in_another_schema_are_used_there(postgres_server: PostgresServer) -> None:
    """Managed services install extensions in a schema of their own (``extensions``), not ``public``."""
    name = "lossless_managed"
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        with psycopg.connect(postgres_server.url(name), autocommit=True) as conn:
            conn.execute("CREATE SCHEMA extensions")
            conn.execute("CREATE EXTENSION vector WITH SCHEMA extensions")
            conn.execute("CREATE EXTENSION unaccent WITH SCHEMA extensions")
            conn.execute("CREATE EXTENSION btree_gin WITH SCHEMA extensions")
        db = Database(postgres_server.url(name), write_pool_size=1, read_pool_size=1)
        try:
            migrations.migrate(db)
            (_, ids) = commit(db, "k1", [said("Un café à Paris")])
            found = db.reader().execute("SELECT id FROM messages WHERE search @@ to_tsquery('lossless', 'cafe')")
            assert found.fetchall() == [(ids[0],)]  # unaccent from the operator's schema folded the accent
            vector_type = db.reader().execute(
                "SELECT t.typnamespace::regnamespace::text, t.typname FROM pg_attribute a JOIN pg_type t"
                " ON t.oid = a.atttypid WHERE a.attrelid = 'message_vectors'::regclass AND a.attname = 'embedding'"
            )
            assert vector_type.fetchall() == [("extensions", "halfvec")]
            in_public = db.reader().execute(
                "SELECT count(*) FROM pg_extension WHERE extnamespace = 'public'::regnamespace"
            )
            assert in_public.fetchone() == (0,)  # nothing installed a second time
        finally:
            db.close()
    finally:
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def test_a_store_of_the_hnsw_layout_loses_that_index_and_keeps_its_vectors(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """m005 drops m003's HNSW index (the IVFFlat one is made later, from the vectors: ``test_vector_lists``)."""

    db = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:4])
        migrations.migrate(db)
        with_grams_column(db)
        session, ids = stored_messages(db, "main", "s1", 3)
        write(db, ids, unit(np.eye(3, 384, dtype=np.float32)), [session] * 3)
        monkeypatch.undo()

        assert migrations.migrate(db) == ALL[4:]

        assert vector_indexes(db) == ["message_vectors_pkey"]
        assert vectors.count(db.reader()) == 3
    finally:
        db.close()


def keyword_index(db: Database) -> str:
    row = db.reader().execute("SELECT pg_get_indexdef('messages_search'::regclass)").fetchone()
    assert row is not None
    return str(row[0])


def test_a_store_of_the_words_only_keyword_index_gets_the_ids_beside_them(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """m006 rebuilds the keyword index on ``(id, search)``; what it finds stays the same."""
    db = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:5])
        migrations.migrate(db)
        with_grams_column(db)
        _, ids = commit(db, "k1", [said("the ferry to Lisbon"), said("a ferry timetable"), said("no boat")])
        monkeypatch.undo()
        assert keyword_index(db).endswith("USING gin (search) WITH (fastupdate=off)")

        assert migrations.migrate(db)[0] == "m006_words_by_id"

        assert keyword_index(db).endswith("USING gin (id, search) WITH (fastupdate=off)")
        found = db.reader().execute(
            "SELECT id FROM messages WHERE search @@ to_tsquery('lossless', 'ferry') ORDER BY id"
        )
        assert found.fetchall() == [(ids[0],), (ids[1],)]
    finally:
        db.close()


def test_a_server_without_btree_gin_still_gives_a_working_store(
    place: Place, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Where the server has no such extension (its answer to an extension it does not have), the ids stay out
    of the keyword index, a warning says so and where to read what to do, and the store works as before."""
    monkeypatch.setattr(migrations, "IDS_BESIDE_WORDS", "btree_gin_not_installed_here")
    db = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        with caplog.at_level("WARNING"):
            assert migrations.migrate(db) == ALL
        _, ids = commit(db, "k1", [said("a ferry to Lisbon"), said("no boat")])

        assert keyword_index(db).endswith("USING gin (search) WITH (fastupdate=off)")
        assert "btree_gin_not_installed_here could not be created" in caplog.text
        assert "docs/postgresql.md" in caplog.text
        found = db.reader().execute("SELECT id FROM messages WHERE search @@ to_tsquery('lossless', 'ferry')")
        assert found.fetchall() == [(ids[0],)]
    finally:
        db.close()


def long_text(seed: int, words: int = 500) -> str:
    """Text whose keyword vector outgrows a row's 2 kB: distinct made-up words, so neither compresses much."""
    rng = random.Random(seed)
    return " ".join("".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(5, 9))) for _ in range(words))


def vector_out_of_row(db: Database, message_id: int) -> bool:
    row = (
        db.reader()
        .execute("SELECT pg_column_toast_chunk_id(search) IS NOT NULL FROM messages WHERE id = %s", (message_id,))
        .fetchone()
    )
    assert row is not None
    return bool(row[0])


def test_a_long_message_keeps_its_keyword_vector_in_its_row_and_reindex_moves_older_ones_there(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """m007: the ranking reads each match's vector, so a long message's text leaves the row, not its vector.
    A message stored before keeps its layout until ``reindex --fts`` rewrites it; every one is found alike."""
    db = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:6])
        migrations.migrate(db)
        with_grams_column(db)
        _, (before,) = commit(db, "k1", [said("the ferry to Lisbon " + long_text(1))])
        assert vector_out_of_row(db, before)

        monkeypatch.setattr(migrations, "MIGRATIONS", ORIGINAL[:7])  # m007 alone: m009 rewrites every row
        assert migrations.migrate(db) == ["m007_keyword_vectors_in_the_row"]
        monkeypatch.undo()

        _, (after,) = commit(db, "k2", [said("a ferry timetable " + long_text(2))])
        assert not vector_out_of_row(db, after)
        assert vector_out_of_row(db, before)  # only the catalog changed
        db.write(lambda conn: list(fulltext.rebuild(conn, 100)))
        assert not vector_out_of_row(db, before)
        found = db.reader().execute(
            "SELECT id, text LIKE 'the ferry%%' FROM messages"
            " WHERE search @@ to_tsquery('lossless', 'ferry') ORDER BY id"
        )
        assert found.fetchall() == [(before, True), (after, False)]
    finally:
        db.close()


RELEASE_TEXTS = [
    "我下周要去北京出差，住在王府井附近的酒店。",
    "明日は田中さんと新宿で会議があります。",
    "a ferry to Lisbon",
]


def test_a_store_of_the_release_before_pairs_finds_a_word_inside_unspaced_text_after_m009(
    place: Place, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """m009 leaves every keyword entry and the index as they are (no rewrite, at any size) and queues the messages
    a store already holds; the backfill (``keyword_pairs.step``) pairs them: words inside Chinese and Japanese
    runs are then found, the Latin words as before (meanwhile too), and the index keeps the ids beside them."""
    db = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        monkeypatch.setattr(migrations, "MIGRATIONS", migrations.MIGRATIONS[:8])  # up to m008: the release before pairs
        migrations.migrate(db)
        monkeypatch.undo()

        def release_rows(conn: Connection) -> list[int]:  # the release's own columns
            conn.execute(
                "INSERT INTO sessions (session_id, agent_id, created_at, last_seen_at) VALUES ('s1', 'main', 1, 1)"
            )
            return [
                int(row[0])
                for text in RELEASE_TEXTS
                for row in conn.execute(
                    "INSERT INTO messages (session_rowid, agent_id, role, created_at, stored_at, text, original,"
                    " content_hash, window_key, tokens) SELECT id, 'main', 'user', 1, 1, %s, '{}', %s, %s, 1"
                    " FROM sessions RETURNING id",
                    (text, text.encode(), text),
                ).fetchall()
            ]

        ids = db.write(release_rows)

        def found(word: str) -> list[int]:
            expression = fts_query(word)
            assert expression is not None
            hits = fulltext.best_matches(db.reader(), expression, 0, Scope(agent_ids=frozenset({"main"})), 5)
            return [ident for ident, _ in hits]

        assert found("北京") == [] and found("ferry") == [ids[2]]
        files = "SELECT pg_relation_filenode('messages'), pg_relation_filenode('messages_search')"
        before = db.reader().execute(files).fetchone()
        with caplog.at_level("INFO"):
            assert migrations.migrate(db) == ALL[ALL.index("m009_unspaced_grams") :]
            assert db.reader().execute(files).fetchone() == before  # neither the table nor its index rewritten
            assert "m009): 3 stored messages are paired in the background" in caplog.text
            assert found("北京") == [] and found("ferry") == [ids[2]]  # not yet paired; spaced text as before
            assert db.write(keyword_pairs.progress) == PairsProgress(ids[-1] + 1, 0, 3)
            assert db.write(keyword_pairs.step) is False  # one batch held them all
        assert "all 3 messages read, the backfill is done" in caplog.text
        assert db.write(keyword_pairs.progress) is None
        assert found("北京") == [ids[0]] and found("王府井") == [ids[0]] and found("田中") == [ids[1]]
        assert found("ferry") == [ids[2]]
        assert keyword_index(db).endswith("USING gin (id, search) WITH (fastupdate=off)")
    finally:
        db.close()


def test_messages_archived_before_the_upgrade_are_not_stored_again_after_m010(
    place: Place, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """m010 reads the archives the release before wrote (those this host can read): their messages' identities
    are kept, so a catch-up or a replay after the upgrade skips them; an archive that is gone is logged."""
    notes = [said(f"note {n}", at=MAY_8_2023 + n) for n in range(4)]
    db = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        monkeypatch.setattr(migrations, "MIGRATIONS", ORIGINAL[: ORIGINAL.index(migrations.m010_archived_identities)])
        migrations.migrate(db)
        monkeypatch.undo()

        def release(conn: Connection) -> None:
            session = sessions.ensure_session(conn, "s1", "agent:main:s1")
            for record in notes[:3]:
                messages.insert_row(conn, session, record, stored_at=1.0)

        db.write(release)
        first_two = [int(row[0]) for row in db.reader().execute("SELECT id FROM messages ORDER BY id LIMIT 2")]
        written, _ = archive._write_archive(db.reader(), tmp_path / "archive", first_two, first_two[-1], None)

        def archived_as_the_release_did(conn: Connection) -> None:
            conn.execute("DELETE FROM messages WHERE id = ANY(%s::bigint[])", (first_two,))
            for path in (written, tmp_path / "archive" / "gone.jsonl.gz"):
                conn.execute(
                    "INSERT INTO archives (path, created_at, first_message_id, last_message_id, message_count)"
                    " VALUES (%s, 1, 1, 2, 2)",
                    (str(path),),
                )

        db.write(archived_as_the_release_did)
        with caplog.at_level("WARNING"):
            assert migrations.migrate(db) == ["m010_archived_identities"]
        assert "gone.jsonl.gz not read" in caplog.text

        status, stored = commit(db, "after-the-upgrade", notes)
        assert status == "committed" and len(stored) == 1  # notes 0 and 1 archived, note 2 stored: note 3 is new
        assert said_texts(db) == ["note 2", "note 3"]
    finally:
        db.close()


def said_texts(db: Database) -> list[str]:
    return [str(row[0]) for row in db.reader().execute("SELECT text FROM messages ORDER BY id")]
