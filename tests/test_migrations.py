"""The migrated schema, pinned; migrations that are idempotent and refuse a newer database; private files."""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.capture.records import CaptureOptions, capture
from openclaw_lossless.capture.redact import Redactor
from openclaw_lossless.errors import SchemaTooNew
from openclaw_lossless.salvage import salvage
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.model.archive import write_archive
from openclaw_lossless.store.sqlite import migrations
from openclaw_lossless.store.sqlite.connection import Database, open_connection
from openclaw_lossless.store.sqlite.messages import insert_records, insert_row
from openclaw_lossless.store.sqlite.migrations import MIGRATIONS, migrate
from openclaw_lossless.store.sqlite.sessions import ensure_session
from openclaw_lossless.store.statements.transfer.export import export_records
from tests.helpers import HashEmbedder, LiveSidecar, db_fingerprint, live_sidecar, make_settings

TABLES = {
    "meta",
    "migrations",
    "sessions",
    "turns",
    "messages",
    "messages_fts",
    "messages_fts_config",
    "messages_fts_data",
    "messages_fts_docsize",
    "messages_fts_idx",
    "embedding_backlog",
    "embedding_cache",
    "compactions",
    "snapshots",
    "subagent_links",
    "archives",
    "forgotten",
    "archived",  # m012: archived messages' identities (their session and content hash)
    "message_days",
    "memory_files",  # m010: the workspace memory files indexed (docs/workspace-memory.md)
    # m009: the vectors' sqlite-vec table and the ordinary tables sqlite-vec keeps it in
    "message_vectors",
    "message_vectors_info",
    "message_vectors_chunks",
    "message_vectors_rowids",
    "message_vectors_vector_chunks00",
    "message_vectors_metadatachunks00",
    "message_vectors_metadatachunks01",
    "sqlite_sequence",
}
OPTIONS = CaptureOptions(redactor=Redactor(()))
VECTOR_TABLE = (
    "CREATE VIRTUAL TABLE message_vectors USING vec0(message_id INTEGER PRIMARY KEY,"
    " embedding int8[384] distance_metric=cosine, session_rowid INTEGER, scale FLOAT)"
)

