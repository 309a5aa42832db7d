"""Archiving: how the store stays under ``maxDbSizeMb`` without losing anything.

When the database outgrows its limit, its oldest messages are first written, with their full original
objects and metadata, to a gzip-compressed JSONL file next to the database (fsynced), and only then removed
from the hot store in one transaction. The archive is a normal export (``store/sqlite/transfer/``): ``import --jsonl``
brings it back.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from pathlib import Path

from openclaw_lossless.store.model.archive import (
    MAX_ROUNDS,
    Pruned,
    PrunePlan,
    WouldPrune,
    first_look,
    plan_with,
    write_archive,
)
from openclaw_lossless.store.sqlite import vectors
from openclaw_lossless.store.sqlite.connection import Connection, Database
from openclaw_lossless.store.sqlite.messages import keep_ids_given
from openclaw_lossless.store.statements import archived
from openclaw_lossless.store.statements.transfer.export import export_records

log = logging.getLogger(__name__)
VECTOR_SLICE = 500  # vectors deleted per transaction while archiving, then commits run (docs/decisions/0008)


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
