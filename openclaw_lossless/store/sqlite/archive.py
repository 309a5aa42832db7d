"""Archiving: how the store stays under ``maxDbSizeMb`` without losing anything.

When the database outgrows its limit, its oldest messages are first written, with their full original
objects and metadata, to a gzip-compressed JSONL file next to the database (fsynced), and only then removed
from the hot store in one transaction. The archive is a normal export (``store/sqlite/transfer/``): ``import --jsonl``
brings it back.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openclaw_lossless.store.sqlite import vectors
from openclaw_lossless.store.sqlite.connection import Connection, Database
from openclaw_lossless.store.sqlite.forgetting import write_gzip
from openclaw_lossless.store.sqlite.messages import keep_ids_given
from openclaw_lossless.store.sqlite.transfer import export_records
from openclaw_lossless.store.statements import archived

log = logging.getLogger(__name__)
HEADROOM = 0.9  # prune down to 90% of the limit, so we do not prune again on the next commit
MAX_ROUNDS = 4
VECTOR_SLICE = 500  # vectors deleted per transaction while archiving, then commits run (docs/decisions/0008)


@dataclass(frozen=True)
class PrunePlan:
    used_bytes: int
    limit_bytes: int
    message_count: int
    last_message_id: int | None


@dataclass(frozen=True)
class Pruned:
    """What an archiving did: the messages it removed, the archive files it wrote, the newest id they hold."""

    pruned: int
    archives: list[str]
    last_message_id: int | None
    skipped: str | None = None  # why nothing was archived this round (PostgreSQL: another sidecar was at it)


@dataclass(frozen=True)
class WouldPrune:
    """What an archiving would do (a dry run): the messages it would archive, the bytes the store uses now."""

    pruned: int
    used_bytes: int


def used_bytes(conn: Connection) -> int:
    """Bytes of the database holding data (free pages excluded, so deleting shows up at once)."""
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    return int(page_size * (pages - free))


def plan(conn: Connection, limit_mb: float) -> PrunePlan | None:
    """How many of the oldest messages must go to get under the limit (None when under it or disabled)."""
    return plan_with(
        limit_mb,
        lambda: used_bytes(conn),
        lambda: int(conn.execute("SELECT count(*) FROM messages").fetchone()[0]),
        lambda n: conn.execute("SELECT id FROM messages ORDER BY id LIMIT 1 OFFSET ?", (n - 1,)).fetchone(),
    )


def plan_with(
    limit_mb: float, used: Callable[[], int], total: Callable[[], int], nth: Callable[[int], Sequence[Any] | None]
) -> PrunePlan | None:
    """The prune's arithmetic, asking the store only what it needs: ``used`` (its measure of bytes in use),
    ``total`` (its messages) and ``nth`` (the row of the n-th oldest message's id). Both backends plan by it,
    so they archive the same share of a store over its limit, each by its own measure of what is used."""
    if limit_mb <= 0:
        return None
    limit, in_use = int(limit_mb * 1024 * 1024), used()
    if in_use <= limit:
        return None
    messages = total()
    if messages == 0:
        return None
    count = min(messages, max(1, int((in_use - limit * HEADROOM) / (in_use / messages)) + 1))
    row = nth(count)
    return PrunePlan(in_use, limit, count, None if row is None else int(row[0]))


def first_look(todo: PrunePlan | None, *, dry_run: bool) -> Pruned | WouldPrune | None:
    """What a prune answers before archiving anything (nothing to do, or a dry run's count), or None to go on;
    one answer for both backends."""
    if todo is None or todo.last_message_id is None:
        return Pruned(0, [], None)
    if dry_run:
        return WouldPrune(todo.message_count, todo.used_bytes)
    return None


def prune(
    db: Database,
    archive_dir: Path,
    limit_mb: float,
    *,
    dry_run: bool = False,
    progress: Callable[[int], object] | None = None,
) -> Pruned | WouldPrune:
    """Archive then remove the oldest messages until the store is under ``limit_mb``.

    ``progress`` is told of every message written to an archive (the CLI's bar; archiving a large store takes
    minutes).
    """
    todo = plan(db.reader(), limit_mb)
    answer = first_look(todo, dry_run=dry_run)
    if answer is not None:
        return answer
    assert todo is not None, "first_look answers for no plan"
    pruned, paths = 0, []
    for _ in range(MAX_ROUNDS):  # the per-message estimate includes fixed overhead: a second round may be needed
        last_id = todo.last_message_id or 0
        path = _write_archive(db.reader(), archive_dir, last_id, progress)
        while db.write(functools.partial(vectors.delete_through, last_id=last_id, limit=VECTOR_SLICE)):
            pass  # vectors first, a slice per transaction: commits go on between slices (``vectors.delete_through``)
        pruned += db.write(functools.partial(_remove, path=path, last_id=last_id))
        paths.append(str(path))
        _reclaim(db)
        todo = plan(db.reader(), limit_mb)
        if todo is None or todo.last_message_id is None:
            break
    return Pruned(pruned, paths, last_id)


def _reclaim(db: Database) -> None:
    """Give deleted pages back: merge FTS segments (drops deleted entries), then free the pages."""
    db.write(lambda conn: conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')"))
    with db.writer() as conn:
        conn.execute("PRAGMA incremental_vacuum")


def _write_archive(
    conn: Connection, archive_dir: Path, last_id: int, progress: Callable[[int], object] | None = None
) -> Path:
    path, _ = write_archive(archive_dir, last_id, export_records(conn, "m.id <= ?", (last_id,)), progress)
    return path


def write_archive(
    archive_dir: Path, last_id: int, records: Iterable[dict[str, Any]], progress: Callable[[int], object] | None
) -> tuple[Path, list[int]]:
    """Write the records (message export lines) to a new archive in ``archive_dir`` (0700), named by the time
    and ``last_id``, 0600, fsynced and renamed into place (``forget.write_gzip``); returns its path and the ids
    written. ``progress`` is told of each line. Both backends write their archives here, so the files' names,
    lines and durability are one definition; an archive not finished is no archive: nothing is removed for it.
    """
    archive_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(archive_dir, 0o700)
    path = archive_dir / f"messages-{time.strftime('%Y%m%dT%H%M%S')}-{last_id}.jsonl.gz"
    written: list[int] = []

    def lines() -> Iterator[bytes]:
        for record in records:
            yield json.dumps(record, ensure_ascii=False).encode() + b"\n"
            written.append(int(record["id"]))  # runs once the line is written (the writer asks for the next)
            if progress is not None:
                progress(1)

    write_gzip(path, lines(), path.with_suffix(".partial"))
    return path, written


def _remove(conn: Connection, path: Path, last_id: int) -> int:
    first = conn.execute("SELECT min(id) FROM messages").fetchone()[0]
    keep_ids_given(conn, [last_id])  # an archived message keeps its citation (the archive file holds it)
    vectors.delete_through(conn, last_id)  # any a slice left (embedded since): none in the common case
    conn.execute("DELETE FROM embedding_backlog WHERE message_id <= ?", (last_id,))
    conn.execute(  # what catch-up, ingest and replays skip: the identity goes on without the row (m012)
        "INSERT OR IGNORE INTO archived (session_rowid, content_hash, message_id)"
        " SELECT session_rowid, content_hash, id FROM messages WHERE id <= ? AND kind <> 'memory'",
        (last_id,),
    )
    removed = int(conn.execute("DELETE FROM messages WHERE id <= ?", (last_id,)).rowcount)
    conn.execute(
        "INSERT INTO archives (path, created_at, first_message_id, last_message_id, message_count)"
        " VALUES (?, ?, ?, ?, ?)",
        (str(path), time.time(), first, last_id, removed),
    )
    return removed


def keep_identities_of_archives(conn: Connection) -> int:
    """Keep the identity of every message the recorded archives hold (``archived``: session and content hash),
    read from the files; returns how many lines named one. For a store whose rows were copied without that
    table (``salvage``): the archives are where those identities are written. An archive that cannot be read is
    logged and left out."""
    named = 0
    for (path,) in conn.execute("SELECT DISTINCT path FROM archives ORDER BY path").fetchall():
        found = list(archived.identities(Path(str(path)), "salvage"))
        conn.executemany(
            "INSERT OR IGNORE INTO archived (session_rowid, content_hash, message_id)"
            " SELECT id, ?, ? FROM sessions WHERE session_id = ?",
            found,
        )
        named += len(found)
    return named