# (name, type, not null, default, primary-key position) as PRAGMA table_info reports them
COLUMNS: dict[str, list[tuple[Any, ...]]] = {
    "message_days": [
        ("message_id", "INTEGER", 1, None, 1),
        ("first_day", "INTEGER", 1, None, 2),
        ("last_day", "INTEGER", 1, None, 3),
    ],
    "messages": [
        ("id", "INTEGER", 0, None, 1),
        ("session_rowid", "INTEGER", 1, None, 0),
        ("agent_id", "TEXT", 1, None, 0),
        ("turn_rowid", "INTEGER", 0, None, 0),
        ("role", "TEXT", 1, None, 0),
        ("kind", "TEXT", 1, "'message'", 0),
        ("created_at", "REAL", 1, None, 0),
        ("stored_at", "REAL", 1, None, 0),
        ("text", "TEXT", 1, None, 0),
        ("original", "TEXT", 1, None, 0),
        ("content_hash", "BLOB", 1, None, 0),
        ("window_key", "TEXT", 1, None, 0),
        ("tokens", "INTEGER", 1, None, 0),
        ("importance", "REAL", 0, None, 0),
        ("importance_label", "TEXT", 0, None, 0),
        ("cites", "INTEGER", 0, None, 0),
        ("grams", "TEXT", 0, None, 0),  # m011: pairs of characters of unspaced text, beside it in the index
    ],
    "sessions": [
        ("id", "INTEGER", 0, None, 1),
        ("session_id", "TEXT", 1, None, 0),
        ("session_key", "TEXT", 0, None, 0),
        ("agent_id", "TEXT", 1, None, 0),
        ("created_at", "REAL", 1, None, 0),
        ("last_seen_at", "REAL", 1, None, 0),
    ],
    "turns": [
        ("id", "INTEGER", 0, None, 1),
        ("advancement_key", "TEXT", 1, None, 0),
        ("session_rowid", "INTEGER", 1, None, 0),
        ("committed_at", "REAL", 1, None, 0),
        ("message_count", "INTEGER", 1, None, 0),
        ("heartbeat", "INTEGER", 1, "0", 0),
    ],
    "compactions": [
        ("id", "INTEGER", 0, None, 1),
        ("session_rowid", "INTEGER", 1, None, 0),
        ("recorded_at", "REAL", 1, None, 0),
        ("tokens_before", "INTEGER", 0, None, 0),
        ("tokens_after", "INTEGER", 0, None, 0),
        ("compacted", "INTEGER", 1, None, 0),
        ("summary", "TEXT", 0, None, 0),
        ("reason", "TEXT", 0, None, 0),
        ("last_message_id", "INTEGER", 0, None, 0),
        ("status", "TEXT", 1, "'compacted'", 0),
    ],
    "snapshots": [
        ("id", "INTEGER", 0, None, 1),
        ("name", "TEXT", 1, None, 0),
        ("session_rowid", "INTEGER", 1, None, 0),
        ("last_message_id", "INTEGER", 0, None, 0),
        ("created_at", "REAL", 1, None, 0),
        ("automatic", "INTEGER", 1, "0", 0),
        ("compaction_id", "INTEGER", 0, None, 0),
    ],
    "subagent_links": [
        ("id", "INTEGER", 0, None, 1),
        ("parent_session_key", "TEXT", 1, None, 0),
        ("child_session_key", "TEXT", 1, None, 0),
        ("context_mode", "TEXT", 0, None, 0),
        ("spawned_at", "REAL", 1, None, 0),
        ("ended_at", "REAL", 0, None, 0),
        ("ended_reason", "TEXT", 0, None, 0),
    ],
    "embedding_cache": [
        ("provider", "TEXT", 1, None, 1),
        ("model", "TEXT", 1, None, 2),
        ("variant", "TEXT", 1, None, 3),
        ("dimension", "INTEGER", 1, None, 4),
        ("text_hash", "BLOB", 1, None, 5),
        ("vector", "BLOB", 1, None, 0),
    ],
    "embedding_backlog": [("message_id", "INTEGER", 0, None, 1)],
    "memory_files": [
        ("agent_id", "TEXT", 1, None, 1),
        ("path", "TEXT", 1, None, 2),
        ("workspace", "TEXT", 1, None, 0),
        ("file_hash", "BLOB", 1, None, 0),
        ("size", "INTEGER", 1, None, 0),
        ("mtime_ns", "INTEGER", 1, None, 0),
        ("chunks", "INTEGER", 1, None, 0),
        ("indexed_at", "REAL", 1, None, 0),
    ],
    "archives": [
        ("id", "INTEGER", 0, None, 1),
        ("path", "TEXT", 1, None, 0),
        ("created_at", "REAL", 1, None, 0),
        ("first_message_id", "INTEGER", 1, None, 0),
        ("last_message_id", "INTEGER", 1, None, 0),
        ("message_count", "INTEGER", 1, None, 0),
    ],
    "forgotten": [
        ("id", "INTEGER", 0, None, 1),
        ("session_id", "TEXT", 1, None, 0),
        ("content_hash", "BLOB", 1, None, 0),
        ("window_key", "TEXT", 0, None, 0),
        ("message_id", "INTEGER", 0, None, 0),
        ("forgotten_at", "REAL", 1, None, 0),
    ],
    "archived": [
        ("session_rowid", "INTEGER", 1, None, 1),
        ("content_hash", "BLOB", 1, None, 2),
        ("message_id", "INTEGER", 1, None, 0),
    ],
    "meta": [("key", "TEXT", 0, None, 1), ("value", "TEXT", 1, None, 0)],
    "migrations": [("name", "TEXT", 0, None, 1), ("applied_at", "REAL", 1, None, 0)],
}
INDEXES_AND_TRIGGERS = {
    "compactions_by_session",
    "forgotten_by_window",
    "messages_by_agent",
    "messages_by_session",
    "messages_scope",
    "messages_fts_delete",
    "messages_fts_insert",
    "message_days_delete",
    "sessions_by_agent",
    "sessions_by_key",
    "snapshots_by_session",
    "subagent_links_by_parent",
    "turns_by_session",
}


