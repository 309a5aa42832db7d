"""Forgetting on PostgreSQL: the same selection names the same messages as on SQLite, exactly those go (with
the outcome records citing them), and a tombstone keeps them from being stored again."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.errors import BadRequest, NotFound, StoreUnavailable
from openclaw_lossless.store.model.forgetting import Forgotten, Selector
from openclaw_lossless.store.model.messages import turn_identities
from openclaw_lossless.store.postgres import archive, forgetting, messages, sessions
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.sqlite import forgetting as sqlite_forget
from openclaw_lossless.store.sqlite import messages as sqlite_messages
from openclaw_lossless.store.sqlite import migrations as sqlite_migrations
from openclaw_lossless.store.sqlite import sessions as sqlite_sessions
from openclaw_lossless.store.sqlite.connection import Database as SqliteDatabase
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.test_archive import fill, half_way, lines
from tests.postgres.backend.test_messages import MAY_8_2023, said
from tests.postgres.server import PostgresServer

DAY = 86_400.0
# (session, session key, advancement key, [(text, time offset in days)]): two agents, three sessions, and a
# turn whose words ("heron", "mill") a keyword selection finds.
TURNS = [
    ("s1", "agent:main:s1", "k1", [("The heron fished at dawn by the mill", 0), ("Noted: heron and mill", 0)]),
    ("s1", "agent:main:s1", "k2", [("Tomatoes need sun and water", 1), ("Water them at dusk", 1)]),
    ("s2", "agent:main:s2", "k3", [("My locker code is 4711", 2), ("I will keep the code", 2)]),
    ("h1", "agent:helper:h1", "k4", [("The helper found the mill closed", 3), ("Report: closed mill", 3)]),
    ("s1", "agent:main:s1", "k5", [("Plans for Friday: a walk", 4), ("A walk it is", 4)]),
]
CITED_TEXT = "Report: closed mill"  # a helper's message its parent holds an outcome record of


class Backend:
    """One backend's modules and parameter style, so one seeding runs on SQLite and on PostgreSQL alike."""

    def __init__(self, db: Any, forgetting: Any, session_mod: Any, message_mod: Any, mark: str) -> None:
        self.db, self.forget, self.sessions, self.messages, self.mark = db, forgetting, session_mod, message_mod, mark

    def commit(self, session_id: str, session_key: str, key: str, texts: Sequence[tuple[str, float]]) -> list[int]:
        records = [said(text, at=MAY_8_2023 + day * DAY, role=("user", "assistant")[n % 2])
                   for n, (text, day) in enumerate(texts)]  # fmt: skip

        def work(conn: Any) -> list[int]:
            session = self.sessions.ensure_session(conn, session_id, session_key)
            identified = turn_identities(records, key)
            status, ids = self.messages.commit_turn(conn, session, key, identified, heartbeat=False)
            assert status == "committed"
            return list(ids)

        return list(self.db.write(work))

    def seed(self) -> dict[str, int]:
        """``TURNS``, then an outcome record of the helper's report in s1; every message's id by its text."""
        ids: dict[str, int] = {}
        for session_id, session_key, key, texts in TURNS:
            stored = self.commit(session_id, session_key, key, texts)
            ids.update(zip([text for text, _ in texts], stored, strict=True))

        def outcome(conn: Any) -> int:
            parent = self.sessions.find_session(conn, "s1")
            record = said(f"[subagent result] {CITED_TEXT}", at=MAY_8_2023 + 3 * DAY)
            new = self.messages.insert_row(
                conn, parent, record, stored_at=time.time(), kind="outcome", cites=ids[CITED_TEXT]
            )
            assert new is not None
            return int(new)

        ids["outcome"] = self.db.write(outcome)
        return ids

    def run(self, archive_dir: Path, selector: Selector, *, dry_run: bool) -> Forgotten | str:
        """What forgetting answered, or the error it refused with (its type and message)."""
        try:
            return self.forget.run(self.db, None, archive_dir, selector, dry_run=dry_run)  # type: ignore[no-any-return]
        except (BadRequest, NotFound) as exc:
            return f"{type(exc).__name__}: {exc.message}"


