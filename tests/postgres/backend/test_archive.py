"""Archiving on PostgreSQL: the oldest messages go to a readable gzip archive holding exactly what was removed,
the store then counts as under its limit (no second archiving of what is left), and two sidecars pruning at
once never archive a message twice."""

from __future__ import annotations

import gzip
import json
import threading
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from openclaw_lossless.store.model.archive import Pruned, WouldPrune
from openclaw_lossless.store.postgres import archive, messages
from openclaw_lossless.store.postgres.connection import Database
from openclaw_lossless.store.postgres.transfer.restore import restore_jsonl as pg_import
from openclaw_lossless.store.sqlite import migrations as sqlite_migrations
from openclaw_lossless.store.sqlite.connection import Database as SqliteDatabase
from openclaw_lossless.store.sqlite.transfer import restore_jsonl
from tests.postgres.backend import workers
from tests.postgres.backend.conftest import Place
from tests.postgres.backend.multiprocess import run_together
from tests.postgres.backend.test_messages import MAY_8_2023, OPTIONS, commit, said
from tests.postgres.backend.workers import Report

MB = 1024 * 1024
TURNS = 60
PER_TURN = 2


def fill(db: Database, turns: int = TURNS, start: int = 0) -> None:
    """Turns of ~1 KB messages, each text its own, spread over two sessions."""
    for n in range(start, start + turns):
        records = [said(f"turn {n} part {p}: " + f"word{n}x{p} " * 100, at=MAY_8_2023 + n) for p in range(PER_TURN)]
        commit(db, f"k{n}", records, session_id=f"s{n % 2}")


def stored_ids(db: Database) -> list[int]:
    return [int(row[0]) for row in db.reader().execute("SELECT id FROM messages ORDER BY id")]


