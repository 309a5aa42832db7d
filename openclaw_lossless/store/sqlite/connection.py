"""The SQLite connection: a binding that can load sqlite-vec, WAL, one writer and parallel readers.

Why not just ``sqlite3``: many CPython builds (pyenv's among them) lack ``enable_load_extension``, so
sqlite-vec cannot load. ``sqlean.py`` ships an SQLite that can, on Linux, macOS and Windows; the stdlib
module is used when it can load extensions itself.

Why one writer: SQLite allows one writer at a time. All writes go through ``Database.write``, which holds a
lock and runs the whole unit of work in ``BEGIN IMMEDIATE … COMMIT`` on the one write connection, so a turn
is atomic and writers never see ``database is locked``. Readers use their own connection per thread and run
in parallel thanks to WAL.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import sqlite_vec

from openclaw_lossless.errors import StorageFull, StoreCorrupt, StoreUnavailable
from openclaw_lossless.store.model.store_errors import StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")
Connection = Any  # sqlite3.Connection or sqlean's equivalent: same DB-API surface

_FULL_MARKERS = ("database or disk is full", "disk i/o error", "no space left")
_CORRUPT_MARKERS = ("file is not a database", "database disk image is malformed")


def sqlite_module() -> ModuleType:
    """The DB-API module to use: sqlean when installed, else the stdlib if it can load extensions."""
    try:
        import sqlean

        module: ModuleType = sqlean
        return module
    except ImportError:
        probe = sqlite3.connect(":memory:")
        try:
            if hasattr(probe, "enable_load_extension"):
                return sqlite3
        finally:
            probe.close()
    raise StoreUnavailable(
        "no SQLite binding here can load sqlite-vec: install the 'sqlean.py' package (pip install sqlean.py)"
    )


# The writer keeps a large page cache; readers, one per request thread (up to ~40), a small one each:
# at 32 MB apiece they could hold over a gigabyte between them on a large store, for pages the OS
# caches once for all of them anyway.
WRITER_CACHE_KIB = 32000
READER_CACHE_KIB = 4000
CHECKPOINT_WAL_BYTES = 4 * 1024 * 1024  # SQLite's own auto-checkpoint point: 1,000 pages of 4 KiB
CHECKPOINT_POLL_S = 0.5
WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024  # what a reset WAL file is truncated back to


def open_connection(
    path: Path, *, synchronous: str = "FULL", readonly: bool = False, cache_kib: int = WRITER_CACHE_KIB
) -> Connection:
    """Open one connection with sqlite-vec loaded and this project's pragmas set."""
    module = sqlite_module()
    target = f"file:{path}?mode=ro" if readonly else f"file:{path}"
    conn = module.connect(target, uri=True, check_same_thread=False, isolation_level=None, timeout=30.0)
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        conn.enable_load_extension(False)
        conn.execute("PRAGMA busy_timeout = 30000")
        if not readonly:
            # Only takes effect on a new, empty file; lets prune give space back without a full VACUUM.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            conn.execute("PRAGMA journal_mode = WAL")
            # Freed bytes are zeroed as they are freed: a row an UPDATE moves leaves its old cell in a free
            # block no later delete visits (docs/decisions/0100-forget-leaves-no-byte.md).
            conn.execute("PRAGMA secure_delete = ON")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA cache_size = -{int(cache_kib)}")
    except module.DatabaseError as exc:
        conn.close()
        raise translate_error(exc) from exc
    return conn


def translate_error(exc: Exception) -> Exception:
    """Map an SQLite error to the project's error tree (disk full → 507, corrupt → clear message)."""
    text = str(exc).lower()
    if any(marker in text for marker in _FULL_MARKERS):
        return StorageFull("the disk holding the database is full: nothing was stored; free space and retry")
    if any(marker in text for marker in _CORRUPT_MARKERS):
        return StoreCorrupt(
            f"the database file is damaged or not a database ({exc}): stop the sidecar and run"
            " 'openclaw-lossless salvage' to copy what can be read into a new file"
        )
    return exc


def store_error(exc: Exception) -> Exception:
    """A driver's error as the store hands it on: translated when the project names it, else ``StoreError``."""
    translated = translate_error(exc)
    return StoreError(str(exc)) if translated is exc else translated


