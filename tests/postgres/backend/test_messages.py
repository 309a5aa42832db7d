"""Turns and messages on PostgreSQL: a turn's advancement key is committed once across sidecars writing at the
same moment, a replay writes nothing, and what was committed is read back as it was sent."""

from __future__ import annotations

import dataclasses
import random
import sqlite3
import string
import threading
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.capture.records import CaptureOptions, MessageRecord, capture
from openclaw_lossless.capture.redact import Redactor
from openclaw_lossless.store.model.messages import turn_identities
from openclaw_lossless.store.postgres import backlog, message_days, messages, sessions
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.sqlite import messages as sqlite_messages
from openclaw_lossless.store.sqlite import migrations as sqlite_migrations
from openclaw_lossless.store.sqlite import sessions as sqlite_sessions
from openclaw_lossless.store.sqlite.connection import Database as SqliteDatabase
from openclaw_lossless.store.sqlite.migrations import DATE_TERMS
from tests.postgres.backend import workers
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.multiprocess import run_together

OPTIONS = CaptureOptions(redactor=Redactor(()))
SIDECARS = 4
KEYS = 50
PER_TURN = 2
MAY_8_2023 = 1_683_504_000.0  # 00:00 UTC


def said(text: str, at: float | None = MAY_8_2023, role: str = "user") -> MessageRecord:
    message = {"role": role, "content": text} | ({} if at is None else {"timestamp": int(at * 1000)})
    return capture(message, OPTIONS)


def commit(db: Database, key: str, records: list[MessageRecord], session_id: str = "s1") -> tuple[str, list[int]]:
    def work(conn: Connection) -> tuple[str, list[int]]:
        session = sessions.ensure_session(conn, session_id, f"agent:main:{session_id}")
        return messages.commit_turn(conn, session, key, turn_identities(records, key), heartbeat=False)

    return db.write(work)


def scalar(db: Database, query: str) -> object:
    row = db.reader().execute(query).fetchone()
    assert row is not None
    return row[0]


def test_four_sidecars_committing_the_same_keys_commit_each_once(place: Place, store: Database) -> None:
    keys = [f"turn-{n}" for n in range(KEYS)]
    reports = run_together(workers.commit_keys, [(place.url, place.schema, keys, PER_TURN)] * SIDECARS)

    errors = [report for report in reports.values() if isinstance(report, str)]
    assert not errors, errors[0]
    for key in keys:
        statuses = Counter(report[key] for report in reports.values())
        assert statuses == {"committed": 1, "duplicate": SIDECARS - 1}, key
    assert scalar(store, "SELECT count(*) FROM turns") == KEYS
    assert messages.count(store.reader()) == KEYS * PER_TURN
    assert scalar(store, "SELECT count(*) FROM sessions") == 1  # four first sights of one session: one row
    assert backlog.size(store.reader()) == KEYS * PER_TURN


def test_a_committed_turn_reads_back_and_its_replay_writes_nothing(store: Database) -> None:
    records = [said("The heron fished at dawn by the mill"), said("Noted: heron, mill, dawn.", role="assistant")]

    status, ids = commit(store, "k1", records)
    replay = commit(store, "k1", records)

    assert status == "committed" and len(ids) == 2
    assert replay == ("duplicate", [])
    found = messages.fetch(store.reader(), [*ids, 999_999])
    assert [found[i].text for i in ids] == ["The heron fished at dawn by the mill", "Noted: heron, mill, dawn."]
    assert [found[i].role for i in ids] == ["user", "assistant"]
    assert found[ids[0]].created_at == MAY_8_2023
    assert messages.count(store.reader()) == 2
    assert [row[0] for row in backlog.oldest(store.reader(), 10)] == ids
    views = messages.recent(store.reader(), found[ids[0]].session_rowid, 10)
    assert [view.original["content"] for view in views] == [r.text for r in records]


