"""``doctor`` on a PostgreSQL store: the real CLI against a real server, read-only, fixes PostgreSQL can use.

A store a real sidecar wrote passes with the same findings as its SQLite twin; a keyword entry out of step
with its text, an index the server marks invalid, an index amcheck finds out of step with its table, and a
store a newer version wrote are each named with their fix; a server that cannot be reached or refuses the
login is one finding, no traceback, and the password appears nowhere; doctor writes nothing (a role that
may only read passes as well, and every row, relation and extension is as it was).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import psycopg
import pytest
from psycopg import sql

from openclaw_lossless.cli.main import main
from openclaw_lossless.store.postgres import migrations, vectors
from openclaw_lossless.store.postgres.connection import Database
from tests.conversation import commit_body, conversation
from tests.helpers import HashEmbedder, live_sidecar, make_settings
from tests.openclaw_state import use_linked_openclaw
from tests.postgres import conftest as fixtures
from tests.postgres.backend.test_messages import commit, said
from tests.postgres.backend.test_migrations import long_text, with_grams_column
from tests.postgres.backend.test_vectors import DIMENSION, stored_messages, unit, write
from tests.postgres.server import PostgresServer

SCHEMA = "lossless"
SECRET = "Fake-Pw-7c1e9d"  # noqa: S105 - a password no server here knows: it must never be printed
RIGHT_PASSWORD = "Right-Pw-52b0aa"  # noqa: S105 - the one the password-asking server takes
STORE_CHECKS = ("binding", "embedder", "permissions", "disk", "database", "schema", "integrity", "fts", "vectors",
                "forgotten", "backlog", "index", "vector_index", "keyword_index")  # fmt: skip
SHARED_CHECKS = ("embedder", "permissions", "fts", "vectors", "forgotten", "backlog", "index")  # said alike


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A linked OpenClaw install whose sidecar is not running (a note): the exit code is the store's alone."""
    monkeypatch.setenv("LOSSLESS_EMBEDDING_PROVIDER", "none")
    monkeypatch.setenv("LOSSLESS_DATABASE_SCHEMA", SCHEMA)
    monkeypatch.delenv("LOSSLESS_DATABASE_URL", raising=False)
    use_linked_openclaw(monkeypatch, tmp_path / "home", tmp_path / "state")
    return tmp_path / "home"


@pytest.fixture
def store(postgres_database: fixtures.Database) -> Iterator[Database]:
    """A migrated store holding two turns, written through the backend (no sidecar)."""
    db = Database(postgres_database.url, schema=SCHEMA, write_pool_size=1, read_pool_size=1)
    try:
        migrations.migrate(db)
        commit(db, "k1", [said("The herons were fishing by the old mill"), said("Noted.", role="assistant")])
        commit(db, "k2", [said("Café au lait at 8 o'clock")], session_id="s2")
        yield db
    finally:
        db.close()


@pytest.fixture
def admin_url(postgres_database: fixtures.Database) -> str:
    """The test database as the server's superuser, for the damage a test makes by hand."""
    return postgres_database.url