@pytest.fixture
def lite(tmp_path: Path) -> Any:
    db = SqliteDatabase(tmp_path / "lossless.sqlite")
    sqlite_migrations.migrate(db)
    yield Backend(db, sqlite_forget, sqlite_sessions, sqlite_messages, "?")
    db.close()


@pytest.fixture
def pg(store: Database) -> Backend:
    return Backend(store, forgetting, sessions, messages, "%s")


def scalar(db: Database, query: str, params: tuple[Any, ...] = ()) -> Any:
    row = db.reader().execute(query, params).fetchone()
    assert row is not None
    return row[0]


def with_vectors(db: Database) -> None:
    """A vector for every message, as the embedding worker would store."""
    db.write(lambda conn: conn.execute(
        "INSERT INTO message_vectors (message_id, agent_id, session_rowid, embedding)"
        " SELECT id, agent_id, session_rowid, array_fill(0.5, ARRAY[384])::real[]::halfvec FROM messages"
    ))  # fmt: skip


SELECTIONS = [
    Selector(session="s2"),
    Selector(agent="helper"),
    Selector(match="heron mill"),
    Selector(match="mill"),
    Selector(match="MILL, closed!"),
    Selector(agent="main", match="water"),
    Selector(since=MAY_8_2023 + DAY, until=MAY_8_2023 + 2 * DAY),
    Selector(since=MAY_8_2023 + 3 * DAY),
    Selector(ids=(1, 3)),
    Selector(ids=(8,)),  # the helper's report: its outcome record in s1 goes with it
    Selector(ids=(8,), session="h1"),
    Selector(ids=(999,)),
    Selector(ids=(1, 999)),
    Selector(ids=(7,), session="s1"),  # a citation outside the session named
    Selector(session="nope"),
    Selector(agent="nobody"),
    Selector(match="!!!"),
    Selector(match="HÉRON"),  # case and accents folded on both
    Selector(match="heron_mill"),  # one word to Python, two to either index: a phrase of them
    Selector(match="by_the_mill"),
    Selector(match="___"),
    Selector(match="May"),  # the date words are indexed beside the text, but a match looks at the text only
    Selector(since=MAY_8_2023 - DAY),  # every message, by time alone
    Selector(since=MAY_8_2023 - DAY, everything=True),
    Selector(since=MAY_8_2023 + DAY, until=MAY_8_2023),
    Selector(),
    Selector(everything=True),
]


def test_the_same_selection_names_the_same_messages_as_on_sqlite(lite: Backend, pg: Backend, tmp_path: Path) -> None:
    assert lite.seed() == pg.seed()  # the same ids on both, so the answers compare whole

    for selector in SELECTIONS:
        on_sqlite = lite.run(tmp_path / "lite-archive", selector, dry_run=True)
        on_postgres = pg.run(tmp_path / "pg-archive", selector, dry_run=True)
        assert on_postgres == on_sqlite, selector
    answers = [pg.run(tmp_path / "pg-archive", selector, dry_run=True) for selector in SELECTIONS]
    assert sum(isinstance(answer, Forgotten) and answer.forgotten > 0 for answer in answers) >= 10
    assert messages.count(pg.db.reader()) == 11  # a dry run changes nothing


def test_forgetting_removes_exactly_the_plan_with_the_outcomes_citing_it(
    lite: Backend, pg: Backend, tmp_path: Path
) -> None:
    ids = pg.seed()
    lite.seed()
    with_vectors(pg.db)
    selector = Selector(ids=(ids[CITED_TEXT],))
    planned = pg.run(tmp_path, selector, dry_run=True)

    done = pg.run(tmp_path, selector, dry_run=False)

    assert isinstance(done, Forgotten) and isinstance(planned, Forgotten)
    assert [m.id for m in done.messages] == [m.id for m in planned.messages] == [ids[CITED_TEXT], ids["outcome"]]
    assert done.removed == 2 and done.wal_truncated is True
    on_sqlite = lite.run(tmp_path / "lite", selector, dry_run=False)
    assert done == on_sqlite
    gone = [ids[CITED_TEXT], ids["outcome"]]
    reader = pg.db.reader()
    assert messages.fetch(reader, gone) == {}
    assert messages.count(reader) == 9
    for table, column in (("embedding_backlog", "message_id"), ("message_vectors", "message_id"),
                          ("message_days", "message_id")):  # fmt: skip
        assert scalar(pg.db, f"SELECT count(*) FROM {table} WHERE {column} = ANY(%s)", (gone,)) == 0, table
    assert scalar(pg.db, "SELECT count(*) FROM embedding_backlog") == 9
    assert forgetting.forgotten_count(reader) == 2
    assert forgetting.resurrected(reader) == 0


