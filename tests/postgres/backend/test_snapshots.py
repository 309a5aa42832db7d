"""Compactions and snapshots on PostgreSQL: the same story told to a SQLite store and to PostgreSQL gets the same
answers, and several sidecars sharing one database never take one snapshot name twice nor number two
compactions alike.

The ``Backend`` here (one backend's store and modules, driven alike) serves the subagent and timeline tests too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import psycopg
import pytest

from openclaw_lossless.capture.records import MessageRecord
from openclaw_lossless.errors import InvalidName
from openclaw_lossless.store.model.messages import turn_identities
from openclaw_lossless.store.model.sessions import SessionRef
from openclaw_lossless.store.model.snapshots import STATUSES, CompactionRecord
from openclaw_lossless.store.postgres import messages, sessions, snapshots, subagents
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.sqlite import messages as sqlite_messages
from openclaw_lossless.store.sqlite import migrations as sqlite_migrations
from openclaw_lossless.store.sqlite import sessions as sqlite_sessions
from openclaw_lossless.store.sqlite import snapshots as sqlite_snapshots
from openclaw_lossless.store.sqlite import subagents as sqlite_subagents
from openclaw_lossless.store.sqlite.connection import Database as SqliteDatabase
from openclaw_lossless.store.statements import POSTGRES, SQLITE
from openclaw_lossless.store.statements.timelines import Timelines
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.test_messages import MAY_8_2023, said

T = TypeVar("T")
WAIT_S = 10.0  # how long a test waits for another sidecar's step before it fails (never reached when it works)
MAIN = "agent:main:main"

COMPACTED = CompactionRecord(52_000, 9_000, True, "Summary of the plan so far", None, True)
FAILED = CompactionRecord(52_000, None, False, None, "the summariser timed out", False)
SKIPPED = CompactionRecord(3_000, None, False, None, "nothing to compact", True)
UNSAID = CompactionRecord(None, None, False, None, None)  # an older plugin that gives no verdict


@dataclasses.dataclass(frozen=True)
class Backend:
    """One backend's store and its modules, so one story can be told to SQLite and to PostgreSQL alike."""

    db: Any
    sessions: ModuleType
    messages: ModuleType
    snapshots: ModuleType
    subagents: ModuleType
    timelines: Timelines

    def write(self, work: Callable[[Any], T]) -> T:
        result: T = self.db.write(work)
        return result

    def read(self, query: Callable[[Any], T]) -> T:
        return query(self.db.reader())

    def session(self, session_id: str, session_key: str | None = MAIN) -> SessionRef:
        ref: SessionRef = self.write(lambda conn: self.sessions.ensure_session(conn, session_id, session_key))
        return ref

    def commit(self, session_id: str, key: str, records: Sequence[MessageRecord], session_key: str = MAIN) -> list[int]:
        def work(conn: Any) -> list[int]:
            session = self.sessions.ensure_session(conn, session_id, session_key)
            identified = turn_identities(list(records), key)
            _, ids = self.messages.commit_turn(conn, session, key, identified, heartbeat=False)
            return list(ids)

        return self.write(work)

    def compact(self, session: SessionRef, record: CompactionRecord) -> Any:
        return self.write(lambda conn: self.snapshots.record_compaction(conn, session, record))

    def snapshot(self, session: SessionRef, name: str) -> Any:
        """The message the new snapshot names, or how its name was refused."""
        return attempt(lambda: self.write(lambda conn: self.snapshots.create_snapshot(conn, session, name)))


def postgres_backend(db: Database) -> Backend:
    return Backend(db, sessions, messages, snapshots, subagents, Timelines(POSTGRES))


@contextlib.contextmanager
def sqlite_store(directory: Path) -> Iterator[Backend]:
    """A SQLite store with the SQLite modules: the reference the PostgreSQL answers are held to."""
    db = SqliteDatabase(directory / "lossless.sqlite")
    try:
        sqlite_migrations.migrate(db)
        yield Backend(db, sqlite_sessions, sqlite_messages, sqlite_snapshots, sqlite_subagents, Timelines(SQLITE))
    finally:
        db.close()


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[Backend]:
    with sqlite_store(tmp_path) as backend:
        yield backend


def attempt(action: Callable[[], T]) -> T | tuple[str, str]:
    """What an action answered, or how it was refused (the refusal a user reads)."""
    try:
        return action()
    except InvalidName as exc:
        return ("refused", str(exc))


