"""A session's timeline on PostgreSQL: the pages, and the compactions, snapshots, spawns and resets drawn on each,
are those SQLite draws for the same history."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.store.model.timelines import Timeline, Window
from openclaw_lossless.store.postgres.connection import Database
from tests.postgres.backend.test_messages import said
from tests.postgres.backend.test_snapshots import (
    COMPACTED,
    FAILED,
    MAIN,
    Backend,
    plain,
    postgres_backend,
    sqlite_store,
)

CHILD = "agent:main:subagent:7"
T = 1_600_000_000.0
PAGE = 4


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[Backend]:
    with sqlite_store(tmp_path) as backend:
        yield backend


def history(b: Backend) -> None:
    """Twelve messages in ``s-one``: a compaction and a named snapshot after the 4th, a subagent spawned after
    the 8th, a failed compaction and another snapshot after the 12th; then the child's work, a ``/new`` and
    another agent's session."""
    b.commit("s-one", "a", [said(f"first part {n}", at=T + n) for n in range(4)])
    one = b.session("s-one")
    b.compact(one, COMPACTED)
    b.snapshot(one, "op-mark")
    b.commit("s-one", "b", [said(f"second part {n}", at=T + 10 + n) for n in range(4)])
    b.write(lambda c: b.subagents.link(c, MAIN, CHILD, "isolated"))
    b.commit("s-one", "c", [said(f"after the spawn {n}", at=None) for n in range(4)])  # dated now: after it
    b.compact(one, FAILED)
    b.snapshot(one, "late-mark")
    b.commit("c1", "child-1", [said("the child's question", at=None), said("its answer", None, "assistant")], CHILD)
    b.commit("s-two", "d", [said("a fresh start", at=None), said("hello again", None, "assistant")])
    b.commit("s-ops", "ops-1", [said("another agent's note", at=T - 100)], "agent:ops:main")


def pages(b: Backend) -> dict[str, Any]:
    """Every way into ``s-one``'s timeline, the timelines of the session after its ``/new`` and of its child,
    and the index of sessions."""
    conn = b.db.reader()
    one, two, child = (b.sessions.require_session(conn, s) for s in ("s-one", "s-two", "c1"))

    def read(session: Any, window: Window) -> Timeline:
        page: Timeline = b.timelines.read_timeline(conn, session, window)
        return page

    newest = read(one, Window(PAGE))
    middle = read(one, Window(PAGE, before=newest.older))
    oldest = read(one, Window(PAGE, before=middle.older))
    return {
        "newest": newest,
        "middle": middle,
        "oldest": oldest,
        "forward": read(one, Window(PAGE, after=oldest.newer)),
        "around 6": read(one, Window(PAGE, at=6)),
        "past the end": read(one, Window(PAGE, after=12)),
        "after /new": read(two, Window(10)),
        "child": read(child, Window(10)),
        "all sessions": b.timelines.session_summaries(conn, None, 10),
        "ops": b.timelines.session_summaries(conn, "ops", 10),
        "main, last two": b.timelines.session_summaries(conn, "main", 2),
        "an agent with a NUL": b.timelines.session_summaries(conn, "ma\x00in", 10),
    }


def test_timeline_pages_and_their_events_are_those_of_sqlite(lite: Backend, store: Database) -> None:
    since = time.time()
    history(lite)
    on_sqlite = plain(pages(lite), since)
    postgres = postgres_backend(store)
    history(postgres)
    answers = pages(postgres)

    assert plain(answers, since) == on_sqlite
    drawn = {name: events(page) for name, page in answers.items() if isinstance(page, Timeline)}
    assert drawn["oldest"] == ([1, 2, 3, 4], [], [], [])
    assert drawn["middle"] == ([5, 6, 7, 8], [(4, "pre-compaction-1")], ["op-mark"], [])  # before message 5
    assert drawn["newest"] == ([9, 10, 11, 12], [(12, None)], ["late-mark"], [(CHILD, "c1")])
    assert drawn["forward"] == drawn["middle"]
    assert drawn["around 6"] == ([4, 5, 6, 7], [(4, "pre-compaction-1")], ["op-mark"], [])
    assert drawn["past the end"][0] == []
    assert drawn["after /new"] == ([15, 16], [], [], [])  # the spawn belongs to the session current then
    newest, after_reset, child = answers["newest"], answers["after /new"], answers["child"]
    assert (newest.total, newest.older, newest.newer, newest.next_session) == (12, 9, None, "s-two")
    assert after_reset.previous_session == "s-one" and after_reset.next_session is None
    assert child.parent is not None and (child.parent.parent_key, child.parent.parent_session_id) == (MAIN, "s-one")
    assert [s.session_id for s in answers["all sessions"]] == ["s-ops", "s-two", "c1", "s-one"]
    assert [(s.session_id, s.messages) for s in answers["ops"]] == [("s-ops", 1)]
    assert [s.spawned_by for s in answers["main, last two"]] == [None, MAIN]
    assert answers["an agent with a NUL"] == []


def events(page: Timeline) -> tuple[list[int], list[tuple[int | None, str | None]], list[str], list[Any]]:
    """What the page shows: its message ids, and the compactions, snapshots and spawns drawn on it."""
    return (
        [m.id for m in page.messages],
        [(c.last_message_id, c.snapshot) for c in page.compactions],
        [s.name for s in page.snapshots],
        [(s.child_key, s.child_session_id) for s in page.spawns],
    )