def _migrated(path: Path) -> list[str]:
    db = Database(path)
    try:
        return migrate(db)
    finally:
        db.close()


def _schema(path: Path) -> list[tuple[Any, ...]]:
    conn = open_connection(path, readonly=True)
    try:
        return list(conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name"))
    finally:
        conn.close()


def _rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    conn = open_connection(path, readonly=True)
    try:
        return [tuple(row) for row in conn.execute(sql)]
    finally:
        conn.close()


def test_fresh_database_gets_every_migration(tmp_path: Path) -> None:
    assert _migrated(tmp_path / "db.sqlite") == [fn.__name__ for fn in MIGRATIONS]
    names = [row[0] for row in _rows(tmp_path / "db.sqlite", "SELECT name FROM migrations ORDER BY name")]
    assert names == sorted(fn.__name__ for fn in MIGRATIONS)


def test_migrated_schema_is_pinned(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    _migrated(path)
    tables = {row[0] for row in _rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == TABLES
    for table, columns in COLUMNS.items():
        info = [tuple(row[1:]) for row in _rows(path, f"PRAGMA table_info({table})")]
        assert info == columns, table
    others = _rows(path, "SELECT name FROM sqlite_master WHERE type IN ('index', 'trigger') AND sql IS NOT NULL")
    assert {row[0] for row in others} == INDEXES_AND_TRIGGERS
    # the date words: a virtual generated column (hidden = 2), computed on read, nothing stored per row
    generated = [row[1:] for row in _rows(path, "PRAGMA table_xinfo(messages)") if row[-1] != 0]
    assert generated == [("date_terms", "TEXT", 0, None, 0, 2)]
    fts = _rows(path, "SELECT sql FROM sqlite_master WHERE name = 'messages_fts'")[0][0]
    assert "text, date_terms, grams, content='messages', content_rowid='id'" in fts
    assert _rows(path, "SELECT sql FROM sqlite_master WHERE name = 'message_vectors'")[0][0] == VECTOR_TABLE


def test_messages_are_unique_per_session_by_content(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    _migrated(path)
    indexes = _rows(path, "PRAGMA index_list(messages)")
    unique = [row[1] for row in indexes if row[2] == 1]
    columns = [[c[2] for c in _rows(path, f"PRAGMA index_info('{name}')")] for name in unique]
    assert ["session_rowid", "content_hash"] in columns


@pytest.mark.sqlite_only  # SQLite's schema (sqlite_master); PostgreSQL's: tests/postgres/backend/test_migrations.py
def test_a_running_sidecar_adds_no_table(sidecar: LiveSidecar) -> None:
    """The vector table is the migrations' (m009): a provider of another dimension only recreates it."""
    path = sidecar.settings.database_path
    tables = {row[0] for row in _rows(path, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == TABLES
    assert "int8[64]" in _rows(path, "SELECT sql FROM sqlite_master WHERE name = 'message_vectors'")[0][0]


@pytest.mark.sqlite_only  # SQLite's migrations run on the file; PostgreSQL's: tests/postgres/backend/test_migrations.py
def test_migrating_twice_changes_nothing(sidecar: LiveSidecar) -> None:
    messages = [{"role": "user", "content": "keep me", "timestamp": 1}, {"role": "assistant", "content": "kept"}]
    sidecar.post("commit-turn", {"sessionId": "s1", "advancementKey": "t1", "messages": messages})
    sidecar.wait_for_backlog()  # the worker taking the turn off the backlog is not what this test is about
    path = sidecar.settings.database_path
    schema, data = _schema(path), db_fingerprint(path)
    applied = _rows(path, "SELECT name, applied_at FROM migrations")
    assert migrate(sidecar.sidecar.db) == []
    assert migrate(sidecar.sidecar.db) == []
    assert _schema(path) == schema
    assert db_fingerprint(path) == data
    assert _rows(path, "SELECT name, applied_at FROM migrations") == applied


def _v1_database(path: Path, texts: list[tuple[str, float]]) -> None:
    """A database as the first release left it: only m001 applied, messages written through its triggers."""
    db = Database(path)
    try:
        db.write(migrations._applied_names)
        db.write(functools.partial(migrations._apply, fn=migrations.m001_initial))

        def fill(conn: Any) -> None:
            conn.execute(
                "INSERT INTO sessions (id, session_id, agent_id, created_at, last_seen_at)"
                " VALUES (1, 's', 'main', 1, 1)"
            )
            for number, (text, created_at) in enumerate(texts, 1):
                conn.execute(
                    "INSERT INTO messages (session_rowid, agent_id, role, created_at, stored_at, text, original,"
                    " content_hash, window_key, tokens) VALUES (1, 'main', 'user', ?, ?, ?, '{}', ?, ?, 3)",
                    (created_at, created_at, text, f"h{number}".encode(), f"k{number}"),
                )

        db.write(fill)
    finally:
        db.close()


def _fts(path: Path, words: str) -> list[int]:
    return [row[0] for row in _rows(path, f"SELECT rowid FROM messages_fts WHERE messages_fts MATCH '{words}'")]


def test_a_first_release_database_is_upgraded_in_place(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    texts = [("we planted tomatoes", 1667952000.0), ("the roof leaks again", 1683504000.0)]  # 9 Nov 2022, 8 May 2023
    _v1_database(path, texts)
    before = db_fingerprint(path)
    assert _fts(path, "tomatoes") == [1]

    assert _migrated(path) == [fn.__name__ for fn in MIGRATIONS[1:]]

    after = db_fingerprint(path)
    assert after["messages"] == before["messages"]  # every message kept, byte for byte
    # m008 leaves the old messages' days to the server's backfill, m011 their keyword pairs; each records
    # where it starts (meta)
    counts = {"migrations": len(MIGRATIONS), "forgotten": 0, "archived": 0, "message_days": 0, "memory_files": 0}
    counts["meta"] = before["counts"]["meta"] + 2
    assert after["counts"] == before["counts"] | counts
    assert _rows(path, "SELECT id, date_terms FROM messages ORDER BY id") == [(1, "9 November 2022"), (2, "8 May 2023")]
    assert _fts(path, "tomatoes") == [1]  # the old text is still indexed...
    assert _fts(path, '"november" AND "2022"') == [1]  # ...and now its date too
    assert _fts(path, '"8" AND "may"') == [2]
    plan = " ".join(
        str(row[-1])
        for row in _rows(path, "EXPLAIN QUERY PLAN SELECT id FROM messages WHERE session_rowid = 1 AND id < 9")
    )
    assert "messages_by_session" in plan
    assert _rows(path, "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'roof'") == [(1,)]


def test_messages_written_after_the_upgrade_and_a_rebuild_keep_their_dates(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    _v1_database(path, [("old news", 1667952000.0)])
    _migrated(path)
    conn = open_connection(path)
    try:
        conn.execute(
            "INSERT INTO messages (session_rowid, agent_id, role, created_at, stored_at, text, original,"
            " content_hash, window_key, tokens)"
            " VALUES (1, 'main', 'user', 1700000000, 1, 'fresh news', '{}', 'x', 'y', 3)"
        )
        conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")
    finally:
        conn.close()
    assert _fts(path, '"14" AND "november" AND "2023"') == [2]
    assert _fts(path, "news") == [1, 2]


def test_cached_vectors_are_keyed_by_their_size_after_the_upgrade(tmp_path: Path) -> None:
    """An m002-era cache knew no dimension: its API vectors are kept under the size they have, so a changed
    EMBEDDING_DIMENSIONS no longer finds them, and the rows of unknown providers (test fakes) are dropped."""
    path = tmp_path / "db.sqlite"
    _v1_database(path, [("old news", 1667952000.0)])
    db = Database(path)
    try:
        db.write(functools.partial(migrations._apply, fn=migrations.m002_date_terms))
        db.write(
            lambda conn: conn.executemany(
                "INSERT INTO embedding_cache (provider, model, text_hash, vector) VALUES (?, ?, ?, ?)",
                [
                    ("openai-compatible", "text-embedding-3-small", b"h64", bytes(64 * 4)),
                    ("openai-compatible", "text-embedding-3-small", b"h32", bytes(32 * 4)),
                    ("test-hash", "hash-words", b"h64", bytes(64 * 4)),
                ],
            )
        )
    finally:
        db.close()

    assert _migrated(path) == [fn.__name__ for fn in MIGRATIONS[2:]]

    rows = _rows(path, "SELECT provider, model, variant, dimension, text_hash FROM embedding_cache ORDER BY dimension")
    assert rows == [
        ("openai-compatible", "text-embedding-3-small", "api", 32, b"h32"),
        ("openai-compatible", "text-embedding-3-small", "api", 64, b"h64"),
    ]


def test_compactions_recorded_before_their_status_keep_what_they_knew(tmp_path: Path) -> None:
    """Before m006 a row said only whether the host compacted: one that did stays ``compacted``; one that did
    not (a failure or nothing to compact, which the plugin did not tell apart) becomes ``not-compacted``."""
    path = tmp_path / "db.sqlite"
    _v1_database(path, [("old news", 1667952000.0)])
    status_at = MIGRATIONS.index(migrations.m006_compaction_status)
    db = Database(path)
    try:
        for fn in MIGRATIONS[1:status_at]:
            db.write(functools.partial(migrations._apply, fn=fn))
        db.write(
            lambda conn: conn.executemany(
                "INSERT INTO compactions (session_rowid, recorded_at, compacted, reason) VALUES (1, ?, ?, ?)",
                [(1.0, 1, None), (2.0, 0, "provider error")],
            )
        )
    finally:
        db.close()

    assert _migrated(path) == [fn.__name__ for fn in MIGRATIONS[status_at:]]

    rows = _rows(path, "SELECT id, compacted, status, reason FROM compactions ORDER BY id")
    assert rows == [(1, 1, "compacted", None), (2, 0, "not-compacted", "provider error")]


def test_a_compaction_stored_before_its_status_is_salvaged_with_it(tmp_path: Path) -> None:
    """ADD COLUMN leaves old rows one value short on disk (SQLite supplies the default when it reads them);
    salvage reads the disk, and must still take such a row, with the default, not drop it as damaged."""
    path = tmp_path / "db.sqlite"
    _v1_database(path, [("old news", 1667952000.0)])
    status_at = MIGRATIONS.index(migrations.m006_compaction_status)
    db = Database(path)
    try:
        for fn in MIGRATIONS[1:status_at]:
            db.write(functools.partial(migrations._apply, fn=fn))
        db.write(
            lambda conn: conn.execute(
                "INSERT INTO compactions (session_rowid, recorded_at, compacted, summary) VALUES (1, 5, 1, 'S')"
            )
        )
    finally:
        db.close()
    _migrated(path)

    out = tmp_path / "salvaged.sqlite"
    report = salvage(path, out)

    assert _rows(out, "SELECT id, compacted, status, summary FROM compactions") == [(1, 1, "compacted", "S")]
    assert report["unreadableRows"] == 0


def _record_future_migration(path: Path, name: str) -> None:
    conn = open_connection(path)
    try:
        conn.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, 1)", (name,))
    finally:
        conn.close()


def test_database_from_a_newer_version_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    db = Database(path)
    migrate(db)
    db.write(
        lambda conn: conn.execute(
            "INSERT INTO sessions (session_id, agent_id, created_at, last_seen_at) VALUES ('s', 'main', 1, 1)"
        )
    )
    db.close()
    _record_future_migration(path, "m999_from_the_future")
    schema, data = _schema(path), db_fingerprint(path)

    db = Database(path)
    try:
        with pytest.raises(SchemaTooNew, match="m999_from_the_future") as raised:
            migrate(db)
    finally:
        db.close()
    assert raised.value.status == 500
    assert raised.value.code == "schema_too_new"
    assert _schema(path) == schema
    assert db_fingerprint(path) == data


def test_unknown_migration_stops_even_the_first_migration(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    _record_future_migration(path, "m002_zz_unknown")
    schema = _schema(path)
    db = Database(path)
    try:
        with pytest.raises(SchemaTooNew, match="m002_zz_unknown"):
            migrate(db)
    finally:
        db.close()
    assert _schema(path) == schema
    assert _rows(path, "SELECT name FROM migrations") == [("m002_zz_unknown",)]


@pytest.mark.sqlite_only  # a SQLite file's migrations table; PostgreSQL's: tests/postgres/backend/
def test_sidecar_refuses_to_start_on_a_newer_database(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    _migrated(settings.database_path)
    _record_future_migration(settings.database_path, "m500_newer")
    schema = _schema(settings.database_path)
    with pytest.raises(SchemaTooNew, match="m500_newer"):
        Sidecar(settings, start_worker=False, provider=HashEmbedder())
    assert _schema(settings.database_path) == schema


# -- file permissions -----------------------------------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _assert_private(state_dir: Path, db_path: Path, token_path: Path) -> None:
    assert _mode(state_dir) == 0o700
    assert _mode(db_path) == 0o600
    assert _mode(token_path) == 0o600
    for suffix in ("-wal", "-shm"):
        side = Path(f"{db_path}{suffix}")
        if side.exists():
            assert _mode(side) == 0o600, suffix


def test_state_is_private_after_start(sidecar: LiveSidecar) -> None:
    settings = sidecar.settings
    sidecar.post("commit-turn", {"sessionId": "s1", "advancementKey": "t1", "messages": [{"role": "user"}]})
    if settings.database_url is not None:  # the store is the server's files; the state dir keeps the token
        assert _mode(settings.state_dir) == 0o700 and _mode(settings.token_path) == 0o600
        return
    _assert_private(settings.state_dir, settings.database_path, settings.token_path)


@pytest.mark.sqlite_only  # the SQLite file's own mode (state dir and token: test_security.py)
def test_loose_permissions_are_tightened_on_start(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    settings.state_dir.mkdir(mode=0o755)
    os.chmod(settings.state_dir, 0o755)
    _migrated(settings.database_path)
    os.chmod(settings.database_path, 0o644)
    settings.token_path.write_text("an-old-but-long-enough-token\n")
    os.chmod(settings.token_path, 0o644)
    os.chmod(settings.state_dir, 0o755)
    with live_sidecar(settings, HashEmbedder()) as sidecar:
        assert sidecar.token == "an-old-but-long-enough-token"  # noqa: S105
        assert sidecar.client.get("/stats").status_code == 200
        _assert_private(settings.state_dir, settings.database_path, settings.token_path)


def test_messages_archived_before_the_upgrade_are_not_stored_again_after_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """m012 reads the archives the release before wrote: their messages' identities are kept, so a catch-up or a
    replay after the upgrade skips them; an archive that is gone is logged and the upgrade goes on."""
    path = tmp_path / "db.sqlite"
    said = [
        capture({"role": "user", "content": f"note {n}", "timestamp": 1_700_000_000_000 + n}, OPTIONS) for n in range(4)
    ]
    db = Database(path)
    try:
        db.write(migrations._applied_names)
        for fn in MIGRATIONS[: MIGRATIONS.index(migrations.m012_archived_identities)]:  # the release before
            db.write(functools.partial(migrations._apply, fn=fn))

        def release(conn: Any) -> None:
            session = ensure_session(conn, "s", "agent:main:s")
            for record in said[:3]:
                insert_row(conn, session, record, stored_at=1.0)

        db.write(release)
        written, _ = write_archive(tmp_path / "archive", 2, export_records(db.reader(), "m.id <= ?", (2,)), None)

        def archived_as_the_release_did(conn: Any) -> None:
            conn.execute("DELETE FROM messages WHERE id <= 2")
            for archive in (written, tmp_path / "archive" / "gone.jsonl.gz"):
                conn.execute(
                    "INSERT INTO archives (path, created_at, first_message_id, last_message_id, message_count)"
                    " VALUES (?, 1, 1, 2, 2)",
                    (str(archive),),
                )

        db.write(archived_as_the_release_did)
        with caplog.at_level("WARNING"):
            assert migrate(db) == ["m012_archived_identities"]
        assert "gone.jsonl.gz not read" in caplog.text

        def again(conn: Any) -> list[int]:
            return insert_records(conn, ensure_session(conn, "s", "agent:main:s"), said)

        assert db.write(again) == [4]  # notes 0 and 1 are in the archive, note 2 is stored: only note 3 is new
        assert _rows(path, "SELECT count(*) FROM archived") == [(2,)]
    finally:
        db.close()
