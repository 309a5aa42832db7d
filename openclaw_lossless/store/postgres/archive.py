"""Archiving on PostgreSQL: the SQLite module's ``prune`` and ``used_bytes`` (``store/sqlite/archive.py``) for a
store several sidecars share.

The meaning is the SQLite module's: when the store outgrows ``maxDbSizeMb``, its oldest messages are first
written, with their full original objects and metadata, to a gzip-compressed JSONL file under the pruning
sidecar's own ``archive_dir`` (fsynced, then renamed into place), and only then removed from the store in one
transaction, which also records the file in the ``archives`` table, so every sidecar can list every archive.
Exactly the messages written are removed (by id, not by range: a message imported meanwhile under an old
id stays), and a file that no transaction removed anything for is deleted again, so no message is ever in
two archives. The archive is a normal export (``import --jsonl`` brings it back).

One at a time: a prune holds a session-level advisory lock on the store (its schema) on a connection of its
own, taken with ``pg_try_advisory_lock``; a sidecar that cannot take it skips the round and says so
(a ``Pruned`` of nothing with the reason in ``skipped``). A forget takes the same lock, waiting for it, so
a message is never archived by one sidecar while another forgets it (the tombstone could miss the archive).
A sidecar killed mid-prune loses the lock with its connection.

What counts toward ``maxDbSizeMb`` (``used_bytes``): every table of the store's schema with its indexes and
TOAST data (``pg_total_relation_size``), the space the store takes on the server's disk, as the SQLite file
does; less the space a prune or a forget freed that no message has taken again. PostgreSQL does not give
space back when rows are deleted: ``VACUUM`` (run after each round) makes it reusable by later rows, but
the files keep their size, so measured by the files alone the store would stay over its limit and every later
check would archive again. So a prune (and a forget) records the bytes per message before it (``meta``:
``archive.density``), and the space freed is counted until later messages take it again (why:
docs/decisions/0010).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import psycopg
from psycopg import errors as pgerrors
from psycopg import sql

from openclaw_lossless.errors import StoreUnavailable
from openclaw_lossless.store.model.archive import (
    MAX_ROUNDS,
    Pruned,
    PrunePlan,
    WouldPrune,
    first_look,
    plan_with,
    write_archive,
)
from openclaw_lossless.store.model.forgetting import write_gzip
from openclaw_lossless.store.postgres import messages, meta
from openclaw_lossless.store.postgres.connection import CONNECT_TIMEOUT_S, Connection, Database, translate_error
from openclaw_lossless.store.statements.transfer.export import export_records

__all__ = ["Pruned", "WouldPrune", "prune", "store_lock", "used_bytes"]

LOCK_CLASS = 0x6C6F7373  # "loss": the first key of the store's archive lock; the second is its schema's hash
DENSITY_KEY = "archive.density"
READ_SLICE = 500  # messages read per statement while writing an archive (memory stays bounded)
_TOUCHED = ("messages", "message_vectors", "message_days", "embedding_backlog")
LOCK_WAIT_S = 300.0  # a forget waits this long at most for a prune under way (it is refused, 503, after)
SKIPPED = "another sidecar is archiving or forgetting in this store: this round is skipped"


# -- one at a time ----------------------------------------------------------------------------------------------


@contextlib.contextmanager
def store_lock(db: Database, *, wait: bool) -> Iterator[bool]:
    """Hold the store's archive lock while the block runs; yields whether it was taken (always, with ``wait``,
    or ``StoreUnavailable`` after ``LOCK_WAIT_S``: a prune that long under way is worth a retry, not a hang).

    A session-level advisory lock on a connection of its own (the pools' connections go back to the pool and
    would carry it there); closing that connection releases it, also when the process dies.
    """
    try:
        conn = psycopg.connect(db.url, autocommit=True, connect_timeout=max(1, int(CONNECT_TIMEOUT_S)))
    except psycopg.Error as exc:
        raise translate_error(exc) from exc
    with conn:
        taken = _lock(conn, db.schema, wait=wait)
        try:
            yield taken
        finally:
            if taken and not conn.closed:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("SELECT pg_advisory_unlock(%s::int, hashtext(%s))", (LOCK_CLASS, db.schema))


def _lock(conn: Connection, schema: str, *, wait: bool) -> bool:
    key = (LOCK_CLASS, schema)
    try:
        if not wait:
            row = conn.execute("SELECT pg_try_advisory_lock(%s::int, hashtext(%s))", key).fetchone()
            return row is not None and bool(row[0])
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(f"{int(LOCK_WAIT_S * 1000)}ms")))
        conn.execute("SELECT pg_advisory_lock(%s::int, hashtext(%s))", key)
        return True
    except pgerrors.LockNotAvailable as exc:
        raise StoreUnavailable(
            f"another sidecar has been archiving or forgetting in this store for {LOCK_WAIT_S:.0f} s: retry later"
        ) from exc
    except psycopg.Error as exc:
        raise translate_error(exc) from exc


# -- how much is used -------------------------------------------------------------------------------------------


def store_bytes(conn: Connection) -> int:
    """Bytes the tables of the store's schema (the first of the search path) take, indexes and TOAST included."""
    row = conn.execute(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'"
    ).fetchone()
    return 0 if row is None else int(row[0])