def plain(value: Any, since: float) -> Any:
    """An answer as comparable data: times the store took from its own clock (at or after ``since``) read
    ``"now"``, as two stores written a moment apart cannot agree on them; every other value is kept."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name), since) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: plain(v, since) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v, since) for v in value]
    if isinstance(value, float) and value >= since:
        return "now"
    return value


def story_of_snapshots(b: Backend) -> list[Any]:
    """Compactions of every status, automatic and named snapshots, refused names, then every read."""
    answers: list[Any] = []
    empty = b.session("s-empty", "agent:main:empty")
    answers.append(b.compact(empty, COMPACTED))  # before any message
    s1 = b.session("s1")
    b.commit("s1", "k1", [said(f"step {n}", at=MAY_8_2023 + n) for n in range(3)])
    answers.extend(b.compact(s1, record) for record in (COMPACTED, FAILED, SKIPPED, UNSAID))
    answers.append(b.snapshot(s1, "before-refactor"))
    answers.extend(b.snapshot(s1, name) for name in ("before-refactor", "pre-compaction-2", "bad name!", "-dash-first"))
    b.commit("s1", "k2", [said("after the first compaction", at=MAY_8_2023 + 10)])
    answers.append(b.compact(s1, COMPACTED))
    answers.append(b.snapshot(empty, "empty-mark"))
    return answers + reads_of_snapshots(b)


def reads_of_snapshots(b: Backend) -> list[Any]:
    conn = b.db.reader()
    return [
        b.snapshots.list_snapshots(conn),
        [b.snapshots.find_snapshot(conn, n) for n in ("pre-compaction-1", "before-refactor", "empty-mark", "absent")],
        attempt(lambda: b.snapshots.find_snapshot(conn, "no spaces allowed")),
        [b.snapshots.find_compaction(conn, n) for n in range(1, 9)],
        b.snapshots.list_compactions(conn, 10),
        b.snapshots.list_compactions(conn, 2),
        [b.snapshots.list_compactions(conn, 10, status) for status in STATUSES],
        b.snapshots.compaction_counts(conn),
    ]


def test_compactions_and_snapshots_answer_as_on_sqlite(lite: Backend, store: Database) -> None:
    since = time.time()
    on_sqlite = plain(story_of_snapshots(lite), since)
    on_postgres = plain(story_of_snapshots(postgres_backend(store)), since)

    assert on_postgres == on_sqlite
    conn = store.reader()
    names = [s.name for s in snapshots.list_snapshots(conn)]
    assert names == ["pre-compaction-1", "pre-compaction-2", "before-refactor", "pre-compaction-6", "empty-mark"]
    assert snapshots.compaction_counts(conn) == {"compacted": 3, "failed": 1, "skipped": 1, "not-compacted": 1}
    assert [c.compaction_id for c in snapshots.list_compactions(conn, 10)] == [6, 5, 4, 3, 2, 1]
    assert [(c.compaction_id, c.snapshot) for c in snapshots.list_compactions(conn, 10, "failed")] == [(3, None)]
    found = snapshots.find_snapshot(conn, "before-refactor")
    assert found is not None and found.last_message_id == 3 and not found.automatic
    assert on_postgres[6][0] == "refused" and "already exists" in on_postgres[6][1]  # the duplicate name


def test_a_name_taken_by_a_sidecar_still_writing_is_refused_once_it_commits(place: Place, store: Database) -> None:
    """The second sidecar does not see the first's snapshot yet (uncommitted): it waits for it on the unique
    name, then is refused as if the name had been taken long before."""
    other = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        first, second = postgres_backend(store), postgres_backend(other)
        s1, s2 = first.session("s1"), second.session("s2", "agent:ops:s2")
        outcome = race(
            lambda c: snapshots.create_snapshot(c, s1, "release-1"),
            lambda: postgres_backend(other).snapshot(s2, "release-1"),
            store,
            place,
        )
        assert outcome[0] == "refused" and "already exists" in outcome[1]
        assert [(s.name, s.session_id) for s in snapshots.list_snapshots(store.reader())] == [("release-1", "s1")]
    finally:
        other.close()


def test_a_name_whose_first_taker_rolled_back_goes_to_the_one_waiting(place: Place, store: Database) -> None:
    other = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        s1, s2 = postgres_backend(store).session("s1"), postgres_backend(other).session("s2", "agent:ops:s2")
        outcome = race(
            lambda c: snapshots.create_snapshot(c, s1, "release-1"),
            lambda: postgres_backend(other).snapshot(s2, "release-1"),
            store,
            place,
            roll_back=True,
        )
        assert outcome is None  # taken: no message had been stored in s2, so its snapshot names none
        assert [(s.name, s.session_id) for s in snapshots.list_snapshots(store.reader())] == [("release-1", "s2")]
    finally:
        other.close()


class RolledBack(Exception):
    """The first sidecar's request failed after its step: its transaction rolls back."""