def data_files(server: PostgresServer, db: Database, relation: str) -> bytes:
    """The bytes of a relation's data files as the server keeps them on disk (a hex editor's view)."""
    path = scalar(db, "SELECT pg_relation_filepath(%s::regclass)", (relation,))
    return b"".join(p.read_bytes() for p in sorted(server.data_dir.glob(f"{path}*")) if p.is_file())


def test_the_forgotten_text_is_gone_from_the_data_files(
    pg: Backend, tmp_path: Path, postgres_server: PostgresServer
) -> None:
    pg.seed()
    code = "zqxvarkmarker is the door code"
    long_text = "qjwblongmarker " + " ".join(f"w{n}x{n * 7919 % 1000}" for n in range(3000))  # TOASTed
    pg.commit("s9", "agent:main:s9", "k9", [(code, 5), (long_text, 5)])
    for n in range(30):  # rows after the secrets, so a VACUUM cutting the table's empty tail proves nothing
        pg.commit("s1", "agent:main:s1", f"later-{n}", [(f"later {n} " + "filler " * 200, 6)])
    toast = scalar(pg.db, "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = 'messages'::regclass")
    relations = ("messages", toast, "messages_search")
    pg.db.reader().execute("CHECKPOINT")
    before = {r: data_files(postgres_server, pg.db, r) for r in relations}
    assert all(b"zqxvarkmark" in before[r] for r in ("messages", "messages_search"))
    assert b"qjwblongmark" in before[toast]

    done = pg.run(tmp_path, Selector(session="s9"), dry_run=False)
    pg.db.reader().execute("CHECKPOINT")

    assert isinstance(done, Forgotten) and done.removed == 2 and done.wal_truncated is True
    for relation in relations:
        after = data_files(postgres_server, pg.db, relation)
        assert b"zqxvarkmark" not in after and b"qjwblongmark" not in after, relation
    assert b"filler" in data_files(postgres_server, pg.db, "messages")  # the files read are the live ones


def test_a_tombstone_keeps_a_forgotten_message_from_being_stored_again(pg: Backend, tmp_path: Path) -> None:
    ids = pg.seed()
    turn = TURNS[2]  # s2's turn
    assert isinstance(pg.run(tmp_path, Selector(session="s2"), dry_run=False), Forgotten)

    replayed = pg.commit("s2", "agent:main:s2", "k3-replayed", turn[3])  # the same words, a new advancement key

    def again(conn: Connection) -> int | None:
        session = sessions.ensure_session(conn, "s2", "agent:main:s2")
        record = said(turn[3][0][0], at=MAY_8_2023 + turn[3][0][1] * DAY)
        return messages.insert_row(conn, session, record, stored_at=time.time())

    assert replayed == []
    assert pg.db.write(again) is None
    reader = pg.db.reader()
    assert messages.fetch(reader, [ids[text] for text, _ in turn[3]]) == {}
    assert forgetting.forgotten_count(reader) == 2
    assert forgetting.resurrected(reader) == 0
    assert pg.commit("s2", "agent:main:s2", "k-new", [("Something new", 7)]) != []  # the session lives on


