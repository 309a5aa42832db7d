"""What history import and catch-up ask the store, on PostgreSQL: the same store built on SQLite and on
PostgreSQL answers every question alike (what a session holds, the import's marks, compactions recorded by
the hook or the import), and a compaction the import recorded is claimed by one hook only, also when two
sidecars' hooks claim it at the same moment."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from openclaw_lossless.store.model.messages import turn_identities
from openclaw_lossless.store.model.snapshots import COMPACTED, Compaction, CompactionRecord
from openclaw_lossless.store.postgres import messages, meta, sessions, transcript_ledger
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.sqlite import messages as sqlite_messages
from openclaw_lossless.store.sqlite import meta as sqlite_meta
from openclaw_lossless.store.sqlite import migrations as sqlite_migrations
from openclaw_lossless.store.sqlite import sessions as sqlite_sessions
from openclaw_lossless.store.sqlite import transcript_ledger as sqlite_ledger
from openclaw_lossless.store.sqlite.connection import Database as SqliteDatabase
from tests.postgres.backend.test_messages import MAY_8_2023, commit, said

IMPORTED = "imported from the transcript"
SUMMARY = "We talked about herons."
TURNS = [  # (session, key, [(text, created_at)]): the third turn arrived out of order (older times, later ids)
    ("s1", "k1", [("first", MAY_8_2023), ("second", MAY_8_2023 + 60)]),
    ("s2", "k2", [("elsewhere", MAY_8_2023 + 30)]),
    ("s1", "k3", [("late one", MAY_8_2023 + 10), ("late two", MAY_8_2023 + 20)]),
]
CREATED = {"s1": 1_000.0, "s2": 2_000.0, "s3": 500.0}  # s3 (agent ops) never held a message
MARKS = ["skipped.s1.a", "skipped.s1.b", "skipped.s10.c", "skipped.s1.a", "skipped.s1", "skipped.s1/x"]


@dataclass
class Backend:
    """One backend's store, modules and parameter mark, so one scenario runs on both."""

    db: Any
    sessions: ModuleType
    messages: ModuleType
    transcript_ledger: ModuleType
    meta: ModuleType
    mark: str

    def sql(self, query: str, *args: Any) -> list[Any]:
        def work(conn: Any) -> list[Any]:
            cursor = conn.execute(query.replace("?", self.mark), args)
            return list(cursor.fetchall()) if cursor.description else []

        result: list[Any] = self.db.write(work)
        return result

    def session(self, session_id: str) -> Any:
        key = f"agent:{'ops' if session_id == 's3' else 'main'}:{session_id}"
        return self.db.write(lambda conn: self.sessions.ensure_session(conn, session_id, key))


def build(b: Backend) -> dict[str, int]:
    """The scenario's store: sessions, turns, compactions (imported, failed, inferred) and a snapshot; the
    session row ids by session id."""
    rowids = {sid: b.session(sid).rowid for sid in CREATED}
    for sid, key, said_at in TURNS:
        records = turn_identities([said(text, at=at) for text, at in said_at], key)

        def work(conn: Any, sid: str = sid, key: str = key, records: Any = records) -> Any:
            session = b.sessions.ensure_session(conn, sid, f"agent:main:{sid}")
            return b.messages.commit_turn(conn, session, key, records, heartbeat=False)

        b.db.write(work)
    for sid, at in CREATED.items():
        b.sql("UPDATE sessions SET created_at = ? WHERE session_id = ?", at, sid)
    s1 = rowids["s1"]
    last = b.sql("SELECT max(id) FROM messages WHERE session_rowid = ?", s1)[0][0]
    compaction = (
        "INSERT INTO compactions (session_rowid, recorded_at, tokens_before, tokens_after, compacted,"
        " summary, reason, last_message_id, status) VALUES (?, 0, ?, ?, ?, ?, ?, ?, ?)"
    )
    b.sql(compaction, s1, 900, 100, False, SUMMARY, "timeout", last - 1, "failed")  # the hook's failed attempt
    b.sql(compaction, s1, 1000, 200, True, SUMMARY, IMPORTED, last - 1, COMPACTED)  # the import's record
    b.sql(compaction, s1, None, None, True, None, IMPORTED, last, COMPACTED)  # inferred: no summary
    b.sql("INSERT INTO snapshots (name, session_rowid, last_message_id, created_at, automatic, compaction_id)"
          " VALUES ('pre-compaction-2', ?, ?, 0, ?, 2)", s1, last - 1, True)  # fmt: skip
    b.sql("INSERT INTO meta (key, value) VALUES ('skipped.s1.b', '7')")
    return rowids