def used_bytes(conn: Connection) -> int:
    """Bytes holding data now: the store's size less the space the last prune freed that no message has taken
    again yet (see the module's docstring)."""
    size = store_bytes(conn)
    density = _density(conn)
    if density is None:
        return size
    pruned_size, pruned_count, per_message = density
    freed = max(0.0, pruned_size - per_message * pruned_count)  # free after that prune, by its density
    reused = max(0, messages.count(conn) - pruned_count) * per_message  # taken again by the messages stored since
    return max(0, int(size - max(0.0, freed - reused)))


def _density(conn: Connection) -> tuple[int, int, float] | None:
    """(store size after the last prune or forget, messages then, bytes per message before it), or None."""
    value = meta.get(conn, DENSITY_KEY)
    try:
        recorded = json.loads(value) if value is not None else None
        if recorded is None:
            return None
        return int(recorded["bytes"]), int(recorded["messages"]), float(recorded["perMessage"])
    except (ValueError, KeyError, TypeError):
        return None


def plan(conn: Connection, limit_mb: float) -> PrunePlan | None:
    """How many of the oldest messages must go to get under the limit (None when under it or disabled); the
    SQLite module's arithmetic (``plan_with``), with this store's measure."""
    return plan_with(
        limit_mb,
        lambda: used_bytes(conn),
        lambda: messages.count(conn),
        lambda n: conn.execute("SELECT id FROM messages ORDER BY id LIMIT 1 OFFSET %s", (n - 1,)).fetchone(),
    )


# -- archiving --------------------------------------------------------------------------------------------------


def prune(
    db: Database,
    archive_dir: Path,
    limit_mb: float,
    *,
    dry_run: bool = False,
    progress: Callable[[int], object] | None = None,
) -> Pruned | WouldPrune:
    """Archive then remove the oldest messages until the store is under ``limit_mb``; one sidecar at a time.

    ``progress`` is told of every message written to an archive (the CLI's bar).
    """
    answer = first_look(plan(db.reader(), limit_mb), dry_run=dry_run)
    if answer is not None:
        return answer
    with store_lock(db, wait=False) as taken:
        if not taken:
            return Pruned(0, [], None, skipped=SKIPPED)
        return _rounds(db, archive_dir, limit_mb, progress)


def _rounds(db: Database, archive_dir: Path, limit_mb: float, progress: Callable[[int], object] | None) -> Pruned:
    """Under the lock: plan again (another sidecar may have just archived), then archive round by round."""
    pruned, paths, last_id = 0, list[str](), None
    for _ in range(MAX_ROUNDS):  # the per-message estimate includes fixed overhead: a second round may be needed
        todo = plan(db.reader(), limit_mb)
        if todo is None or todo.last_message_id is None:
            break
        per_message = bytes_per_message(db.reader())
        ids = _oldest(db.reader(), todo.last_message_id)
        path, written = _write_archive(db.reader(), archive_dir, ids, todo.last_message_id, progress)
        removed = _remove_or_discard(db, path, written)
        if removed:
            pruned, last_id = pruned + len(removed), max(removed)
            paths.append(str(path))
        _reclaim(db, per_message)
    return Pruned(pruned, paths, last_id)


def _oldest(conn: Connection, last_id: int) -> list[int]:
    return [int(row[0]) for row in conn.execute("SELECT id FROM messages WHERE id <= %s ORDER BY id", (last_id,))]