def race(
    first: Callable[[Connection], object],
    second: Callable[[], T],
    db: Database,
    place: Place,
    *,
    roll_back: bool = False,
) -> T:
    """Run ``first`` in a write on ``db`` and hold its transaction open until ``second`` (another sidecar) is
    seen waiting for it on the server; then let ``first`` end (commit, or roll back) and return what ``second``
    answered."""
    holding, release = threading.Event(), threading.Event()

    def held(conn: Connection) -> None:
        first(conn)
        holding.set()
        assert release.wait(WAIT_S)
        if roll_back:
            raise RolledBack

    def run_first() -> None:
        with contextlib.suppress(RolledBack):
            db.write(held)

    answers: list[T | Exception] = []
    thread = threading.Thread(target=run_first)
    thread.start()
    try:
        assert holding.wait(WAIT_S)
        waiting = threading.Thread(target=lambda: answers.append(outcome_of(second)))
        waiting.start()
        wait_until_blocked(place)
        release.set()
        waiting.join(WAIT_S)
    finally:
        release.set()
        thread.join(WAIT_S)
    assert len(answers) == 1, "the second sidecar never answered"
    answer = answers[0]
    assert not isinstance(answer, Exception), answer
    return answer


def outcome_of(action: Callable[[], T]) -> T | Exception:
    """What ``action`` answered, or the error it raised (as an answer: a thread's error is otherwise lost)."""
    try:
        return action()
    except Exception as exc:  # the thread's edge: the test shows it
        return exc


def wait_until_blocked(place: Place) -> None:
    """Until some session on the test's database waits for a lock another holds (the race is then real)."""
    deadline = time.monotonic() + WAIT_S
    with psycopg.connect(place.url, autocommit=True) as admin:
        while time.monotonic() < deadline:
            row = admin.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND cardinality(pg_blocking_pids(pid)) > 0"
            ).fetchone()
            if row is not None and int(row[0]) > 0:
                return
            time.sleep(0.01)
    raise AssertionError("the second sidecar never waited for the first: they did not race")


def sidecars(place: Place, count: int) -> list[Database]:
    return [Database(place.url, schema=place.schema, write_pool_size=2, read_pool_size=1) for _ in range(count)]


def together(count: int, work: Callable[[int], T]) -> list[T]:
    """Run ``work(n)`` on ``count`` threads released at the same moment; each one's answer, in order (an error
    in any fails the test with it)."""
    start = threading.Barrier(count)
    answers: list[Any] = [None] * count

    def run(n: int) -> None:
        start.wait(WAIT_S)
        answers[n] = outcome_of(lambda: work(n))

    threads = [threading.Thread(target=run, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S * 6)
    problems = [a for a in answers if a is None or isinstance(a, Exception)]
    assert not problems, problems[0]
    return answers


def test_four_sidecars_taking_the_same_names_at_once_take_each_once(place: Place, store: Database) -> None:
    names = [f"release-{n}" for n in range(15)]
    dbs = sidecars(place, 4)
    try:
        refs = [postgres_backend(db).session(f"s{n}", f"agent:a{n}:main") for n, db in enumerate(dbs)]

        def take_all(n: int) -> list[str]:
            taken = []
            for name in names:
                answer = postgres_backend(dbs[n]).snapshot(refs[n], name)
                taken.append("refused" if isinstance(answer, tuple) else "taken")
            return taken

        answers = together(len(dbs), take_all)
    finally:
        for db in dbs:
            db.close()

    for position, name in enumerate(names):
        assert Counter(a[position] for a in answers) == {"taken": 1, "refused": 3}, name
    listed = snapshots.list_snapshots(store.reader())
    assert sorted(s.name for s in listed) == sorted(names)
    winners = {s.name: s.session_id for s in listed}
    assert all(answers[int(winners[n][1:])][i] == "taken" for i, n in enumerate(names))  # the store names the winner


def test_compactions_recorded_at_once_by_four_sidecars_are_numbered_once(place: Place, store: Database) -> None:
    dbs = sidecars(place, 4)
    try:
        session = postgres_backend(store).session("s1")
        postgres_backend(store).commit("s1", "k1", [said("the work so far")])
        answers = together(
            len(dbs),
            lambda n: [dbs[n].write(lambda c: snapshots.record_compaction(c, session, COMPACTED)) for _ in range(10)],
        )
    finally:
        for db in dbs:
            db.close()

    recorded = [c for answer in answers for c in answer]
    assert len({c.compaction_id for c in recorded}) == 40
    assert all(c.snapshot == f"pre-compaction-{c.compaction_id}" for c in recorded)
    conn = store.reader()
    assert snapshots.compaction_counts(conn)["compacted"] == 40
    by_name = {s.name: s for s in snapshots.list_snapshots(conn)}
    assert sorted(by_name) == sorted(c.snapshot or "" for c in recorded)
    assert all(by_name[c.snapshot or ""].compaction_id == c.compaction_id for c in recorded)


def test_text_postgresql_cannot_hold_is_stored_readably(store: Database) -> None:
    """A summary with a NUL or a lone surrogate (SQLite holds either) is stored, each such character as U+FFFD."""
    session = postgres_backend(store).session("s1")
    record = CompactionRecord(10, 5, True, "plan\x00 step \ud800 two", "why\x00", True)

    done = store.write(lambda c: snapshots.record_compaction(c, session, record))

    point = snapshots.find_compaction(store.reader(), done.compaction_id)
    assert point is not None and point.summary == "plan\ufffd step \ufffd two" and point.reason == "why\ufffd"
