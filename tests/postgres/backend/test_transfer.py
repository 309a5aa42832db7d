"""Export and import on PostgreSQL give what they give on SQLite: a store exported from SQLite, imported into
PostgreSQL and exported again is the same file to the byte (and back), tombstones, compactions, snapshots and
subagent links included; an import into a store with its own history moves ids exactly as SQLite's does."""

from __future__ import annotations

import contextlib
import gzip
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg import errors as pgerrors

from openclaw_lossless.capture.records import CaptureOptions, MessageRecord, capture
from openclaw_lossless.capture.redact import Redactor
from openclaw_lossless.errors import BadRequest
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.model.forgetting import Selector
from openclaw_lossless.store.model.messages import turn_identities
from openclaw_lossless.store.model.snapshots import CompactionRecord
from openclaw_lossless.store.model.transfer.export import ExportScope
from openclaw_lossless.store.model.transfer.restore import RestoreReport, Unreadable
from openclaw_lossless.store.postgres import messages, sessions
from openclaw_lossless.store.postgres import transfer as pg_transfer
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.sqlite import forgetting
from openclaw_lossless.store.sqlite import migrations as sqlite_migrations
from openclaw_lossless.store.sqlite import transfer as sqlite_transfer
from openclaw_lossless.store.sqlite.connection import Database as SqliteDatabase
from tests.conversation import conversation
from tests.helpers import make_settings
from tests.postgres.backend.conftest import Place

MAIN, CHILD, OPS = "agent:main:main", "agent:main:subagent:7", "agent:ops:main"
WHOLE = ExportScope()
SECRET = "sk-proj-" + "Q7w9E2r4T6y8U0i1O3p5A7s9D1f3G5h7J9k"


def _commit(sidecar: Sidecar, key: str, session: str, session_key: str, turn: list[dict[str, Any]]) -> None:
    sidecar.ingest.commit_turn(key, session, session_key, turn, heartbeat=False, recall=sidecar.settings.recall)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CaptureOptions]:
    return fill(tmp_path_factory.mktemp("pg-transfer") / "state")


def fill(state: Path) -> tuple[Path, CaptureOptions]:
    """A SQLite store holding every kind of line, written through the sidecar's hook methods: two agents, a
    pasted key, a heartbeat turn, a compaction with its automatic snapshot and a manual snapshot, a finished
    subagent whose outcome reached the parent and a running one, and a forgotten message (a tombstone).
    Returns the store's file and the capture options its sidecar used."""
    sidecar = Sidecar(make_settings(state, embedding_provider="none"), start_worker=False)
    try:
        early = conversation(4)
        for turn in early:
            _commit(sidecar, turn.key, "s-main", MAIN, turn.messages)
        _commit(sidecar, "s-main:key", "s-main", MAIN, [{"role": "user", "content": f"deploy key {SECRET}"}])
        sidecar.ingest.commit_turn(
            "s-main:beat", "s-main", MAIN, [{"role": "user", "content": "ping"}], heartbeat=True,
            recall=sidecar.settings.recall,
        )  # fmt: skip
        sidecar.ingest.compact("s-main", MAIN, CompactionRecord(5000, 1200, True, "the first turns", "size"))
        for turn in conversation(3, session="s-main-late", seed=5):
            _commit(sidecar, turn.key, "s-main", MAIN, turn.messages)
        sidecar.ingest.snapshot_create("before-refactor", "s-main")
        sidecar.ingest.subagent_spawn(MAIN, CHILD, "isolated")
        child: list[dict[str, Any]] = [
            {"role": "user", "content": "Find the region of the audit bucket."},
            {"role": "assistant", "content": [{"type": "text", "text": "The audit bucket is in eu-north-1."}]},
        ]
        _commit(sidecar, "child:1", "s-child", CHILD, child)
        assert sidecar.ingest.subagent_ended(CHILD, "completed").outcomes_copied == 1
        sidecar.ingest.subagent_spawn(MAIN, "agent:main:subagent:8", None)
        for turn in conversation(2, session="s-ops", seed=9):
            _commit(sidecar, turn.key, "s-ops", OPS, turn.messages)
        forgotten = forgetting.run(sidecar.db, None, state / "archive", Selector(ids=(3,)), dry_run=False)
        assert forgotten.removed == 1
        return state / "lossless.sqlite", sidecar.capture_options
    finally:
        sidecar.close()