def test_a_session_forgotten_whole_loses_its_summaries_and_snapshots(pg: Backend, tmp_path: Path) -> None:
    ids = pg.seed()

    def summarise(conn: Connection) -> None:
        for session_id, last in (("s2", ids["I will keep the code"]), ("s1", ids["A walk it is"])):
            session = sessions.find_session(conn, session_id)
            assert session is not None
            row = conn.execute(
                "INSERT INTO compactions (session_rowid, recorded_at, compacted, summary, last_message_id)"
                " VALUES (%s, 0, true, %s, %s) RETURNING id",
                (session.rowid, f"summary of {session_id}", last),
            ).fetchone()
            assert row is not None
            conn.execute(
                "INSERT INTO snapshots (name, session_rowid, last_message_id, created_at, compaction_id)"
                " VALUES (%s, %s, %s, 0, %s)",
                (f"pre-{session_id}", session.rowid, last, row[0]),
            )

    pg.db.write(summarise)
    done = pg.run(tmp_path, Selector(session="s2"), dry_run=False)
    by_match = pg.run(tmp_path, Selector(session="s1", match="walk"), dry_run=False)

    assert isinstance(done, Forgotten) and done.sessions == ["s2"]
    assert isinstance(by_match, Forgotten) and by_match.sessions == []  # a match is not the whole session
    assert scalar(pg.db, "SELECT array_agg(summary ORDER BY id) FROM compactions") == ["summary of s1"]
    assert scalar(pg.db, "SELECT array_agg(name ORDER BY id) FROM snapshots") == ["pre-s1"]


def test_archived_messages_are_forgotten_in_their_archive_too(pg: Backend, tmp_path: Path) -> None:
    empty = archive.used_bytes(pg.db.reader())
    pg.seed()
    fill(pg.db, turns=20)
    pruned = archive.prune(pg.db, tmp_path / "archive", half_way(pg.db, empty))
    assert isinstance(pruned, archive.Pruned) and pruned.pruned >= 11  # the seeded messages are all archived
    path = Path(pruned.archives[0])
    s1_lines = [line for line in lines(path) if line["sessionId"] == "s1"]
    planned = pg.run(tmp_path / "archive", Selector(session="s1"), dry_run=True)
    assert isinstance(planned, Forgotten) and planned.archived == len(s1_lines) == 7

    done = pg.run(tmp_path / "archive", Selector(session="s1"), dry_run=False)

    assert isinstance(done, Forgotten) and done.archive_files_rewritten == 1
    assert {m.id for m in done.messages if m.archived} == {line["id"] for line in s1_lines}
    left = lines(path)
    assert all(line["sessionId"] != "s1" for line in left) and len(left) == pruned.pruned - len(s1_lines)
    reader = pg.db.reader()
    for line in s1_lines:  # their tombstones keep an import of an older copy from bringing them back
        assert messages.is_forgotten(reader, "s1", bytes.fromhex(line["contentHash"]), line["windowKey"])
    assert forgetting.resurrected(reader) == 0


def test_a_forget_waits_for_an_archiving_under_way(pg: Backend, tmp_path: Path) -> None:
    ids = pg.seed()
    answers: list[Forgotten | str] = []

    def forget_first() -> None:
        answers.append(pg.run(tmp_path, Selector(ids=(1,)), dry_run=False))

    waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s AND NOT granted"
    with archive.store_lock(pg.db, wait=False) as taken:  # another sidecar is archiving
        forgetting = threading.Thread(target=forget_first)
        forgetting.start()
        while not scalar(pg.db, waiting, (archive.LOCK_CLASS,)):
            assert forgetting.is_alive()  # it must be waiting for the lock, not done
        assert messages.fetch(pg.db.reader(), [ids["The heron fished at dawn by the mill"]]) != {}
    forgetting.join(30)

    assert taken and len(answers) == 1 and isinstance(answers[0], Forgotten) and answers[0].removed == 1


def test_a_keyword_index_rebuild_left_unfinished_is_dropped(pg: Backend, tmp_path: Path) -> None:
    """What a REINDEX CONCURRENTLY stopped part way (a server restart) leaves: an invalid copy of the index."""
    pg.seed()
    with pg.db.writer() as conn:
        conn.execute("CREATE INDEX messages_search_ccnew ON messages USING gin (search)")
        conn.execute("UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'messages_search_ccnew'::regclass")

    done = pg.run(tmp_path, Selector(ids=(1,)), dry_run=False)

    assert isinstance(done, Forgotten) and done.wal_truncated is True
    names = "SELECT array_agg(indexname::text ORDER BY indexname) FROM pg_indexes WHERE schemaname = current_schema()"
    assert [n for n in scalar(pg.db, names) if n.startswith("messages_search")] == ["messages_search"]


