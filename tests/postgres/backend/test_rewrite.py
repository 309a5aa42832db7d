"""``redact --rescan``'s rewrites on PostgreSQL: a rewritten message is found by its new words only, its days,
vector and cached embedding are those of the new text (gone, and queued again), as on SQLite; and once
``optimize_fts`` ran, neither a row version nor the keyword index's pages hold the old words."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from openclaw_lossless.store.postgres import message_days, messages, migrations, rewrite, sessions
from openclaw_lossless.store.postgres.connection import Database
from openclaw_lossless.store.sqlite import message_days as sqlite_days
from openclaw_lossless.store.sqlite import messages as sqlite_messages
from openclaw_lossless.store.sqlite import migrations as sqlite_migrations
from openclaw_lossless.store.sqlite import rewrite as sqlite_rewrite
from openclaw_lossless.store.sqlite import sessions as sqlite_sessions
from openclaw_lossless.store.sqlite import vectors as sqlite_vectors
from openclaw_lossless.store.sqlite.connection import Database as SqliteDatabase
from tests.postgres import conftest as fixtures
from tests.postgres.backend.test_messages import MAY_8_2023, said

SENSITIVE = "On 3 March 2021 my password was hunter2swordfish, keep it"
REDACTED = "On [REDACTED] my password was [REDACTED], keep it"
MODEL = ("local", "m", "int8", 4)
DIMENSION = 384


class Side:
    """One backend: its store, its modules, its parameter mark and how it asks its keyword index."""

    def __init__(self, db: Any, modules: dict[str, Any], mark: str, matching: str) -> None:
        self.db, self.m, self.mark, self.matching = db, modules, mark, matching

    def rows(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        def work(conn: Any) -> list[tuple[Any, ...]]:
            cursor = conn.execute(query.replace("?", self.mark), args)
            return [tuple(row) for row in cursor.fetchall()] if cursor.description else []

        result: list[tuple[Any, ...]] = self.db.write(work)
        return result

    def found(self, word: str) -> list[int]:
        return [int(row[0]) for row in self.rows(self.matching, word)]


def sqlite_side(path: Path) -> Side:
    db = SqliteDatabase(path)
    sqlite_migrations.migrate(db)
    modules = {"sessions": sqlite_sessions, "messages": sqlite_messages, "rewrite": sqlite_rewrite, "days": sqlite_days}
    return Side(db, modules, "?", "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid")


def postgres_side(store: Database) -> Side:
    modules = {"sessions": sessions, "messages": messages, "rewrite": rewrite, "days": message_days}
    return Side(store, modules, "%s", "SELECT id FROM messages WHERE search @@ to_tsquery('lossless', %s) ORDER BY id")


def add_vector(side: Side, message_id: int, session_rowid: int) -> None:
    """A vector for the message, as the embedding worker stores it (SQLite's module; PostgreSQL's column)."""
    if side.mark == "?":
        codes = np.ones((1, DIMENSION), dtype=np.int8)
        side.db.write(
            lambda conn: sqlite_vectors.write(conn, [message_id], codes, np.ones(1, np.float32), [session_rowid])
        )
    else:
        side.rows(
            "INSERT INTO message_vectors (message_id, agent_id, session_rowid, embedding)"
            " VALUES (?, 'main', ?, ?::halfvec)", message_id, session_rowid, str([0.5] * DIMENSION),
        )  # fmt: skip


def rescan(side: Side) -> dict[str, Any]:
    """Store a secret, its embedding and vector, then rewrite it (and a compaction, a link, snapshots) as the
    rescan does; what the store answers then."""
    records = [said(SENSITIVE, at=MAY_8_2023), said("Noted, hunter2 is safe with me.", role="assistant")]

    def commit(conn: Any) -> Any:
        session = side.m["sessions"].ensure_session(conn, "s1", "agent:main:s1")
        return session, side.m["messages"].commit_turn(conn, session, "k1", records, heartbeat=False)[1]

    session, (secret, reply) = side.db.write(commit)
    add_vector(side, secret, session.rowid)
    old_hash = hashlib.sha256(SENSITIVE.encode()).digest()
    side.rows("INSERT INTO embedding_cache (provider, model, variant, dimension, text_hash, vector)"
              " VALUES (?, ?, ?, ?, ?, ?)", *MODEL, old_hash, b"\x00" * 16)  # fmt: skip
    side.rows("DELETE FROM embedding_backlog")  # embedded: nothing waits
    side.rows("INSERT INTO compactions (session_rowid, recorded_at, compacted, summary, reason, status) VALUES"
              " (?, 0, ?, 'the password is hunter2swordfish', 'manual', 'compacted')", session.rowid, True)  # fmt: skip
    side.rows("INSERT INTO subagent_links (parent_session_key, child_session_key, spawned_at, ended_reason)"
              " VALUES ('agent:main:s1', 'agent:main:sub', 0, 'told hunter2swordfish')")  # fmt: skip
    for name in ("hunter2swordfish", "redacted-name"):
        side.rows("INSERT INTO snapshots (name, session_rowid, created_at) VALUES (?, ?, 0)", name, session.rowid)
    days_before = side.m["days"].of(side.db.reader(), [secret])

    redacted = said(REDACTED, at=MAY_8_2023)
    rw = side.m["rewrite"]
    page = side.db.write(lambda conn: rw.message_page(conn, 0, 10))
    row = page[0]

    def rewrite_all(conn: Any) -> None:
        rw.rewrite_message(conn, row[0], old_text=row[3], date_terms=row[6], text=redacted.text,
                           original=redacted.original, content_hash=redacted.content_hash)  # fmt: skip
        rw.set_compaction_text(conn, rw.compaction_page(conn, 0, 10)[0][0], "the password is [REDACTED]", None)
        rw.set_link_reason(conn, rw.link_page(conn, 0, 10)[0][0], "told [REDACTED]")
        snapshots = rw.snapshot_page(conn, 0, 10)
        rw.rename_snapshot(conn, snapshots[0][0], "redacted-name")  # taken: gets -<id>

    side.db.write(rewrite_all)
    conn = side.db.reader()
    return {
        "page": [(r[0] - secret, r[2], r[3], r[4], bytes(r[5]), r[6]) for r in page],
        "page_after": [(r[0] - secret, r[3], bytes(r[5])) for r in side.db.write(lambda c: rw.message_page(c, 0, 10))],
        "old_words": side.found("hunter2swordfish"),
        "new_words": [i - secret for i in side.found("redacted")],
        "reply_kept": side.found("safe") == [reply],
        "days": (len(days_before.get(secret, [])), side.m["days"].of(conn, [secret])),
        "vector": side.rows("SELECT count(*) FROM message_vectors WHERE message_id = ?", secret),
        "cache": side.rows("SELECT count(*) FROM embedding_cache"),
        "backlog": [r[0] - secret for r in side.rows("SELECT message_id FROM embedding_backlog")],
        "identity": [
            side.db.write(lambda c, h=h: rw.identity_taken(c, session.rowid, h))
            for h in (records[0].content_hash, redacted.content_hash)
        ],
        "compactions": side.db.write(lambda c: rw.compaction_page(c, 0, 10)),
        "links": side.db.write(lambda c: rw.link_page(c, 0, 10)),
        "snapshots": side.db.write(lambda c: rw.snapshot_page(c, 0, 10)),
    }


def test_a_rewritten_message_is_found_and_derived_from_its_new_text_only_as_on_sqlite(
    store: Database, tmp_path: Path
) -> None:
    lite = sqlite_side(tmp_path / "lossless.sqlite")
    try:
        on_sqlite = rescan(lite)
    finally:
        lite.db.close()

    on_postgres = rescan(postgres_side(store))

    assert on_postgres == on_sqlite
    assert on_postgres["old_words"] == [] and on_postgres["new_words"] == [0] and on_postgres["reply_kept"]
    assert on_postgres["page_after"][0][1] == REDACTED
    assert on_postgres["days"] == (1, {})  # 3 March 2021 was named; the new text names no day
    assert on_postgres["vector"] == [(0,)] and on_postgres["cache"] == [(0,)] and on_postgres["backlog"] == [0]
    assert on_postgres["identity"] == [False, True]
    assert on_postgres["compactions"] == [(1, "the password is [REDACTED]", None)]
    assert on_postgres["links"] == [(1, "told [REDACTED]")]
    assert on_postgres["snapshots"] == [(1, "redacted-name-1"), (2, "redacted-name")]


def test_the_keyword_entry_and_its_index_hold_only_the_new_words(store: Database) -> None:
    side = postgres_side(store)
    rescan(side)
    conn = store.reader()

    entries = " ".join(str(row[0]) for row in conn.execute("SELECT search FROM messages"))
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL enable_seqscan = off")  # asked of the GIN index, not of the rows
        through_index = conn.execute(
            "SELECT count(*) FROM messages WHERE search @@ to_tsquery('lossless', 'hunter2swordfish')"
        ).fetchone()

    assert "hunter2swordfish" not in entries and "redact" in entries
    assert through_index == (0,)


def test_optimize_fts_refuses_to_run_inside_a_transaction(store: Database) -> None:
    with pytest.raises(RuntimeError, match="writer"):
        store.write(rewrite.optimize_fts)


@pytest.fixture
def inspected(postgres_database: fixtures.Database) -> Iterator[tuple[Database, psycopg.Connection[Any]]]:
    """A store in a database of its own, and a superuser connection to it with ``pageinspect``."""
    db = Database(postgres_database.url, write_pool_size=2, read_pool_size=2)
    try:
        migrations.migrate(db)
        with psycopg.connect(postgres_database.url, autocommit=True) as admin:
            admin.execute("CREATE EXTENSION pageinspect")
            yield db, admin
    finally:
        db.close()


def pages(admin: psycopg.Connection[Any], relation: str) -> list[bytes]:
    """Every page of the relation as the server holds it (what it writes to its files)."""
    rows = admin.execute(
        "SELECT get_raw_page(%s, n) FROM generate_series(0, pg_relation_size(%s) / current_setting('block_size')::int"
        " - 1) n",
        (relation, relation),
    )
    return [bytes(row[0]) for row in rows]


def row_versions(admin: psycopg.Connection[Any], table: str) -> list[bytes]:
    """The data of every row version in the table's pages, live or dead (what ``VACUUM`` has not removed)."""
    return [
        bytes(row[0])
        for page in range(len(pages(admin, table)))
        for row in admin.execute("SELECT t_data FROM heap_page_items(get_raw_page(%s, %s))", (table, page))
        if row[0] is not None
    ]


def test_after_optimize_fts_no_row_version_nor_keyword_index_page_holds_the_old_words(
    inspected: tuple[Database, psycopg.Connection[Any]],
) -> None:
    db, admin = inspected
    rescan(postgres_side(db))
    old = b"hunter2swordfish"
    assert any(old in data for data in row_versions(admin, "lossless.messages"))  # the old version, dead
    assert any(old in page for page in pages(admin, "lossless.messages_search"))  # its words, in the index

    with db.writer() as conn:
        rewrite.optimize_fts(conn)

    assert not any(old in data for data in row_versions(admin, "lossless.messages"))
    for table in ("compactions", "subagent_links", "snapshots"):
        assert not any(old in data for data in row_versions(admin, f"lossless.{table}")), table
    assert not any(old in page for page in pages(admin, "lossless.messages_search"))
    assert db.reader().execute(
        "SELECT count(*) FROM messages WHERE search @@ to_tsquery('lossless', 'redact')"
    ).fetchone() == (1,)