def doctor(capsys: pytest.CaptureFixture[str], url: str, state: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    """The real CLI's ``doctor --json`` on the store at ``url``: its exit code and findings by check."""
    os.environ["LOSSLESS_DATABASE_URL"] = url
    try:
        code = main(["doctor", "--json", "--state-dir", str(state), "--port", "9", *flags])
    finally:
        del os.environ["LOSSLESS_DATABASE_URL"]
    out, err = capsys.readouterr()
    assert err == "" and "Traceback" not in out
    return code, {f["check"]: f for f in json.loads(out)["findings"]}


def reindex_fts(capsys: pytest.CaptureFixture[str], url: str, state: Path) -> None:
    """``openclaw-lossless reindex --fts`` on the store at ``url``, as an operator runs it; its output dropped."""
    os.environ["LOSSLESS_DATABASE_URL"] = url
    try:
        assert main(["reindex", "--fts", "--json", "--state-dir", str(state), "--port", "9"]) == 0
    finally:
        del os.environ["LOSSLESS_DATABASE_URL"]
    capsys.readouterr()


def bad(found: dict[str, Any]) -> list[str]:
    return [check for check, f in found.items() if not f["ok"]]


def test_a_store_a_real_sidecar_wrote_passes_as_its_sqlite_twin_does(
    capsys: pytest.CaptureFixture[str], postgres_database: fixtures.Database, tmp_path: Path, home: Path
) -> None:
    answers = {}
    for backend, url in (("postgresql", postgres_database.url), ("sqlite", None)):
        state = tmp_path / backend
        settings = make_settings(state, database_url=url, database_schema=SCHEMA)
        with live_sidecar(settings, HashEmbedder()) as server:
            for turn in conversation(6):
                server.post("commit-turn", commit_body(turn)).raise_for_status()
            server.wait_for_backlog()
            server.client.delete("/v1/messages/3").raise_for_status()
        if url is None:
            code, found = sqlite_doctor(capsys, state)
        else:
            code, found = doctor(capsys, url, state)
        assert code == 0 and not bad(found), found
        answers[backend] = found

    pg = answers["postgresql"]
    assert all(pg[check]["code"] for check in STORE_CHECKS), "every store finding has a stable code"
    assert pg["binding"]["detail"].startswith(f"psycopg {psycopg.__version__} (libpq ")
    assert ", PostgreSQL 18." in pg["binding"]["detail"] and ", pgvector 0.8." in pg["binding"]["detail"]
    assert pg["database"]["code"] == "database_reached" and "read-only session" in pg["database"]["detail"]
    reached = pg["database"]["detail"]
    assert f"/{postgres_database.name}?" in reached and f"(schema {SCHEMA})" in reached
    assert "the database's own disk is the PostgreSQL server's to watch" in pg["disk"]["detail"]
    assert pg["fts"]["detail"] == "full-text index covers 11 messages"  # 12 written, msg:3 forgotten
    assert pg["index"]["detail"] == "built with hash-words (64-d)"
    assert pg["vector_index"]["detail"] == "11 vectors: the index is made at 10000"
    assert pg["keyword_index"]["code"] == "keyword_index_ok" and pg["keyword_index"]["fix"] is None
    assert pg["integrity"]["code"] == "integrity_ok_rows_only" and "CREATE EXTENSION amcheck" in pg["integrity"]["fix"]
    assert "salvage" not in json.dumps(pg)
    sqlite = answers["sqlite"]
    assert pg["schema"]["code"] == sqlite["schema"]["code"] == "schema_ok"  # each backend's own migrations
    assert {c: (pg[c]["detail"], pg[c]["code"]) for c in SHARED_CHECKS} == {
        c: (sqlite[c]["detail"], sqlite[c]["code"]) for c in SHARED_CHECKS
    }


def sqlite_doctor(capsys: pytest.CaptureFixture[str], state: Path) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", "--json", "--state-dir", str(state), "--port", "9"])
    out, _ = capsys.readouterr()
    return code, {f["check"]: f for f in json.loads(out)["findings"]}


def test_a_keyword_entry_out_of_step_with_its_text_is_named_and_reindex_mends_it(
    capsys: pytest.CaptureFixture[str], store: Database, home: Path, tmp_path: Path
) -> None:
    herons = int(store.reader().execute("SELECT min(id) FROM messages").fetchone()[0])  # type: ignore[index]

    def stale_entry(conn: psycopg.Connection[Any]) -> None:
        """One message written while the configuration stemmed nothing (what a changed dictionary leaves)."""
        conn.execute("ALTER TEXT SEARCH CONFIGURATION lossless ALTER MAPPING FOR asciiword WITH simple")
        conn.execute("UPDATE messages SET text = text WHERE id = %s", (herons,))
        conn.execute(
            "ALTER TEXT SEARCH CONFIGURATION lossless ALTER MAPPING FOR asciiword WITH unaccent, lossless_stem"
        )

    store.write(stale_entry)
    code, found = doctor(capsys, store.url, tmp_path / "state")

    assert code == 1 and bad(found) == ["fts"], found
    assert found["fts"]["code"] == "fts_out_of_step" and found["fts"]["fix"] == "openclaw-lossless reindex --fts"
    assert (
        f"1 of the messages' keyword entries differ from what their text gives now (msg:{herons})"
        in (found["fts"]["detail"])
    )
    reindex_fts(capsys, store.url, tmp_path / "state")
    code, found = doctor(capsys, store.url, tmp_path / "state")
    assert code == 0 and found["fts"]["code"] == "fts_ok", found["fts"]


def test_a_store_a_newer_version_wrote_is_refused_with_the_upgrade(
    capsys: pytest.CaptureFixture[str], store: Database, home: Path, tmp_path: Path
) -> None:
    store.write(lambda conn: conn.execute("INSERT INTO migrations VALUES ('m999_from_the_future', 0)"))

    code, found = doctor(capsys, store.url, tmp_path / "state")

    assert code == 1 and bad(found) == ["schema"], found
    schema = found["schema"]
    assert schema["code"] == "schema_too_new" and schema["data"] == {"unknown": ["m999_from_the_future"]}
    assert "pip install --upgrade openclaw-lossless" in schema["fix"] and "LOSSLESS_DATABASE_SCHEMA" in schema["fix"]


def test_an_index_the_server_marks_invalid_is_named_with_its_rebuild(
    capsys: pytest.CaptureFixture[str],
    store: Database,
    postgres_database: fixtures.Database,
    home: Path,
    tmp_path: Path,
) -> None:
    with psycopg.connect(postgres_database.url, autocommit=True) as admin:  # what a failed concurrent build leaves
        admin.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'lossless.messages_by_agent'::regclass"
        )

    code, found = doctor(capsys, store.url, tmp_path / "state")

    assert code == 1 and bad(found) == ["integrity"], found
    integrity = found["integrity"]
    assert integrity["code"] == "integrity_problems" and "index messages_by_agent" in integrity["detail"]
    assert integrity["fix"] == "REINDEX INDEX CONCURRENTLY lossless.messages_by_agent"