@pytest.fixture
def lite(tmp_path: Path) -> Iterator[SqliteDatabase]:
    """An empty SQLite store, to compare with the PostgreSQL one doing the same."""
    with empty_sqlite(tmp_path / "lite" / "lossless.sqlite") as db:
        yield db


@contextlib.contextmanager
def empty_sqlite(path: Path) -> Iterator[SqliteDatabase]:
    db = SqliteDatabase(path)
    try:
        sqlite_migrations.migrate(db)
        yield db
    finally:
        db.close()


def export_sqlite(path: Path, out: Path, scope: ExportScope = WHOLE) -> bytes:
    db = SqliteDatabase(path)
    try:
        return export_lite(db, out, scope)
    finally:
        db.close()


def export_lite(db: SqliteDatabase, out: Path, scope: ExportScope = WHOLE) -> bytes:
    with out.open("w") as handle:
        sqlite_transfer.write_jsonl(sqlite_transfer.export_store(db.reader(), scope), handle)
    return out.read_bytes()


def export_pg(db: Database, out: Path, scope: ExportScope = WHOLE) -> bytes:
    with out.open("w") as handle:
        pg_transfer.write_jsonl(pg_transfer.export_store(db.reader(), scope), handle)
    return out.read_bytes()


def types(data: bytes) -> dict[str, int]:
    found: dict[str, int] = {}
    for line in data.splitlines():
        kind = json.loads(line).get("type", "message")
        found[kind] = found.get(kind, 0) + 1
    return found


def test_sqlite_to_postgresql_and_back_gives_the_same_file(
    source: tuple[Path, CaptureOptions], store: Database, lite: SqliteDatabase, tmp_path: Path
) -> None:
    path, options = source
    first = export_sqlite(path, tmp_path / "first.jsonl")
    kinds = types(first)
    assert {k: kinds.get(k) for k in ("session", "compaction", "snapshot", "subagentLink", "forgotten")} == {
        "session": 4, "compaction": 1, "snapshot": 2, "subagentLink": 2, "forgotten": 1,
    }  # fmt: skip

    report = pg_transfer.restore_jsonl(store, tmp_path / "first.jsonl", options)
    assert (report.read, report.malformed, report.conflicts, report.already_present) == (sum(kinds.values()), 0, 0, 0)
    assert (report.imported, report.sessions, report.turns) == (kinds["message"], 4, kinds["turn"])
    assert (report.compactions, report.snapshots, report.subagent_links, report.tombstones) == (1, 2, 2, 1)
    assert export_pg(store, tmp_path / "pg.jsonl") == first

    again = pg_transfer.restore_jsonl(store, tmp_path / "first.jsonl", options)
    assert again.already_present == report.read and again.imported == again.tombstones == again.turns == 0
    assert export_pg(store, tmp_path / "pg-again.jsonl") == first

    back = sqlite_transfer.restore_jsonl(lite, tmp_path / "pg.jsonl", options)
    assert back.imported == report.imported and back.malformed == 0
    assert export_lite(lite, tmp_path / "back.jsonl") == first


def test_a_scoped_export_gives_the_same_lines_from_either_backend(
    source: tuple[Path, CaptureOptions], store: Database, tmp_path: Path
) -> None:
    path, options = source
    pg_transfer.restore_jsonl(
        store, Path(_written(tmp_path / "all.jsonl", export_sqlite(path, tmp_path / "a"))), options
    )
    for scope in (ExportScope(agent="ops"), ExportScope(session="s-child"), ExportScope("main", "s-main")):
        lines = export_sqlite(path, tmp_path / "lite.jsonl", scope)
        assert lines and export_pg(store, tmp_path / "pg.jsonl", scope) == lines, scope
    for scope in (ExportScope(agent="nobody"), ExportScope(session="s-none"), ExportScope("ops", "s-main")):
        with pytest.raises(BadRequest) as on_pg:
            pg_transfer.check_scope(store.reader(), scope)
        lite_db = SqliteDatabase(path)
        try:
            with pytest.raises(BadRequest) as on_lite:
                sqlite_transfer.check_scope(lite_db.reader(), scope)
        finally:
            lite_db.close()
        assert on_pg.value.message == on_lite.value.message