def lines(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def half_way(db: Database, empty: int) -> float:
    """A limit in MB between the empty store's size and its size now: some messages must go, not all."""
    return (empty + (archive.used_bytes(db.reader()) - empty) / 2) / MB


def test_the_oldest_messages_go_to_a_readable_archive_holding_exactly_them(store: Database, tmp_path: Path) -> None:
    empty = archive.used_bytes(store.reader())
    fill(store)
    before = stored_ids(store)
    texts = messages.texts(store.reader(), before)
    limit = half_way(store, empty)

    would = archive.prune(store, tmp_path / "archive", limit, dry_run=True)
    assert isinstance(would, WouldPrune) and 0 < would.pruned < len(before)
    assert stored_ids(store) == before and not (tmp_path / "archive").exists()  # a dry run changes nothing

    told: list[int] = []
    done = archive.prune(store, tmp_path / "archive", limit, progress=told.append)

    assert isinstance(done, Pruned) and done.skipped is None
    assert sum(told) == done.pruned  # the CLI's bar: one per message written
    after = stored_ids(store)
    removed = sorted(set(before) - set(after))
    assert removed == before[: len(removed)] and 0 < len(removed) < len(before)  # the oldest, and not all
    archived = [line for path in done.archives for line in lines(Path(path))]
    assert [line["id"] for line in archived] == removed == list(range(removed[0], removed[-1] + 1))
    assert all(line["text"] == texts[line["id"]] and line["message"]["content"] == line["text"] for line in archived)
    assert done.pruned == len(removed) and done.last_message_id == removed[-1]
    assert messages.fetch(store.reader(), removed) == {}  # gone from reads
    assert stored_ids(store) == after
    recorded = store.reader().execute(
        "SELECT path, first_message_id, last_message_id, message_count FROM archives ORDER BY id"
    )
    rows = [(str(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in recorded]
    assert [r[0] for r in rows] == done.archives and sum(r[3] for r in rows) == len(removed)
    assert {oct(Path(p).stat().st_mode & 0o777) for p in done.archives} == {"0o600"}
    assert archive.used_bytes(store.reader()) <= limit * MB


def test_after_an_archiving_the_store_counts_as_under_its_limit_until_it_grows(store: Database, tmp_path: Path) -> None:
    """PostgreSQL keeps a table's files at their size after a delete: measured by that alone, every later check
    would archive again until nothing was left."""
    empty = archive.used_bytes(store.reader())
    fill(store)
    limit = half_way(store, empty)
    first = archive.prune(store, tmp_path / "archive", limit)
    left = stored_ids(store)

    again = archive.prune(store, tmp_path / "archive", limit)

    assert isinstance(first, Pruned) and first.pruned > 0
    assert again == Pruned(0, [], None) and stored_ids(store) == left
    fill(store, turns=TURNS, start=TURNS)  # as many again: over the limit once more
    grown = archive.prune(store, tmp_path / "archive", limit)
    assert isinstance(grown, Pruned) and grown.pruned > 0
    assert stored_ids(store)[0] == (grown.last_message_id or 0) + 1


def test_an_archive_imports_back_as_the_messages_it_holds(store: Database, tmp_path: Path) -> None:
    empty = archive.used_bytes(store.reader())
    fill(store)
    done = archive.prune(store, tmp_path / "archive", half_way(store, empty))
    assert isinstance(done, Pruned) and done.pruned > 0
    lite = SqliteDatabase(tmp_path / "lossless.sqlite")
    try:
        sqlite_migrations.migrate(lite)
        report = restore_jsonl(lite, Path(done.archives[0]), OPTIONS)
        held = dict(lite.reader().execute("SELECT id, text FROM messages").fetchall())
    finally:
        lite.close()

    assert report.imported == report.read == len(lines(Path(done.archives[0]))) and report.malformed == 0
    assert held == {line["id"]: line["text"] for line in lines(Path(done.archives[0]))}


def test_a_sidecar_that_cannot_take_the_lock_skips_the_round_and_says_so(store: Database, tmp_path: Path) -> None:
    empty = archive.used_bytes(store.reader())
    fill(store)
    before = stored_ids(store)
    limit = half_way(store, empty)

    with archive.store_lock(store, wait=False) as taken:  # another sidecar archiving (or forgetting) now
        skipped = archive.prune(store, tmp_path / "archive", limit)
    untouched, written = stored_ids(store), (tmp_path / "archive").exists()
    after_release = archive.prune(store, tmp_path / "archive", limit)

    assert taken
    assert isinstance(skipped, Pruned) and skipped.pruned == 0 and "skipped" in (skipped.skipped or "")
    assert untouched == before and not written
    assert isinstance(after_release, Pruned) and after_release.skipped is None
    assert after_release.pruned > 0 and len(stored_ids(store)) < len(before)


def test_two_sidecars_pruning_at_once_never_archive_a_message_twice(
    place: Place, store: Database, tmp_path: Path
) -> None:
    empty = archive.used_bytes(store.reader())
    fill(store)
    before = stored_ids(store)
    limit = half_way(store, empty)
    sidecars = [Database(place.url, schema=place.schema, write_pool_size=2, read_pool_size=2) for _ in range(2)]
    start = threading.Barrier(len(sidecars))
    results: dict[int, Pruned | WouldPrune | BaseException] = {}

    def run(n: int) -> None:
        try:
            start.wait(10)
            results[n] = archive.prune(sidecars[n], tmp_path / f"sidecar-{n}", limit)
        except BaseException as exc:  # reported below
            results[n] = exc

    threads = [threading.Thread(target=run, args=(n,)) for n in range(len(sidecars))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        for db in sidecars:
            db.close()

    assert all(isinstance(result, Pruned) for result in results.values()), results
    archived = [
        line["id"]
        for result in results.values()
        if isinstance(result, Pruned)
        for path in result.archives
        for line in lines(Path(path))
    ]
    assert len(archived) == len(set(archived)) > 0  # never twice
    assert sorted(archived) == sorted(set(before) - set(stored_ids(store)))  # and exactly what was removed
    files = sorted(p.name for n in range(len(sidecars)) for p in (tmp_path / f"sidecar-{n}").glob("*"))
    assert len(files) == sum(len(r.archives) for r in results.values() if isinstance(r, Pruned))  # no stray file


def prune_as_sidecar(
    name: str, url: str, schema: str, folder: str, limit: float, start: Barrier, results: Queue[Report]
) -> None:
    """One sidecar process: a pool of its own, pruning into its own state dir the moment all are ready."""
    db = Database(url, schema=schema, write_pool_size=2, read_pool_size=2)
    try:
        start.wait()
        workers.run(name, lambda: archive.prune(db, Path(folder) / name, limit), results)
    finally:
        db.close()


def test_three_sidecar_processes_pruning_at_once_archive_each_message_once(
    place: Place, store: Database, tmp_path: Path
) -> None:
    empty = archive.used_bytes(store.reader())
    fill(store)
    before = stored_ids(store)
    limit = half_way(store, empty)

    reports = run_together(prune_as_sidecar, [(place.url, place.schema, str(tmp_path), limit)] * 3)

    assert all(isinstance(report, Pruned) for report in reports.values()), reports
    archived = [line["id"] for report in reports.values() for path in report.archives for line in lines(Path(path))]
    assert len(archived) == len(set(archived)) > 0
    assert sorted(archived) == sorted(set(before) - set(stored_ids(store)))
    assert sum(report.skipped is not None or report.pruned == 0 for report in reports.values()) == 2


def test_archived_messages_keep_their_identity_so_a_replay_stores_none_of_them(store: Database, tmp_path: Path) -> None:
    """Their rows go to the archive, their session and content hash stay (no text): a commit of the same messages
    under another key stores nothing, and importing the archive back restores them and drops the identities."""
    empty = archive.used_bytes(store.reader())
    fill(store)
    done = archive.prune(store, tmp_path / "archive", half_way(store, empty))
    assert isinstance(done, Pruned) and done.pruned > 0
    archived = [line for path in done.archives for line in lines(Path(path))]
    kept = store.reader().execute("SELECT content_hash, message_id FROM archived ORDER BY message_id").fetchall()
    assert [(bytes(h).hex(), int(i)) for h, i in kept] == [(line["contentHash"], line["id"]) for line in archived]

    n = 0  # turn 0's messages, the oldest: archived
    records = [said(f"turn {n} part {p}: " + f"word{n}x{p} " * 100, at=MAY_8_2023 + n) for p in range(PER_TURN)]
    status, stored = commit(store, "k0-retold", records, session_id="s0")
    assert status == "committed" and stored == []
    assert messages.count(store.reader()) == TURNS * PER_TURN - done.pruned

    for path in done.archives:
        pg_import(store, Path(path), OPTIONS)
    assert messages.count(store.reader()) == TURNS * PER_TURN
    assert store.reader().execute("SELECT count(*) FROM archived").fetchone() == (0,)