def _records(conn: Connection, ids: Sequence[int]) -> Iterator[dict[str, Any]]:
    """The messages' export lines, oldest first, a slice at a time.

    ``store/statements/transfer/export.py``'s ``export_records`` reads them: its statement is the same on both
    servers given a condition in this driver's parameter style (``store/postgres/transfer/export.py`` reads by the same
    statement, ``MESSAGES``), so the line format has one definition.
    """
    for start in range(0, len(ids), READ_SLICE):
        chunk = list(ids[start : start + READ_SLICE])
        yield from export_records(cast(Any, conn), "m.id = ANY(%s::bigint[])", (chunk,))


def _write_archive(
    conn: Connection,
    archive_dir: Path,
    ids: Sequence[int],
    last_id: int,
    progress: Callable[[int], object] | None,
) -> tuple[Path, list[int]]:
    """Write the messages still stored among ``ids`` to a new archive (0600, fsynced, renamed into place, the
    directory fsynced: the SQLite module's ``write_archive``); returns its path and the ids written."""
    return write_archive(archive_dir, last_id, _records(conn, ids), progress)


def _remove_or_discard(db: Database, path: Path, written: list[int]) -> list[int]:
    """Remove the archived messages and record the file; returns the ids removed. When the removal fails, the
    file goes too, unless the store recorded it (the commit landed, only its answer was lost): a message is
    never in two archives, nor gone without one."""
    if not written:
        path.unlink(missing_ok=True)
        return []
    try:
        removed = db.write(functools.partial(_remove, path=path, written=written))
    except BaseException:
        with contextlib.suppress(Exception):
            if not _recorded(db, path):
                path.unlink(missing_ok=True)
        raise
    if not removed:  # every one went meanwhile (an imported tombstone): no archive of nothing
        path.unlink(missing_ok=True)
    return removed


def _recorded(db: Database, path: Path) -> bool:
    row = db.reader().execute("SELECT 1 FROM archives WHERE path = %s LIMIT 1", (str(path),)).fetchone()
    return row is not None


def _remove(conn: Connection, path: Path, written: list[int]) -> list[int]:
    """Delete exactly the archived messages (vectors and days by cascade) and record the file. A message
    removed meanwhile (an imported tombstone) leaves the archive before this commits, so the file holds
    exactly what was removed."""
    conn.execute("DELETE FROM embedding_backlog WHERE message_id = ANY(%s::bigint[])", (written,))
    rows = conn.execute(  # the identity stays, so catch-up, ingest and replays skip them (m010)
        "WITH gone AS (DELETE FROM messages WHERE id = ANY(%s::bigint[]) RETURNING id, session_rowid, content_hash,"
        " kind), kept AS (INSERT INTO archived (session_rowid, content_hash, message_id) SELECT session_rowid,"
        " content_hash, id FROM gone WHERE kind <> 'memory' ON CONFLICT DO NOTHING) SELECT id FROM gone",
        (written,),
    ).fetchall()
    removed = sorted(int(row[0]) for row in rows)
    if len(removed) < len(written):
        _keep_only(path, set(removed))
    if removed:
        conn.execute(
            "INSERT INTO archives (path, created_at, first_message_id, last_message_id, message_count)"
            " VALUES (%s, %s, %s, %s, %s)",
            (str(path), time.time(), removed[0], removed[-1], len(removed)),
        )
    return removed


def _keep_only(path: Path, ids: set[int]) -> None:
    """Rewrite the archive with only the lines of ``ids`` (atomically, fsynced)."""
    with gzip.open(path, "rb") as handle:
        kept = [raw for raw in handle if int(json.loads(raw)["id"]) in ids]
    write_gzip(path, kept, path.with_suffix(".forget-partial"))


def _reclaim(db: Database, per_message: float) -> None:
    """Make the freed space reusable (``VACUUM``, outside a transaction), then remember what was freed."""
    with db.writer() as conn:
        conn.execute(f"VACUUM {', '.join(_TOUCHED)}")
    remember_freed(db, per_message)


def bytes_per_message(conn: Connection) -> float:
    """What a message takes now (its share of ``used_bytes``): measured before messages are deleted."""
    return used_bytes(conn) / max(messages.count(conn), 1)


def remember_freed(db: Database, per_message: float) -> None:
    """After a deletion (a prune, a forget) and its VACUUM: record the store's size, its messages and the bytes
    per message measured before, so ``used_bytes`` counts the deletion at once and each message stored
    afterwards as taking that space again."""

    def record(conn: Connection) -> None:
        value = {"bytes": store_bytes(conn), "messages": messages.count(conn), "perMessage": per_message}
        meta.put(conn, DENSITY_KEY, json.dumps(value))

    db.write(record)
