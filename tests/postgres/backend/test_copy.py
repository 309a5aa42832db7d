"""Copying a whole store between backends (``store/copy.py``): a SQLite store copied into PostgreSQL is verified
by both ends' row counts and checksums; a copy cut short and run again finishes without storing anything twice;
the copy back into SQLite exports the same file; a difference is reported, and a target holding another store's
history is refused before anything is written."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from openclaw_lossless.capture.records import CaptureOptions
from openclaw_lossless.capture.redact import Redactor, Rule
from openclaw_lossless.errors import BadRequest
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.copy import CopyMismatch, Side, copy_store, tally
from openclaw_lossless.store.model.forgetting import Selector
from openclaw_lossless.store.model.messages import turn_identities
from openclaw_lossless.store.model.transfer.export import ExportScope
from openclaw_lossless.store.postgres import transfer as pg_transfer
from openclaw_lossless.store.postgres.connection import Database
from openclaw_lossless.store.sqlite import forgetting
from openclaw_lossless.store.sqlite import messages as sqlite_messages
from openclaw_lossless.store.sqlite import sessions as sqlite_sessions
from openclaw_lossless.store.sqlite import transfer as sqlite_transfer
from openclaw_lossless.store.sqlite.connection import Database as SqliteDatabase
from tests.conversation import conversation
from tests.helpers import make_settings
from tests.postgres.backend.test_messages import commit as pg_commit
from tests.postgres.backend.test_messages import said
from tests.postgres.backend.test_transfer import MAIN, _commit, empty_sqlite, fill

CHUNK = 4  # messages a chunk: the source's 21 messages make six


def exported(side: Side, path: Path) -> bytes:
    with path.open("w") as out:
        side.transfer.write_jsonl(side.transfer.export_store(side.db.reader(), ExportScope()), out)
    return path.read_bytes()


class Interrupted(Exception):
    """The copy stopped part way, as a killed process or a lost connection would stop it."""


@pytest.fixture(scope="module")
def source_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CaptureOptions]:
    return fill(tmp_path_factory.mktemp("pg-copy") / "state")


@pytest.fixture
def lite_source(source_file: tuple[Path, CaptureOptions]) -> Iterator[Side]:
    db = SqliteDatabase(source_file[0])
    try:
        yield Side(db, sqlite_transfer)
    finally:
        db.close()


@pytest.fixture
def empty_lite(tmp_path: Path) -> Iterator[Side]:
    with empty_sqlite(tmp_path / "copy" / "lossless.sqlite") as db:
        yield Side(db, sqlite_transfer)


def test_a_sqlite_store_copied_into_postgresql_is_verified_by_counts_and_checksums(
    source_file: tuple[Path, CaptureOptions], lite_source: Side, store: Database, tmp_path: Path
) -> None:
    target = Side(store, pg_transfer)
    seen: list[int] = []
    report = copy_store(lite_source, target, source_file[1], chunk=CHUNK, progress=seen.append)
    assert report.resumed_after == 0 and report.mismatches() == []
    assert report.source is not None and report.source == report.target
    rows = report.source.rows
    assert (rows["messages"], rows["sessions"], rows["forgotten"], rows["snapshots"]) == (21, 4, 1, 2)
    assert seen == [4, 8, 12, 16, 20, 21]
    assert report.messages.imported == 21 and report.records.malformed == report.messages.malformed == 0
    assert exported(target, tmp_path / "pg.jsonl") == exported(lite_source, tmp_path / "lite.jsonl")


def test_a_copy_cut_short_then_run_again_finishes_without_duplicates(
    source_file: tuple[Path, CaptureOptions], lite_source: Side, store: Database
) -> None:
    target = Side(store, pg_transfer)

    def stop_after_two_chunks(copied: int) -> None:
        if copied >= 2 * CHUNK:
            raise Interrupted

    with pytest.raises(Interrupted):
        copy_store(lite_source, target, source_file[1], chunk=CHUNK, progress=stop_after_two_chunks)
    cut = tally(target)
    assert cut.rows["messages"] == 2 * CHUNK and cut.rows["sessions"] == 4  # the records went first

    report = copy_store(lite_source, target, source_file[1], chunk=CHUNK)
    assert report.resumed_after > 2 * CHUNK  # the eighth message's id: message 3 was forgotten in the source
    assert report.messages.imported == 21 - 2 * CHUNK and report.messages.already_present == 0
    assert report.records.already_present == report.records.read  # read again, stored once
    assert report.source == report.target == tally(lite_source)

    again = copy_store(lite_source, target, source_file[1], chunk=CHUNK)
    assert again.messages.read == 0 and again.target == report.target


def test_postgresql_copied_back_into_sqlite_exports_the_same_lines(
    source_file: tuple[Path, CaptureOptions], lite_source: Side, store: Database, empty_lite: Side, tmp_path: Path
) -> None:
    options = source_file[1]
    copy_store(lite_source, Side(store, pg_transfer), options, chunk=CHUNK)
    back = copy_store(Side(store, pg_transfer), empty_lite, options)
    assert back.mismatches() == [] and back.target is not None and back.target.rows["messages"] == 21
    assert exported(empty_lite, tmp_path / "back.jsonl") == exported(lite_source, tmp_path / "original.jsonl")


def test_a_copy_that_does_not_match_its_source_is_reported(lite_source: Side, store: Database) -> None:
    """A target capturing with other redaction rules stores other text: the checksums say so."""
    audit = Rule("word", re.compile(r"audit"))
    stricter = CaptureOptions(redactor=Redactor((audit,)))
    with pytest.raises(CopyMismatch) as raised:
        copy_store(lite_source, Side(store, pg_transfer), stricter, chunk=CHUNK)
    assert "checksums of message" in raised.value.message
    assert raised.value.report.target is not None and raised.value.report.target.rows["messages"] == 21


def test_a_target_holding_another_history_is_refused_before_any_write(
    source_file: tuple[Path, CaptureOptions], lite_source: Side, store: Database, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other_file, options = fill(other)
    other_db = SqliteDatabase(other_file)
    try:
        other_db.write(  # the other store's newest message is not the source's
            lambda conn: conn.execute(
                "UPDATE messages SET content_hash = randomblob(32) WHERE id = (SELECT max(id) FROM messages)"
            )
        )
        copy_store(Side(other_db, sqlite_transfer), Side(store, pg_transfer), options, chunk=CHUNK)
    finally:
        other_db.close()
    before = tally(Side(store, pg_transfer))
    with pytest.raises(BadRequest, match="holds other messages"):
        copy_store(lite_source, Side(store, pg_transfer), source_file[1], chunk=CHUNK)
    assert tally(Side(store, pg_transfer)) == before


def test_a_copy_cut_short_while_taking_the_records_resumes_and_a_stranger_is_refused(
    source_file: tuple[Path, CaptureOptions], lite_source: Side, store: Database, tmp_path: Path
) -> None:
    target = Side(store, pg_transfer)
    lines = exported(lite_source, tmp_path / "all.jsonl").splitlines()
    sessions_only = tmp_path / "sessions.jsonl"
    sessions_only.write_bytes(b"\n".join(line for line in lines if b'"type": "session"' in line) + b"\n")
    assert pg_transfer.restore_jsonl(store, sessions_only, source_file[1]).sessions == 4
    refused = pytest.raises(BadRequest, match="holds sessions the source does not")
    with empty_sqlite(tmp_path / "stranger" / "lossless.sqlite") as stranger, refused:
        copy_store(Side(stranger, sqlite_transfer), target, source_file[1])
    assert copy_store(lite_source, target, source_file[1], chunk=CHUNK).mismatches() == []


def test_the_ids_the_source_gave_to_forgotten_messages_are_given_by_no_target(
    tmp_path: Path, store: Database, empty_lite: Side
) -> None:
    """The source's newest messages forgotten before the copy: the message stored next in the PostgreSQL
    copy, and in the SQLite copy made back from it, gets an id above theirs, as it would in the source."""
    sidecar = Sidecar(make_settings(tmp_path / "source", embedding_provider="none"), start_worker=False)
    try:
        for turn in conversation(3):
            _commit(sidecar, turn.key, "s-main", MAIN, turn.messages)
        newest = int(sidecar.db.reader().execute("SELECT max(id) FROM messages").fetchone()[0])
        gone = forgetting.run(sidecar.db, None, tmp_path / "archive", Selector(ids=(newest - 1, newest)),
                          dry_run=False)  # fmt: skip
        assert gone.removed == 2
        source = Side(sidecar.db, sqlite_transfer)
        options = sidecar.capture_options

        into_postgres = Side(store, pg_transfer)
        assert copy_store(source, into_postgres, options).mismatches() == []
        back_into_sqlite = copy_store(into_postgres, empty_lite, options)
        assert back_into_sqlite.mismatches() == []
    finally:
        sidecar.close()

    _, [on_postgres] = pg_commit(store, "after-copy", [said("Stored after the copy.")], session_id="s-main")
    assert on_postgres == newest + 1
    _, [on_sqlite] = empty_lite.db.write(
        lambda conn: sqlite_messages.commit_turn(
            conn, sqlite_sessions.ensure_session(conn, "s-main", MAIN), "after-copy",
            turn_identities([said("Stored after the copy.")], "after-copy"), heartbeat=False,
        )
    )  # fmt: skip
    assert on_sqlite == newest + 1