def test_a_store_holding_enough_vectors_and_no_index_fails_until_a_sidecar_makes_it(
    capsys: pytest.CaptureFixture[str], store: Database, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``migrate-store`` leaves before a sidecar has run: vectors, and no index to search them by."""
    monkeypatch.setattr(vectors, "BUILD_AT", 20)
    monkeypatch.setattr(vectors, "LIST_ROWS", 10)
    session, ids = stored_messages(store, "main", "s9", 30)
    write(store, ids, unit(np.random.default_rng(3).standard_normal((30, DIMENSION)).astype(np.float32)),
          [session] * 30)  # fmt: skip

    code, found = doctor(capsys, store.url, tmp_path / "state")

    assert code == 1 and bad(found) == ["vector_index"], found
    missing = found["vector_index"]
    assert missing["code"] == "vector_index_missing" and "sidecar on this store makes it" in missing["fix"]
    assert missing["data"] == {"vectors": 30, "lists": None, "madeFor": None, "nextUnfinished": False}

    assert vectors.keep_index(store)
    code, found = doctor(capsys, store.url, tmp_path / "state")

    assert code == 0 and not bad(found), found
    assert found["vector_index"]["code"] == "vector_index_ok"
    assert found["vector_index"]["detail"] == "IVFFlat, 3 lists made for 30 vectors; 30 now"


def test_a_keyword_index_made_without_btree_gin_is_a_note_whose_fix_adds_the_ids(
    capsys: pytest.CaptureFixture[str],
    postgres_database: fixtures.Database,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that lacked the extension at the upgrade: the store works (exit 0), the note says why keyword
    recall is slower and gives the statements that add the ids; run as given, they do."""
    with monkeypatch.context() as patched:
        patched.setattr(migrations, "IDS_BESIDE_WORDS", "btree_gin_not_installed_here")
        db = Database(postgres_database.url, schema=SCHEMA, write_pool_size=1, read_pool_size=1)
        try:
            migrations.migrate(db)
            commit(db, "k1", [said("The herons were fishing by the old mill")])
        finally:
            db.close()

    code, found = doctor(capsys, postgres_database.url, tmp_path / "state")

    assert code == 0 and not bad(found), found
    note = found["keyword_index"]
    assert note["code"] == "keyword_index_words_only" and note["data"] == {"columns": ["search"]}
    assert "no btree_gin" in note["detail"] and note["fix"].startswith("with the sidecars stopped")
    statements = note["fix"].split(": ", 1)[1].rsplit(" (~", 1)[0]
    assert statements.startswith("CREATE EXTENSION btree_gin; DROP INDEX lossless.messages_search;")
    os.environ["LOSSLESS_DATABASE_URL"] = postgres_database.url
    try:  # what a person reads: the note and, under it, the statements to run
        assert main(["doctor", "--state-dir", str(tmp_path / "state"), "--port", "9"]) == 0
    finally:
        del os.environ["LOSSLESS_DATABASE_URL"]
    lines = capsys.readouterr().out.splitlines()
    at = lines.index(f"note keyword_index: {note['detail']}")
    assert lines[at + 1] == f"     fix: {note['fix']}" and statements in lines[at + 1]
    with psycopg.connect(postgres_database.url, autocommit=True) as admin:
        admin.execute(statements.encode())

    code, found = doctor(capsys, postgres_database.url, tmp_path / "state")

    assert code == 0 and found["keyword_index"]["code"] == "keyword_index_ok", found
    assert found["keyword_index"]["data"] == {"columns": ["id", "search"]}
    assert found["integrity"]["code"].startswith("integrity_ok") and found["fts"]["ok"]


def test_messages_stored_before_m007_with_their_keyword_vectors_out_of_their_rows_are_a_note_reindex_clears(
    capsys: pytest.CaptureFixture[str],
    postgres_database: fixtures.Database,
    home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """m007 changes only the catalog: a long message stored before keeps its keyword vector in TOAST, which
    the ranking reads back for every match, until ``reindex --fts`` rewrites it. doctor says how many of a
    sample are so, and the fix; one stored since (text out of the row, the vector in it) is not counted."""
    db = Database(postgres_database.url, schema=SCHEMA, write_pool_size=1, read_pool_size=1)
    try:
        with monkeypatch.context() as patched:
            every = list(migrations.MIGRATIONS)
            patched.setattr(migrations, "MIGRATIONS", every[:6])
            migrations.migrate(db)
            with_grams_column(db)
            commit(db, "k1", [said("the ferry to Lisbon " + long_text(1)), said("a short one")])
        code, found = doctor(capsys, postgres_database.url, tmp_path / "state")
        assert code == 0 and found["keyword_vectors"]["code"] == "keyword_vectors_not_due", found
        # the version of m007, as it was: m008 rewrites every row, and leaves no vector out of its row
        monkeypatch.setattr(migrations, "MIGRATIONS", every[:7])
        migrations.migrate(db)
        commit(db, "k2", [said("a ferry timetable " + long_text(2))], session_id="s2")
    finally:
        db.close()

    code, found = doctor(capsys, postgres_database.url, tmp_path / "state")

    assert code == 0 and not bad(found), found
    note = found["keyword_vectors"]
    assert note["code"] == "keyword_vectors_out_of_row" and note["data"]["sampled"] == 3, note
    assert note["data"]["outOfRow"] == 1 and note["detail"].startswith("1 of 3 messages sampled (33.3%")
    assert "openclaw-lossless reindex --fts" in note["fix"]
    reindex_fts(capsys, postgres_database.url, tmp_path / "state")

    code, found = doctor(capsys, postgres_database.url, tmp_path / "state")

    assert code == 0 and found["keyword_vectors"]["code"] == "keyword_vectors_ok", found["keyword_vectors"]
    assert found["keyword_vectors"]["data"]["outOfRow"] == 0


def test_a_vector_index_being_made_is_not_taken_for_damage(
    capsys: pytest.CaptureFixture[str], store: Database, admin_url: str, home: Path, tmp_path: Path
) -> None:
    """While a sidecar builds the next index the server marks it invalid, as it marks a failed build's."""
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE INDEX {vectors.NEXT_INDEX} ON lossless.message_vectors (agent_id)")
        admin.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass",
            (f"lossless.{vectors.NEXT_INDEX}",),
        )

    code, found = doctor(capsys, store.url, tmp_path / "state")

    assert code == 0 and not bad(found), found
    assert found["integrity"]["code"].startswith("integrity_ok")
    assert found["vector_index"]["data"]["nextUnfinished"] is True
    assert "is there unfinished" in found["vector_index"]["detail"]


def test_with_amcheck_installed_an_index_out_of_step_with_its_table_is_found(
    capsys: pytest.CaptureFixture[str], store: Database, admin_url: str, reader: str, home: Path, tmp_path: Path
) -> None:
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute("CREATE EXTENSION amcheck")
    code, found = doctor(capsys, store.url, tmp_path / "state")
    assert code == 0 and found["integrity"]["code"] == "integrity_ok", found["integrity"]
    assert found["integrity"]["detail"] == "amcheck: every table and B-tree/GIN index ok"
    code, found = doctor(capsys, reader, tmp_path / "state")  # amcheck's functions are not granted to it
    assert code == 0 and found["integrity"]["code"] == "integrity_unchecked", found["integrity"]
    assert "GRANT EXECUTE ON FUNCTION verify_heapam" in found["integrity"]["fix"]

    def lying_index(conn: psycopg.Connection[Any]) -> None:
        """An index over a function declared immutable that then changes: its entries no longer match the rows."""
        conn.execute("CREATE FUNCTION flip(x bigint) RETURNS bigint IMMUTABLE LANGUAGE sql AS 'SELECT x'")
        conn.execute("CREATE INDEX lying ON messages (flip(id))")
        conn.execute("CREATE OR REPLACE FUNCTION flip(x bigint) RETURNS bigint IMMUTABLE LANGUAGE sql AS 'SELECT -x'")

    store.write(lying_index)
    code, found = doctor(capsys, store.url, tmp_path / "state")

    assert code == 1 and bad(found) == ["integrity"], found
    assert found["integrity"]["detail"].startswith("index lying: heap tuple")
    assert found["integrity"]["fix"] == "REINDEX INDEX CONCURRENTLY lossless.lying"


def refused_url(postgres_database: fixtures.Database, *, user: str = "lossless", socket_dir: str | None = None) -> str:
    """The test database's URL with a user and a fake password, on the server's socket or on ``socket_dir``."""
    url = postgres_database.url.replace("postgresql://postgres@", f"postgresql://{user}:{SECRET}@")
    if socket_dir is not None:
        host = url.split("host=", 1)[1].split("&", 1)[0]
        url = url.replace(host, socket_dir)
    return url


def test_an_unreachable_server_is_one_bad_finding_without_traceback_or_password(
    postgres_database: fixtures.Database, home: Path, tmp_path: Path
) -> None:
    nothing = tmp_path / "no-server"  # a socket directory no server listens in: a stopped server looks so
    nothing.mkdir()
    url = refused_url(postgres_database, socket_dir=str(nothing))
    runs = {
        "environment": ([], {"LOSSLESS_DATABASE_URL": url}),
        "flag": (["--database-url", url], {}),
    }
    for how, (flags, env) in runs.items():
        done = subprocess.run(
            [sys.executable, "-m", "openclaw_lossless", "doctor", "--state-dir", str(tmp_path / "state"), *flags],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 1, how
        assert "Traceback" not in done.stderr and SECRET not in done.stdout + done.stderr, how
        store_lines = [line for line in done.stdout.splitlines() if line.startswith("BAD  ")]
        assert len(store_lines) == 1, done.stdout
        shown = url.replace(SECRET, "***")
        assert store_lines[0].startswith(f"BAD  database: cannot connect to the PostgreSQL store at {shown}: "), how
        assert f'"{nothing}/.s.PGSQL.5432" failed: No such file or directory' in store_lines[0]
        assert "fix: the server is unreachable: check LOSSLESS_DATABASE_URL" in done.stdout


@pytest.mark.parametrize(
    ("user", "database", "code"),
    [("ghost", None, "database_login_refused"), ("postgres", "no_such_db", "database_missing")],
)
def test_a_refused_login_or_a_missing_database_says_which(
    capsys: pytest.CaptureFixture[str],
    postgres_database: fixtures.Database,
    home: Path,
    tmp_path: Path,
    user: str,
    database: str | None,
    code: str,
) -> None:
    url = refused_url(postgres_database, user=user)
    if database is not None:
        url = url.replace(f"/{postgres_database.name}?", f"/{database}?")

    exit_code, found = doctor(capsys, url, tmp_path / "state")

    assert exit_code == 1 and bad(found) == ["database"], found
    assert found["database"]["code"] == code and SECRET not in json.dumps(found)
    assert found["binding"]["detail"].endswith("the server was not reached")
    if database is not None:
        assert found["database"]["fix"].startswith("create it (CREATE DATABASE no_such_db")


def fingerprint(url: str) -> dict[str, Any]:
    """Every row of every table of the store, its relations and the database's extensions."""
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [str(r[0]) for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (SCHEMA,))]
        rows = {
            table: conn.execute(
                sql.SQL("SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) FROM {} t").format(
                    sql.Identifier(SCHEMA, table)
                )
            ).fetchone()
            for table in sorted(tables)
        }
        relations = conn.execute(
            "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s ORDER BY 1",
            (SCHEMA,),
        ).fetchall()
        extensions = conn.execute("SELECT extname, extversion FROM pg_extension ORDER BY 1").fetchall()
    return {"rows": rows, "relations": relations, "extensions": extensions}


@pytest.fixture
def reader(postgres_database: fixtures.Database, store: Database) -> Iterator[str]:
    """The URL of a role that may read the store and nothing more (no write, no CREATE, not a superuser)."""
    role = "doctor_reader"
    with psycopg.connect(postgres_database.url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT USAGE ON SCHEMA lossless TO {}").format(sql.Identifier(role)))
        admin.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA lossless TO {}").format(sql.Identifier(role)))
    yield postgres_database.url.replace("postgresql://postgres@", f"postgresql://{role}@")
    with psycopg.connect(postgres_database.url, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_doctor_writes_nothing_and_needs_no_more_than_reading(
    capsys: pytest.CaptureFixture[str], store: Database, reader: str, home: Path, tmp_path: Path
) -> None:
    before = fingerprint(store.url)

    code, as_owner = doctor(capsys, store.url, tmp_path / "state")
    reader_code, as_reader = doctor(capsys, reader, tmp_path / "state")

    assert code == 0 and reader_code == 0, (as_owner, as_reader)
    assert fingerprint(store.url) == before
    assert {c: as_reader[c]["code"] for c in STORE_CHECKS} == {c: as_owner[c]["code"] for c in STORE_CHECKS}
    assert "as doctor_reader, in a read-only session" in as_reader["database"]["detail"]


def test_a_database_without_pgvector_says_who_may_create_it(
    capsys: pytest.CaptureFixture[str], postgres_database: fixtures.Database, home: Path, tmp_path: Path
) -> None:
    role = "doctor_plain"
    with psycopg.connect(postgres_database.url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        url = postgres_database.url.replace("postgresql://postgres@", f"postgresql://{role}@")
        code, found = doctor(capsys, url, tmp_path / "state")
        as_superuser = doctor(capsys, postgres_database.url, tmp_path / "state")[1]
    finally:
        with psycopg.connect(postgres_database.url, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))

    assert code == 0 and found["schema"]["code"] == "schema_not_migrated", found  # nothing to check yet: a note
    binding = found["binding"]
    assert binding["code"] == "extension_not_created" and "vector, unaccent not created" in binding["detail"]
    assert binding["fix"].endswith("CREATE EXTENSION vector; CREATE EXTENSION unaccent")
    assert as_superuser["binding"]["code"] == "binding_ok" and as_superuser["binding"]["fix"] is None
    assert list(as_superuser)[:6] == ["binding", "embedder", "permissions", "disk", "database", "schema"]


@pytest.mark.parametrize("where", ["user part", "parameter"])
def test_a_password_the_server_took_is_never_shown(
    capsys: pytest.CaptureFixture[str], store: Database, home: Path, tmp_path: Path, where: str
) -> None:
    """The test server trusts its socket, so it takes any password: the run succeeds with one in the URL."""
    if where == "user part":
        url = store.url.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@")
    else:
        url = f"{store.url}&password={SECRET}"

    code, found = doctor(capsys, url, tmp_path / "state")

    assert code == 0 and found["database"]["code"] == "database_reached", found
    assert SECRET not in json.dumps(found)
    shown = found["database"]["data"]["url"]
    assert shown == url.replace(SECRET, "***") and shown in found["database"]["detail"]


def test_a_lock_held_on_the_store_is_reported_not_waited_for(
    capsys: pytest.CaptureFixture[str], store: Database, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("openclaw_lossless.doctor.postgres.LOCK_TIMEOUT", "1s")
    with psycopg.connect(store.url) as holder:  # what VACUUM FULL or a migration's ALTER TABLE holds
        holder.execute("LOCK TABLE lossless.messages IN ACCESS EXCLUSIVE MODE")
        code, found = doctor(capsys, store.url, tmp_path / "state")

    assert code == 1 and bad(found) == ["integrity"], found
    assert found["integrity"]["code"] == "integrity_locked" and "pg_stat_activity" in found["integrity"]["fix"]
    assert "fts" not in found, "each check after it would wait for the same lock"
    assert found["database"]["code"] == "database_reached"


@pytest.fixture
def password_server(postgres_server: PostgresServer) -> Iterator[PostgresServer]:
    """A server of its own that asks for a password (scram-sha-256), where the test server trusts its socket.

    It asks for ``postgres_server`` first so that, where no server can be had, this test is skipped (or fails
    under CI) as the others are."""
    server = PostgresServer()
    server.start()
    try:
        with psycopg.connect(server.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("ALTER ROLE postgres PASSWORD {}").format(sql.Literal(RIGHT_PASSWORD)))
            (server.data_dir / "pg_hba.conf").write_text("local all all scram-sha-256\n")
            admin.execute("SELECT pg_reload_conf()")
        yield server
    finally:
        server.stop()
        server.remove()


def test_a_wrong_password_is_one_bad_finding_and_the_right_one_is_never_shown(
    capsys: pytest.CaptureFixture[str], password_server: PostgresServer, home: Path, tmp_path: Path
) -> None:
    url = password_server.url().replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@")

    code, found = doctor(capsys, url, tmp_path / "state")

    assert code == 1 and bad(found) == ["database"], found
    assert found["database"]["code"] == "database_login_refused" and SECRET not in json.dumps(found)
    assert 'password authentication failed for user "postgres"' in found["database"]["detail"]
    assert "PGPASSWORD" in found["database"]["fix"]
    right = url.replace(SECRET, RIGHT_PASSWORD)
    code, found = doctor(capsys, right, tmp_path / "state")
    assert code == 0 and found["database"]["code"] == "database_reached", found
    assert RIGHT_PASSWORD not in json.dumps(found) and "postgres:***@" in found["database"]["detail"]


def test_without_the_driver_a_url_is_one_finding_naming_the_extra(
    capsys: pytest.CaptureFixture[str], home: Path, tmp_path: Path
) -> None:
    url = f"postgresql://lossless:{SECRET}@db.invalid/lossless"
    with mock.patch.dict(sys.modules):  # every module as it was afterwards, before the fixtures' teardown
        sys.modules["psycopg"] = None  # type: ignore[assignment] # what an install without the 'postgres' extra has
        sys.modules.pop("openclaw_lossless.doctor.postgres", None)
        code, found = doctor(capsys, url, tmp_path / "state")

    assert code == 1 and bad(found) == ["binding"], found
    assert found["binding"]["code"] == "driver_missing"
    assert found["binding"]["fix"].startswith("pip install 'openclaw-lossless[postgres]'")
    assert SECRET not in json.dumps(found) and "disk" in found