def test_a_message_holding_a_nul_character_is_forgotten_with_its_window_key(pg: Backend, tmp_path: Path) -> None:
    """Its original holds the escape \\u0000, which ``jsonb`` refuses: the tombstone still reads its timestamp."""
    (nul,) = pg.commit("s3", "agent:main:s3", "k-nul", [("a NUL \x00 inside", 1)])
    pg.commit("s3", "agent:main:s3", "k-other", [("something else", 2)])

    done = pg.run(tmp_path, Selector(ids=(nul,)), dry_run=False)

    assert isinstance(done, Forgotten) and done.removed == 1
    stone = pg.db.reader().execute("SELECT message_id, window_key FROM forgotten").fetchall()
    assert len(stone) == 1 and stone[0][0] == nul and stone[0][1] is not None
    again = pg.commit("s3", "agent:main:s3", "k-nul-again", [("a NUL \x00 inside", 1)])
    assert again == [] and forgetting.resurrected(pg.db.reader()) == 0


def test_what_a_forget_frees_counts_as_free_at_once(pg: Backend, tmp_path: Path) -> None:
    """PostgreSQL keeps its files' size after a delete; the store's used bytes (``maxDbSizeMb``) drop anyway, as
    SQLite's pages in use do, and the messages stored afterwards count again."""
    pg.seed()
    fill(pg.db, turns=40, start=100)  # 80 messages of ~1 KB, half of them in session s0
    before, files = archive.used_bytes(pg.db.reader()), archive.store_bytes(pg.db.reader())

    done = pg.run(tmp_path, Selector(session="s0"), dry_run=False)

    assert isinstance(done, Forgotten) and done.removed == 40
    after = archive.used_bytes(pg.db.reader())
    assert after < before * 0.7  # 40 of 91 messages went, the larger ones
    assert archive.store_bytes(pg.db.reader()) >= files * 0.9  # while the files kept (nearly) their size
    fill(pg.db, turns=20, start=200)  # 40 more: they take the freed space back
    assert after < archive.used_bytes(pg.db.reader()) <= before * 1.1


def test_a_forget_that_cannot_get_the_lock_in_time_is_refused_and_changes_nothing(
    pg: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg.seed()
    monkeypatch.setattr(archive, "LOCK_WAIT_S", 0.2)

    with archive.store_lock(pg.db, wait=False), pytest.raises(StoreUnavailable, match="retry"):
        pg.run(tmp_path, Selector(session="s2"), dry_run=False)

    assert messages.count(pg.db.reader()) == 11 and forgetting.forgotten_count(pg.db.reader()) == 0


def test_a_sidecar_forgets_in_the_archives_another_sidecar_on_its_host_wrote(
    place: Place, pg: Backend, tmp_path: Path
) -> None:
    empty = archive.used_bytes(pg.db.reader())
    pg.seed()
    fill(pg.db, turns=20, start=100)
    other = Database(place.url, schema=place.schema, write_pool_size=1, read_pool_size=1)
    try:
        pruned = archive.prune(other, tmp_path / "other-sidecar", half_way(pg.db, empty))
    finally:
        other.close()
    assert isinstance(pruned, archive.Pruned) and pruned.pruned >= 11
    path = Path(pruned.archives[0])
    s2_ids = {line["id"] for line in lines(path) if line["sessionId"] == "s2"}

    done = pg.run(tmp_path / "this-sidecar", Selector(session="s2"), dry_run=False)

    assert isinstance(done, Forgotten) and done.archived == len(s2_ids) == 2 and done.archive_files_rewritten == 1
    assert {line["id"] for line in lines(path)}.isdisjoint(s2_ids)
    assert len(lines(path)) == pruned.pruned - 2