class Database:
    """One write connection behind a lock, one read connection per thread."""

    def __init__(self, path: Path, *, synchronous: str = "FULL", checkpoint_bytes: int = CHECKPOINT_WAL_BYTES) -> None:
        self.path = path
        self.synchronous = synchronous
        _ensure_private_dir(path.parent)
        self._writer = open_connection(path, synchronous=synchronous)
        _restrict_files(path)
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._readers: list[tuple[threading.Thread, Connection]] = []  # each with the thread it belongs to
        self._readers_lock = threading.Lock()
        self.module = sqlite_module()
        self._checkpointer = Checkpointer(path, synchronous, checkpoint_bytes)
        # SQLite checkpoints inside whichever commit fills the WAL past 1,000 pages: that commit then copies
        # the pages back into a large file and fsyncs it. The checkpointer thread does it instead.
        self._writer.execute("PRAGMA wal_autocheckpoint = 0")
        self._writer.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")

    def write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction on the write connection; all or nothing."""
        with self._write_lock:
            conn = self._writer
            try:
                conn.execute("BEGIN IMMEDIATE")
                result = work(conn)
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, self.module.Error):
                    raise store_error(exc) from exc
                raise
            return result

    @contextlib.contextmanager
    def translated(self) -> Iterator[None]:
        """Driver errors raised inside as the store's own (``store_error``), as ``write`` raises them."""
        try:
            yield
        except self.module.Error as exc:
            raise store_error(exc) from exc

    @contextlib.contextmanager
    def writer(self) -> Iterator[Connection]:
        """The raw write connection, for statements that cannot run in a transaction (VACUUM, checkpoint)."""
        with self._write_lock:
            yield self._writer

    def reader(self) -> Connection:
        """This thread's read connection (opened on first use)."""
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = open_connection(self.path, synchronous=self.synchronous, cache_kib=READER_CACHE_KIB)
            self._local.conn = conn
            with self._readers_lock:
                self._close_orphans()
                self._readers.append((threading.current_thread(), conn))
        return conn

    def _close_orphans(self) -> None:
        """Close the readers of threads that have ended (caller holds ``_readers_lock``).

        The server's worker threads come and go (an idle one exits after 10 s and a new one starts later);
        each kept its connection, with up to ``READER_CACHE_KIB`` of page cache, for as long as the process
        lived: a week of traffic grew memory by a few MB at every change of thread.
        """
        alive = []
        for thread, conn in self._readers:
            if thread.is_alive():
                alive.append((thread, conn))
            else:
                conn.close()
        self._readers = alive

    def reader_count(self) -> int:
        """Read connections open now (one per live thread that has read)."""
        with self._readers_lock:
            return len(self._readers)

    def file_bytes(self) -> int:
        """Bytes the database occupies on disk (main file + WAL)."""
        total = 0
        for suffix in ("", "-wal"):
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(f"{self.path}{suffix}").st_size
        return total

    def close(self) -> None:
        self._checkpointer.stop()
        with self._readers_lock:
            for _, conn in self._readers:
                conn.close()
            self._readers.clear()
        with self._write_lock:
            self._writer.close()


class Checkpointer:
    """Copies the WAL back into the database from a thread of its own, off the commit path.

    PASSIVE checkpoints never wait for the writer or block it, and copy what no reader still needs; the next
    commit after a complete one starts the WAL over. A failed checkpoint (a full disk, a busy moment) changes
    nothing committed and is retried at the next poll.
    """

    def __init__(self, path: Path, synchronous: str, threshold_bytes: int) -> None:
        self._wal = Path(f"{path}-wal")
        self._threshold = threshold_bytes
        self._conn = open_connection(path, synchronous=synchronous, cache_kib=READER_CACHE_KIB)
        self._stopping = threading.Event()
        self.checkpoints = 0
        self._thread = threading.Thread(target=self._run, name="lossless-checkpoint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.wait(CHECKPOINT_POLL_S):
            try:
                if self._wal.stat().st_size >= self._threshold:
                    self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
            except (OSError, sqlite_module().Error) as exc:
                log.debug("checkpoint deferred: %s", exc)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()
        self._conn.close()


def _ensure_private_dir(directory: Path) -> None:
    """Create the database's directory user-only; one that already exists is the operator's and left as it is
    (``--db-path /tmp/x.sqlite`` must not chmod /tmp). The state dir itself is made 0700 by the Sidecar."""
    if directory.is_dir():
        return
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)


def _restrict_files(path: Path) -> None:
    """Keep the database and its WAL/SHM files user-only."""
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(f"{path}{suffix}", 0o600)


def checkpoint_fully(db: Database) -> None:
    """Copy the whole write-ahead log into the file and empty it, so the file alone holds every change."""
    with db.writer() as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()


def set_secure_delete(db: Database, on: bool) -> bool:
    """Set ``secure_delete`` on the write connection (freed bytes are zeroed); returns what it was."""
    with db.writer() as conn:
        previous = bool(conn.execute("PRAGMA secure_delete").fetchone()[0])
        conn.execute(f"PRAGMA secure_delete = {int(on)}")
    return previous