def test_a_message_already_in_the_session_is_stored_once_and_undated_repeats_are_not_merged(store: Database) -> None:
    dated = said("I climbed Castle Rock")
    first = commit(store, "k1", [dated, said("yes", at=None)])
    second = commit(store, "k2", [dated, said("yes", at=None)])  # the same dated message re-sent, a new "yes"

    assert first[0] == second[0] == "committed"
    assert len(first[1]) == 2 and len(second[1]) == 1  # the dated copy is known; the second "yes" is its own
    assert messages.texts(store.reader(), second[1]) == {second[1][0]: "yes"}


def test_keyword_index_holds_stems_and_the_date_in_words(store: Database) -> None:
    (_, [heron, other]) = commit(store, "k1", [said("The herons were fishing"), said("nothing", at=1_700_000_000)])

    def matching(query: str) -> list[int]:
        rows = store.reader().execute(
            "SELECT id FROM messages WHERE search @@ to_tsquery('lossless', %s) ORDER BY id", (query,)
        )
        return [int(row[0]) for row in rows]

    assert matching("heron & fished") == [heron]  # stemmed alike on both sides
    assert matching("8 & may & 2023") == [heron]
    assert matching("november") == [other]


@pytest.mark.parametrize("at", [0.0, MAY_8_2023, 1_700_000_000.5, 951_782_400.0, -86_400.0, 32_503_680_000.0])
def test_date_words_are_those_of_the_sqlite_store(at: float) -> None:
    with sqlite3.connect(":memory:") as conn:
        row = conn.execute(f"SELECT {DATE_TERMS} FROM (SELECT ? AS created_at)", (at,)).fetchone()
    assert messages.date_terms(at) == row[0]


def test_the_days_a_message_names_are_kept_with_it(store: Database) -> None:
    (_, [said_on_monday]) = commit(store, "k1", [said("last Saturday I climbed Castle Rock")])

    days = message_days.of(store.reader(), [said_on_monday])

    assert [(span.first, span.last) for span in days[said_on_monday]] == [(date(2023, 5, 6), date(2023, 5, 6))]


def test_a_forgotten_message_is_never_stored_again(store: Database) -> None:
    record = said("my old address")
    commit(store, "k1", [record])
    store.write(
        lambda conn: conn.execute(
            "INSERT INTO forgotten (session_id, content_hash, window_key, forgotten_at) VALUES ('s1', %s, %s, 0)",
            (record.content_hash, record.window_key),
        )
    )
    store.write(lambda conn: conn.execute("DELETE FROM messages"))

    status, ids = commit(store, "k2", [record])

    assert (status, ids) == ("committed", [])
    assert messages.count(store.reader()) == 0


def test_neighbours_and_around_stay_in_the_session(store: Database) -> None:
    (_, ids) = commit(store, "k1", [said(f"first session {n}", at=MAY_8_2023 + n) for n in range(5)])
    commit(store, "k2", [said("another session", at=MAY_8_2023 + 2.5)], session_id="s2")
    conn = store.reader()
    scope = sessions.recall_scope(conn, sessions.require_session(conn, "s1"), "agent")

    found = messages.neighbours(conn, [(ids[2], messages.fetch(conn, [ids[2]])[ids[2]].session_rowid)], 1, scope)
    around = messages.around(conn, ids[2], 1)

    assert sorted(n.message.id for n in found) == [ids[1], ids[3]]
    assert around is not None
    assert [v.id for v in around.before] == [ids[1]] and [v.id for v in around.after] == [ids[3]]


def test_a_huge_message_and_one_holding_nul_are_stored_and_found(store: Database) -> None:
    rng = random.Random(5)
    words = [f"{''.join(rng.choices(string.ascii_lowercase, k=8))}" for _ in range(150_000)]  # ~1.3 M chars
    # Capture cuts a message's text to 20,000 characters; an imported line may carry any length.
    huge = dataclasses.replace(said("imported"), text=" ".join(words))
    nul = said("before\x00after zebra")

    status, ids = commit(store, "k1", [huge, nul])

    assert status == "committed" and len(ids) == 2
    stored = messages.texts(store.reader(), ids)
    assert stored[ids[0]] == huge.text  # stored whole; its first 200,000 characters are keyword-indexed
    assert stored[ids[1]] == "before\ufffdafter zebra"
    rows = store.reader().execute(
        "SELECT id FROM messages WHERE search @@ to_tsquery('lossless', %s) ORDER BY id", (f"{words[0]} | zebra",)
    )
    assert [row[0] for row in rows] == ids


