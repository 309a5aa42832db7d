"""Subagent links and outcomes on PostgreSQL: a spawn, a rollback and an end answer as on SQLite, and a child's
end reported by several sidecars at once copies its outcome into the parent once."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.capture.records import MessageRecord, capture
from openclaw_lossless.store.postgres import messages, sessions, subagents
from openclaw_lossless.store.postgres.connection import Database
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.test_messages import OPTIONS, said
from tests.postgres.backend.test_snapshots import (
    MAIN,
    Backend,
    plain,
    postgres_backend,
    race,
    sidecars,
    sqlite_store,
    together,
)

CHILD = "agent:main:subagent:42"
OTHER_CHILD = "agent:main:subagent:43"
T0 = 1_700_000_000.0
QUESTION = "Find which region hosts the audit bucket."
ANSWER = "The audit bucket lives in eu-north-1."
NOTABLE = "Remember that the audit bucket key rotates every Friday, we decided to keep it that way."


def spoken(role: str, content: Any, at: float) -> MessageRecord:
    return capture({"role": role, "content": content, "timestamp": int(at * 1000)}, OPTIONS)


def tool_call(at: float) -> MessageRecord:
    call = {"type": "toolCall", "id": f"c{at}", "name": "list_buckets", "arguments": {"filter": "audit"}}
    return spoken("assistant", [call], at)


CHILD_TURNS = [
    [
        said(QUESTION, at=T0),
        tool_call(T0 + 1),
        spoken("toolResult", "audit-logs eu-north-1", T0 + 2),
        spoken("assistant", [{"type": "text", "text": ANSWER}], T0 + 3),
    ],
    [said(NOTABLE, at=T0 + 4), tool_call(T0 + 5)],  # the child's last word is a tool call, not its answer
]


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[Backend]:
    with sqlite_store(tmp_path) as backend:
        yield backend


def spawn_child(b: Backend) -> list[Any]:
    """A parent with a history, a child spawned and working; what each step answered."""
    b.commit("p1", "parent-1", [said("Please check the audit bucket", at=T0 - 10)])
    spawned = b.write(lambda c: b.subagents.link(c, MAIN, CHILD, "isolated"))
    b.commit("c1", "child-1", CHILD_TURNS[0], CHILD)
    b.commit("c1", "child-2", CHILD_TURNS[1], CHILD)
    return [spawned]


def story_of_subagents(b: Backend) -> dict[str, Any]:
    """Spawn, roll back another spawn, end twice, end what was never spawned or whose parent is gone, end a
    child that began again after a ``/new``; then what the parent holds."""
    answers: dict[str, Any] = {"spawned": spawn_child(b)}
    other = b.write(lambda c: b.subagents.link(c, MAIN, OTHER_CHILD, None))
    answers["registered at spawn"] = b.read(lambda c: b.sessions.find_session(c, OTHER_CHILD))
    answers["unlinked"] = [
        b.write(lambda c: b.subagents.unlink(c, other, None)),
        b.write(lambda c: b.subagents.unlink(c, other, None)),  # already undone
        b.write(lambda c: b.subagents.unlink(c, None, "agent:main:subagent:never")),
    ]
    answers["gone with its link"] = b.read(lambda c: b.sessions.find_session(c, OTHER_CHILD))
    answers["ended"] = b.write(lambda c: b.subagents.end(c, CHILD, "completed"))
    answers["never spawned"] = b.write(lambda c: b.subagents.end(c, "agent:main:subagent:never", "completed"))
    answers["unlink after end"] = b.write(lambda c: b.subagents.unlink(c, None, CHILD))
    b.write(lambda c: b.subagents.link(c, "agent:main:gone", "agent:main:subagent:9", None))
    answers["a key with a NUL"] = [  # never linked; PostgreSQL cannot compare one, SQLite finds nothing
        b.write(lambda c: b.subagents.end(c, "agent:main:x\x00y", "completed")),
        b.write(lambda c: b.subagents.unlink(c, None, "agent:main:x\x00y")),
    ]
    answers["parent gone"] = b.write(lambda c: b.subagents.end(c, "agent:main:subagent:9", "completed"))
    answers["began again"] = end_a_child_with_two_sessions(b)
    answers["ended again"] = b.write(lambda c: b.subagents.end(c, CHILD, "completed again"))  # copies nothing new
    parent = b.read(lambda c: b.sessions.require_session(c, "p1"))
    answers["parent holds"] = b.read(lambda c: b.messages.recent(c, parent.rowid, 10))
    answers["parent key"] = b.read(lambda c: b.sessions.parent_key(c, CHILD))
    answers["links"] = b.read(
        lambda c: c.execute("SELECT child_session_key, context_mode, ended_reason FROM subagent_links ORDER BY id")
    ).fetchall()
    return answers


def end_a_child_with_two_sessions(b: Backend) -> Any:
    """A child answers, is reset (``/new``, same key) and answers again: its answer is the newer session's."""
    key = "agent:main:subagent:44"
    b.write(lambda c: b.subagents.link(c, MAIN, key, "fork"))
    b.commit("c44-a", "c44-1", [said("first try", at=T0 + 20), spoken("assistant", "An early guess.", T0 + 21)], key)
    b.commit("c44-b", "c44-2", [said("again", at=T0 + 30), spoken("assistant", "The settled answer.", T0 + 31)], key)
    return b.write(lambda c: b.subagents.end(c, key, "completed"))