def answers(b: Backend) -> dict[str, Any]:
    """Every question ``transcript_ledger`` answers, asked of the scenario's store, with message ids as their texts."""
    rowids = build(b)
    s1, s3 = rowids["s1"], rowids["s3"]
    i, conn = b.transcript_ledger, b.db.reader()
    texts = b.messages.texts(conn, [row[0] for row in b.sql("SELECT id FROM messages")])
    by_key = {
        key: hashed for hashed, key, _ in i.with_window_keys(conn, s1, [k for k, _ in i.keys_and_times(conn, s1)])
    }
    wanted = sorted(by_key)[:2]
    got: dict[str, Any] = {
        "held": i.held_session_ids(conn),
        "first_contact": i.first_contact(conn),
        "holds": [i.holds_content(conn, s1, h) for h in (by_key[wanted[0]], b"\x00" * 32)],
        "holds_elsewhere": i.holds_content(conn, s3, by_key[wanted[0]]),
        "newest": [i.newest_time(conn, s1), i.newest_time(conn, s1, 3), i.newest_time(conn, s3)],
        "keys_and_times": sorted(i.keys_and_times(conn, s1)),
        "with_window_keys": sorted(i.with_window_keys(conn, s1, [*wanted, wanted[0], "no such key"])),
        "with_no_keys": i.with_window_keys(conn, s1, []),
        "live": [
            i.live_compaction(conn, s1, CompactionRecord(1000, 200, True, SUMMARY, "hook")),
            i.live_compaction(conn, s1, CompactionRecord(None, None, True, None, "hook")),
            i.live_compaction(conn, s1, CompactionRecord(1000, 200, True, "another summary", "hook")),
            i.live_compaction(conn, s3, CompactionRecord(None, None, True, None, "hook")),
        ],
    }
    b.db.write(lambda c: i.mark_all(c, MARKS))
    b.db.write(lambda c: i.mark_all(c, []))
    got["marks"] = i.keys_under(b.db.reader(), "skipped.s1.")
    got["kept_value"] = b.meta.get(b.db.reader(), "skipped.s1.b")
    session = b.db.write(lambda c: b.sessions.require_session(c, "s1"))
    claims = [
        CompactionRecord(999, 150, True, SUMMARY, "hook, other tokens"),  # tokensBefore disagrees: not this one
        CompactionRecord(1000, 150, True, SUMMARY, "hook"),
        CompactionRecord(1000, 150, True, SUMMARY, "hook again"),  # claimed already
    ]
    claimed = [b.db.write(lambda c, r=r: i.claim_compaction(c, session, r, IMPORTED)) for r in claims]
    got["claims"] = [
        None if c is None else (c.compaction_id, c.status, c.snapshot, texts[c.last_message_id]) for c in claimed
    ]
    got["after_claims"] = b.sql("SELECT id, reason, tokens_before, tokens_after FROM compactions ORDER BY id")
    return got


def test_import_questions_are_answered_as_on_sqlite(store: Database, tmp_path: Path) -> None:
    lite = SqliteDatabase(tmp_path / "lossless.sqlite")
    try:
        sqlite_migrations.migrate(lite)
        on_sqlite = answers(Backend(lite, sqlite_sessions, sqlite_messages, sqlite_ledger, sqlite_meta, "?"))
    finally:
        lite.close()

    on_postgres = answers(Backend(store, sessions, messages, transcript_ledger, meta, "%s"))

    assert on_postgres == on_sqlite
    # And what they are, so that both being wrong alike fails too.
    assert on_postgres["held"] == {"s1", "s2", "s3"}
    assert on_postgres["first_contact"] == {"main": 1_000.0, "ops": 500.0}
    assert on_postgres["holds"] == [True, False] and on_postgres["holds_elsewhere"] is False
    assert on_postgres["newest"] == [MAY_8_2023 + 20, MAY_8_2023 + 60, None]
    assert len(on_postgres["keys_and_times"]) == 4 and len(on_postgres["with_window_keys"]) == 2
    assert on_postgres["live"] == [2, 3, None, None]
    assert on_postgres["marks"] == ["skipped.s1.a", "skipped.s1.b"] and on_postgres["kept_value"] == "7"
    assert on_postgres["claims"] == [None, (2, COMPACTED, "pre-compaction-2", "late one"), None]
    assert on_postgres["after_claims"][1] == (2, "hook", 1000, 150)


def test_two_hooks_claiming_one_imported_compaction_at_once_claim_it_once(store: Database) -> None:
    commit(store, "k1", [said("first")])
    session = store.write(lambda conn: sessions.require_session(conn, "s1"))
    store.write(lambda conn: conn.execute(
        "INSERT INTO compactions (session_rowid, recorded_at, compacted, summary, reason, status)"
        " VALUES (%s, 0, true, %s, %s, 'compacted')", (session.rowid, SUMMARY, IMPORTED),
    ))  # fmt: skip
    first_claimed, release = threading.Event(), threading.Event()
    results: dict[str, Compaction | None] = {}

    def first(conn: Connection) -> None:
        results["first"] = transcript_ledger.claim_compaction(
            conn, session, CompactionRecord(10, 5, True, SUMMARY, "a"), IMPORTED
        )
        first_claimed.set()
        release.wait(30)  # holds its transaction open until the second hook is waiting on the row

    thread = threading.Thread(target=lambda: store.write(first))
    thread.start()
    assert first_claimed.wait(30)

    def second(conn: Connection) -> None:
        results["second"] = transcript_ledger.claim_compaction(
            conn, session, CompactionRecord(10, 5, True, SUMMARY, "b"), IMPORTED
        )

    waiting = threading.Thread(target=lambda: store.write(second))
    waiting.start()
    while not waiting_on_a_lock(store):
        assert waiting.is_alive(), "the second claim did not wait for the first"
        time.sleep(0.01)
    release.set()
    thread.join(30)
    waiting.join(30)

    assert results["first"] is not None and results["second"] is None
    reasons = store.reader().execute("SELECT reason FROM compactions").fetchall()
    assert reasons == [("a",)]


def waiting_on_a_lock(store: Database) -> bool:
    """Whether some backend of this database waits for a lock another holds."""
    row = (
        store.reader()
        .execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        .fetchone()
    )
    return row is not None and int(row[0]) > 0