TURNS = [  # a long turn, a turn repeating a message, repeats across turns, a tombstoned message, a replay
    ("k1", [said(f"step {n}", at=MAY_8_2023 + n) for n in range(12)]),
    ("k2", [said("again", at=MAY_8_2023 + 50), said("again", at=MAY_8_2023 + 50), said("yes", at=None)]),
    ("k3", [said("step 3", at=MAY_8_2023 + 3), said("yes", at=None), said("forgotten thing"), said("new")]),
    ("k2", [said("a replay of k2 with other content")]),
]
Outcome = list[tuple[str, list[str], bool]]


def replay_turns(db: Any, backend: Any, mark: str) -> Outcome:
    """Commit ``TURNS`` through one backend's modules (``mark``: its parameter style); what each answered."""
    sessions_of, messages_of = backend
    forgotten = said("forgotten thing")
    db.write(lambda conn: conn.execute(
        f"INSERT INTO forgotten (session_id, content_hash, window_key, forgotten_at) VALUES ('s1', {mark}, {mark}, 0)",
        (forgotten.content_hash, forgotten.window_key),
    ))  # fmt: skip
    outcome: Outcome = []
    for key, records in TURNS:
        identified = turn_identities(records, key)

        def work(conn: Any, key: str = key, identified: list[MessageRecord] = identified) -> Any:
            session = sessions_of.ensure_session(conn, "s1", "agent:main:s1")
            return messages_of.commit_turn(conn, session, key, identified, heartbeat=False)

        status, ids = db.write(work)
        texts = messages_of.texts(db.reader(), ids)
        outcome.append((status, [texts[i] for i in ids], ids == sorted(ids)))
    return outcome


def test_the_same_turns_store_the_same_messages_in_the_same_order_as_on_sqlite(store: Database, tmp_path: Path) -> None:
    lite = SqliteDatabase(tmp_path / "lossless.sqlite")
    try:
        sqlite_migrations.migrate(lite)
        on_sqlite = replay_turns(lite, (sqlite_sessions, sqlite_messages), "?")
    finally:
        lite.close()

    on_postgres = replay_turns(store, (sessions, messages), "%s")

    assert on_postgres == on_sqlite
    assert [len(texts) for _, texts, _ in on_postgres] == [12, 2, 2, 0]


def test_a_lower_id_is_never_visible_after_a_higher_one(store: Database) -> None:
    """A reader that keeps "every id above the last one seen" must not skip a message: while one sidecar's turn
    holds its new ids uncommitted, another sidecar's turn waits, so no higher id becomes visible first."""
    first_inserted, release_first = threading.Event(), threading.Event()
    seen_while_first_open: list[int] = []

    def slow_turn(conn: Connection) -> list[int]:
        session = sessions.ensure_session(conn, "s1", "agent:main:s1")
        ids = messages.insert_records(conn, session, [said("the first sidecar's message")])
        first_inserted.set()
        assert release_first.wait(10)
        return ids

    first = threading.Thread(target=lambda: store.write(slow_turn))
    first.start()
    assert first_inserted.wait(10)
    second = threading.Thread(target=lambda: commit(store, "k-second", [said("the second sidecar's message")], "s2"))
    second.start()
    second.join(1.0)  # it would have committed by now if it did not wait for the first
    seen_while_first_open.extend(int(r[0]) for r in store.reader().execute("SELECT id FROM messages").fetchall())
    release_first.set()
    first.join(10)
    second.join(10)
    assert seen_while_first_open == []
    ids = [int(r[0]) for r in store.reader().execute("SELECT id FROM messages ORDER BY id").fetchall()]
    texts = messages.texts(store.reader(), ids)
    assert [texts[i] for i in ids] == ["the first sidecar's message", "the second sidecar's message"]