def test_spawn_rollback_and_end_answer_as_on_sqlite(lite: Backend, store: Database) -> None:
    since = time.time()
    on_sqlite = plain(story_of_subagents(lite), since)
    on_postgres = plain(story_of_subagents(postgres_backend(store)), since)

    assert on_postgres == on_sqlite
    assert on_postgres["registered at spawn"]["session_key"] == OTHER_CHILD
    assert on_postgres["unlinked"] == [True, False, False] and on_postgres["gone with its link"] is None
    assert on_postgres["ended"] == [True, 2]  # the answer and the note
    assert [on_postgres[k] for k in ("never spawned", "unlink after end", "parent gone")] == [
        [False, 0],
        False,
        [True, 0],
    ]
    assert on_postgres["a key with a NUL"] == [[False, 0], False]
    assert on_postgres["began again"] == [True, 1]
    assert on_postgres["ended again"] == [True, 0]
    assert [(m["kind"], m["text"]) for m in on_postgres["parent holds"]] == [
        ("message", "Please check the audit bucket"),
        ("outcome", f"[subagent result] {ANSWER}"),
        ("outcome", f"[subagent result] {NOTABLE}"),
        ("outcome", "[subagent result] The settled answer."),
    ]
    assert on_postgres["links"] == [
        [CHILD, "isolated", "completed again"],
        ["agent:main:subagent:9", None, "completed"],
        ["agent:main:subagent:44", "fork", "completed"],
    ]


def test_an_outcome_is_found_by_its_words_and_its_days_in_the_parent(store: Database) -> None:
    """The copy is a message of the parent like any other: keyword-searchable (date words included) and queued
    for a vector, in the transaction that ended the child."""
    b = postgres_backend(store)
    spawn_child(b)
    linked, copied = store.write(lambda c: subagents.end(c, CHILD, "completed"))

    conn = store.reader()
    rows = conn.execute(
        "SELECT id, cites FROM messages WHERE kind = 'outcome'"
        " AND search @@ to_tsquery('lossless', 'rotates & friday & november')"
    ).fetchall()
    assert (linked, copied) == (True, 2)
    assert len(rows) == 1  # T0 + 4 is 14 November 2023 (UTC)
    cited = messages.fetch(conn, [int(rows[0][1])])
    assert [m.text for m in cited.values()] == [NOTABLE]
    queued = {int(r[0]) for r in conn.execute("SELECT message_id FROM embedding_backlog").fetchall()}
    assert int(rows[0][0]) in queued


def test_a_forgotten_outcome_is_not_copied_again(store: Database) -> None:
    b = postgres_backend(store)
    spawn_child(b)
    store.write(lambda c: subagents.end(c, CHILD, "completed"))
    store.write(
        lambda c: c.execute(
            "WITH gone AS (DELETE FROM messages WHERE kind = 'outcome' AND text LIKE %s"
            " RETURNING content_hash, window_key, id)"
            " INSERT INTO forgotten (session_id, content_hash, window_key, message_id, forgotten_at)"
            " SELECT 'p1', content_hash, window_key, id, 0 FROM gone",
            (f"%{ANSWER}",),
        )
    )

    assert store.write(lambda c: subagents.end(c, CHILD, "completed")) == (True, 0)
    parent = sessions.require_session(store.reader(), "p1")
    texts = [m.text for m in messages.recent(store.reader(), parent.rowid, 10)]
    assert texts == ["Please check the audit bucket", f"[subagent result] {NOTABLE}"]


def test_an_end_waiting_for_another_sidecars_end_copies_nothing(place: Place, store: Database) -> None:
    spawn_child(postgres_backend(store))
    other = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        second = race(
            lambda c: subagents.end(c, CHILD, "completed"),
            lambda: other.write(lambda c: subagents.end(c, CHILD, "completed")),
            store,
            place,
        )
    finally:
        other.close()

    assert second == (True, 0)
    assert outcome_texts(store) == Counter({f"[subagent result] {ANSWER}": 1, f"[subagent result] {NOTABLE}": 1})


def test_four_sidecars_ending_one_child_at_once_copy_its_outcome_once(place: Place, store: Database) -> None:
    spawn_child(postgres_backend(store))
    dbs = sidecars(place, 4)
    try:
        answers = together(len(dbs), lambda n: dbs[n].write(lambda c: subagents.end(c, CHILD, "completed")))
    finally:
        for db in dbs:
            db.close()

    assert sorted(answers) == [(True, 0), (True, 0), (True, 0), (True, 2)]
    assert outcome_texts(store) == Counter({f"[subagent result] {ANSWER}": 1, f"[subagent result] {NOTABLE}": 1})


def test_two_sidecars_spawning_one_child_at_once_link_it_once(place: Place, store: Database) -> None:
    postgres_backend(store).session("p1")
    dbs = sidecars(place, 2)
    try:
        answers = together(len(dbs), lambda n: dbs[n].write(lambda c: subagents.link(c, MAIN, CHILD, f"mode-{n}")))
    finally:
        for db in dbs:
            db.close()

    conn = store.reader()
    assert answers[0] == answers[1]  # one link, whichever spawn came second updated it
    assert conn.execute("SELECT count(*) FROM subagent_links").fetchone() == (1,)
    assert conn.execute("SELECT count(*) FROM sessions WHERE session_key = %s", (CHILD,)).fetchone() == (1,)


def outcome_texts(store: Database) -> Counter[str]:
    rows = store.reader().execute("SELECT text FROM messages WHERE kind = 'outcome'").fetchall()
    return Counter(str(r[0]) for r in rows)