def _written(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_an_import_into_a_store_with_its_own_history_moves_ids_as_sqlite_does(
    source: tuple[Path, CaptureOptions], store: Database, lite: SqliteDatabase, tmp_path: Path
) -> None:
    """Both targets first hold another store's history (message 1, compaction 1, pre-compaction-1 are taken),
    then take the same file: the two stores export the same lines, pointers following the moved ids."""
    other_state = tmp_path / "other"
    sidecar = Sidecar(make_settings(other_state, embedding_provider="none"), start_worker=False)
    try:
        for turn in conversation(2, session="s-other", seed=11):
            _commit(sidecar, turn.key, "s-other", "agent:main:other", turn.messages)
        sidecar.ingest.compact("s-other", "agent:main:other", CompactionRecord(900, 100, True, "other", None))
        options = sidecar.capture_options
    finally:
        sidecar.close()
    other = _written(tmp_path / "other.jsonl", export_sqlite(other_state / "lossless.sqlite", tmp_path / "o"))
    full = _written(tmp_path / "full.jsonl", export_sqlite(source[0], tmp_path / "f"))

    reports: list[RestoreReport] = []
    for file in (other, full, full):
        reports.append(pg_transfer.restore_jsonl(store, file, options))
        assert sqlite_transfer.restore_jsonl(lite, file, options) == reports[-1], file
    assert (reports[1].compactions, reports[1].snapshots, reports[1].conflicts, reports[1].malformed) == (1, 2, 0, 0)
    assert reports[2].already_present == reports[2].read
    merged = export_lite(lite, tmp_path / "lite.jsonl")
    assert export_pg(store, tmp_path / "pg.jsonl") == merged
    names = [json.loads(line).get("name") for line in merged.splitlines() if b'"snapshot"' in line]
    assert names == ["pre-compaction-1", "pre-compaction-2", "before-refactor"]


def test_ids_kept_from_a_file_are_never_drawn_again_by_a_commit(
    source: tuple[Path, CaptureOptions], store: Database, tmp_path: Path
) -> None:
    path, options = source
    imported = pg_transfer.restore_jsonl(
        store, _written(tmp_path / "f.jsonl", export_sqlite(path, tmp_path / "x")), options
    )
    highest = _scalar(store, "SELECT max(id) FROM messages")

    def commit(conn: Connection) -> tuple[str, list[int]]:
        session = sessions.ensure_session(conn, "s-new", "agent:main:new")
        records = turn_identities([_said("a message after the import", options)], "s-new:1")
        return messages.commit_turn(conn, session, "s-new:1", records, heartbeat=False)

    status, ids = store.write(commit)
    assert status == "committed" and ids == [highest + 1]
    assert _scalar(store, "SELECT count(*) FROM messages") == imported.imported + 1


def _said(text: str, options: CaptureOptions) -> MessageRecord:
    return capture({"role": "user", "content": text}, options)


def _scalar(db: Database, query: str) -> int:
    row = db.reader().execute(query).fetchone()
    assert row is not None
    return int(row[0])


class FlakyDatabase(Database):
    """A store whose first write fails at its end as a serialisation failure would (the server rolls the
    whole transaction back), so ``write`` runs the batch again."""

    failures = 1

    def write(self, work: Any) -> Any:
        def failing(conn: Connection) -> Any:
            result = work(conn)
            if self.failures:
                self.failures -= 1
                raise pgerrors.SerializationFailure("could not serialize access (injected)")
            return result

        return super().write(failing)


def test_a_batch_run_again_after_a_serialisation_failure_counts_once(
    source: tuple[Path, CaptureOptions], place: Place, store: Database, tmp_path: Path
) -> None:
    path, options = source
    first = _written(tmp_path / "f.jsonl", export_sqlite(path, tmp_path / "x"))
    flaky = FlakyDatabase(place.url, schema=place.schema, write_pool_size=2, read_pool_size=2)
    try:
        report = pg_transfer.restore_jsonl(flaky, first, options)
    finally:
        flaky.close()
    kinds = types(first.read_bytes())
    assert flaky.failures == 0 and report.read == sum(kinds.values())
    assert (report.imported, report.turns, report.sessions) == (kinds["message"], kinds["turn"], kinds["session"])
    assert report.already_present == report.malformed == 0
    assert export_pg(store, tmp_path / "pg.jsonl") == first.read_bytes()


def test_bad_lines_cost_only_themselves_as_on_sqlite(
    source: tuple[Path, CaptureOptions], store: Database, lite: SqliteDatabase, tmp_path: Path
) -> None:
    path, options = source
    good = export_sqlite(path, tmp_path / "x").splitlines()
    message = json.loads(good[0])
    bad = [
        b"not json",
        b"[1, 2]",
        b"\xff\xfe",
        json.dumps({**message, "id": 0}).encode(),
        json.dumps({"type": "snapshot", "id": 1, "name": "", "sessionId": "s-main", "createdAt": 1.0,
                    "automatic": False}).encode(),
        json.dumps({"type": "compaction", "id": 9, "sessionId": "s-main", "recordedAt": 1.0, "compacted": True,
                    "status": "exploded"}).encode(),
    ]  # fmt: skip
    mixed = _written(tmp_path / "mixed.jsonl", b"\n".join([*bad[:3], *good[:4], *bad[3:], *good[4:]]) + b"\n")
    on_pg = pg_transfer.restore_jsonl(store, mixed, options)
    assert on_pg == sqlite_transfer.restore_jsonl(lite, mixed, options)
    assert (on_pg.read, on_pg.malformed) == (len(good) + len(bad), len(bad))
    # the same messages; their sessions carry the time of each import (their own lines were cut off)
    pg, sqlite = export_pg(store, tmp_path / "pg.jsonl"), export_lite(lite, tmp_path / "lite.jsonl")
    assert [m for m in pg.splitlines() if b'"type"' not in m] == [m for m in sqlite.splitlines() if b'"type"' not in m]


def test_free_text_holding_nul_is_stored_as_the_hooks_store_it(
    source: tuple[Path, CaptureOptions], store: Database, tmp_path: Path
) -> None:
    """A PostgreSQL text cannot hold NUL: a compaction's summary or a link's reason holding one is stored with
    U+FFFD, as the live hooks store it, not lost; importing the file again finds both present."""
    path, options = source
    lines = [json.loads(line) for line in export_sqlite(path, tmp_path / "x").splitlines()]
    for line in lines:
        if line.get("type") == "compaction":
            line["summary"] = "before\u0000after"
        if line.get("type") == "subagentLink" and line["endedAt"] is not None:
            line["endedReason"] = "done\u0000"
    file = _written(tmp_path / "nul.jsonl", "\n".join(json.dumps(line) for line in lines).encode() + b"\n")
    report = pg_transfer.restore_jsonl(store, file, options)
    assert (report.malformed, report.compactions, report.subagent_links) == (0, 1, 2)
    summary = store.reader().execute("SELECT summary FROM compactions").fetchone()
    reason = store.reader().execute("SELECT ended_reason FROM subagent_links WHERE ended_at IS NOT NULL").fetchone()
    assert (summary, reason) == (("before\ufffdafter",), ("done\ufffd",))
    again = pg_transfer.restore_jsonl(store, file, options)
    assert (again.already_present, again.conflicts) == (again.read, 0)


def test_a_line_the_server_refuses_costs_only_itself(
    source: tuple[Path, CaptureOptions], store: Database, tmp_path: Path
) -> None:
    """A line the checks pass but the server refuses (here a turn's message count beyond the ``integer`` column)
    is counted malformed; the batch is written again line by line and every other line of it is stored."""
    path, options = source
    good = export_sqlite(path, tmp_path / "x").splitlines()
    turn = next(json.loads(line) for line in good if b'"type": "turn"' in line)
    refused = {**turn, "advancementKey": "refused-turn", "messageCount": 2**40}
    file = _written(tmp_path / "refused.jsonl", b"\n".join([*good, json.dumps(refused).encode()]) + b"\n")
    report = pg_transfer.restore_jsonl(store, file, options)
    assert report.malformed == 1 and report.read == len(good) + 1
    assert report.imported == types(b"\n".join(good))["message"] and report.turns == types(b"\n".join(good))["turn"]
    assert export_pg(store, tmp_path / "pg.jsonl") == b"\n".join(good) + b"\n"


def test_a_missing_file_is_refused(store: Database, tmp_path: Path) -> None:
    with pytest.raises(BadRequest, match="no such file"):
        pg_transfer.restore_jsonl(store, tmp_path / "absent.jsonl", CaptureOptions(redactor=Redactor(())))


def test_a_tombstone_imported_later_forgets_the_message_on_both_backends(
    source: tuple[Path, CaptureOptions], store: Database, lite: SqliteDatabase, tmp_path: Path
) -> None:
    path, options = source
    everything = _written(tmp_path / "all.jsonl", export_sqlite(path, tmp_path / "x"))
    victim = json.loads(everything.read_bytes().splitlines()[2])
    names = ("format", "sessionId", "contentHash", "windowKey")
    tombstone = {"type": "forgotten", "forgottenAt": 1.0, **{name: victim[name] for name in names}}
    forget_it = _written(tmp_path / "forgetting.jsonl", json.dumps(tombstone).encode() + b"\n")
    for file in (everything, forget_it, everything):  # the older file cannot bring it back
        assert pg_transfer.restore_jsonl(store, file, options) == sqlite_transfer.restore_jsonl(lite, file, options)
    assert _scalar(store, f"SELECT count(*) FROM messages WHERE id = {int(victim['id'])}") == 0
    # the same messages; their sessions carry the time of each import (their own lines were cut off)
    pg, sqlite = export_pg(store, tmp_path / "pg.jsonl"), export_lite(lite, tmp_path / "lite.jsonl")
    assert [m for m in pg.splitlines() if b'"type"' not in m] == [m for m in sqlite.splitlines() if b'"type"' not in m]


def test_turns_committed_while_an_import_runs_lose_nothing(
    source: tuple[Path, CaptureOptions], store: Database, tmp_path: Path
) -> None:
    """A sidecar keeps committing while the file is imported: every turn stores both its messages, whichever
    ids the import kept or moved, and the import stores every message of the file."""
    path, options = source
    everything = _written(tmp_path / "all.jsonl", export_sqlite(path, tmp_path / "x"))
    importing = threading.Event()
    results: list[tuple[str, list[int]]] = []

    def commit(n: int) -> tuple[str, list[int]]:
        def work(conn: Connection) -> tuple[str, list[int]]:
            session = sessions.ensure_session(conn, "s-live", "agent:main:live")
            key = f"live:{n}"
            pair = [_said(f"live turn {n} question", options), _said(f"live turn {n} answer", options)]
            said = turn_identities(pair, key)
            return messages.commit_turn(conn, session, key, said, heartbeat=False)

        return store.write(work)

    def keep_committing() -> None:
        n = 0
        while importing.is_set() or n < 10:
            results.append(commit(n))
            n += 1

    importing.set()
    sidecar = threading.Thread(target=keep_committing)
    sidecar.start()
    try:
        report = pg_transfer.restore_jsonl(store, everything, options)
    finally:
        importing.clear()
        sidecar.join()
    assert report.imported == types(everything.read_bytes())["message"] and report.malformed == 0
    assert all(status == "committed" and len(ids) == 2 for status, ids in results)
    assert _scalar(store, "SELECT count(*) FROM messages") == report.imported + 2 * len(results)


def test_a_damaged_gzip_keeps_the_lines_before_the_damage_as_on_sqlite(
    source: tuple[Path, CaptureOptions], store: Database, lite: SqliteDatabase, tmp_path: Path
) -> None:
    path, options = source
    whole = gzip.compress(export_sqlite(path, tmp_path / "x"))
    damaged = _written(tmp_path / "cut.jsonl.gz", whole[: len(whole) * 2 // 3])
    with pytest.raises(Unreadable) as on_pg:
        pg_transfer.restore_jsonl(store, damaged, options)
    with pytest.raises(Unreadable) as on_lite:
        sqlite_transfer.restore_jsonl(lite, damaged, options)
    assert on_pg.value.message == on_lite.value.message and "lines before it were imported" in on_pg.value.message
    assert 0 < _scalar(store, "SELECT count(*) FROM messages") < types(gzip.decompress(whole))["message"]
    # the same messages; their sessions carry the time of each import (their own lines were cut off)
    pg, sqlite = export_pg(store, tmp_path / "pg.jsonl"), export_lite(lite, tmp_path / "lite.jsonl")
    assert [m for m in pg.splitlines() if b'"type"' not in m] == [m for m in sqlite.splitlines() if b'"type"' not in m]
