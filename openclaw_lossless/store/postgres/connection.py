"""The PostgreSQL connection: a psycopg 3 pool shared by the sidecar's threads, and units of work on it.

Why a pool, not one writer as on SQLite: PostgreSQL takes concurrent writers itself (row locks, ``ON
CONFLICT``), and several sidecars write to one database at once anyway, so serialising this process's writes
behind a lock would buy nothing. ``Database.write`` runs a unit of work in one transaction on a pooled
connection; a serialisation failure or a deadlock (the server rolled the whole transaction back) is retried
here with the same work, so the hook never sees one. Every other server error is translated into the
project's error tree (``errors.py``), as ``store/sqlite/connection.py`` does for SQLite: a full disk is 507, an
unreachable or restarting server 503 (retryable: a replayed turn is answered ``duplicate`` if it had landed).

Reads use a second pool in autocommit mode: each statement sees everything committed before it, by any
sidecar, and no read holds a transaction open. Like SQLite's ``reader()``, a thread keeps its read
connection while it lives; the connections of ended threads go back to the pool when a new thread asks.
A connection the server dropped (restart, failover) is noticed before use, without a round trip
(``check_idle``), and replaced: the first writes and reads after a restart do not fail.

Every connection's ``search_path`` is the store's schema (default ``lossless``), then the schemas holding
the ``vector`` and ``unaccent`` extensions when an operator put them elsewhere (managed services keep them
in ``extensions``), then ``public``, where the store creates them when they are missing.

The pooled connections run with ``jit = off`` (the maintenance connections keep the server's setting): JIT
compiling pays off for analytic queries of seconds, not for a turn's statements of milliseconds. Measured:
docs/decisions/0005-postgres-jit-off.md.
"""

from __future__ import annotations

import contextlib
import logging
import random
import select
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import errors as pgerrors
from psycopg import sql
from psycopg.rows import TupleRow
from psycopg_pool import ConnectionPool, PoolTimeout

from openclaw_lossless.errors import StorageFull, StoreCorrupt, StoreReadOnly, StoreUnavailable
from openclaw_lossless.store.model.store_errors import StoreError

log = logging.getLogger(__name__)

T = TypeVar("T")
Connection = psycopg.Connection[TupleRow]

DEFAULT_SCHEMA = "lossless"
EXTENSIONS = ("vector", "unaccent")  # created in ``public`` by the first migration unless already present
WRITE_POOL_SIZE = 8
READ_POOL_SIZE = 16
CONNECT_TIMEOUT_S = 30.0
WRITE_ATTEMPTS = 6  # a serialisation failure or deadlock is retried this many times in all
RETRY_BASE_S = 0.01

_RETRYABLE = (pgerrors.SerializationFailure, pgerrors.DeadlockDetected)
_UNAVAILABLE_STATES = ("08", "57P")  # connection exceptions; admin, crash or startup shutdown of the server


def translate_error(exc: Exception) -> Exception:
    """Map a psycopg error to the project's error tree (disk full → 507, server gone → 503, corrupt → 500)."""
    if isinstance(exc, pgerrors.DiskFull):
        return StorageFull("the disk holding the PostgreSQL database is full: nothing was stored; free space and retry")
    if isinstance(exc, pgerrors.ReadOnlySqlTransaction):
        return StoreReadOnly(
            "the PostgreSQL server accepts no writes (a standby, or default_transaction_read_only): point"
            " LOSSLESS_DATABASE_URL at the primary"
        )
    if isinstance(exc, (pgerrors.DataCorrupted, pgerrors.IndexCorrupted)):
        return StoreCorrupt(
            f"the PostgreSQL server reports damaged data ({exc.sqlstate}): repair it with its own tools"
        )
    if isinstance(exc, PoolTimeout):
        return StoreUnavailable(f"no connection to the PostgreSQL server could be had in time: {exc}")
    if isinstance(exc, psycopg.OperationalError):
        state = exc.sqlstate
        if state is None or state.startswith(_UNAVAILABLE_STATES) or isinstance(exc, pgerrors.TooManyConnections):
            return StoreUnavailable(f"the PostgreSQL server cannot be reached now: {_first_line(exc)}")
    return exc


def store_error(exc: Exception) -> Exception:
    """A driver's error as the store hands it on: translated when the project names it, else ``StoreError``."""
    translated = translate_error(exc)
    return StoreError(str(exc)) if translated is exc else translated


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def set_search_path(conn: Connection, schema: str) -> None:
    """The store's schema, then the schemas of the extensions it uses (other than ``public``), then ``public``."""
    rows = conn.execute(
        "SELECT DISTINCT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
        " WHERE e.extname = ANY(%s) ORDER BY n.nspname",
        (list(EXTENSIONS),),
    ).fetchall()
    names = dict.fromkeys([schema, *(str(row[0]) for row in rows), "public"])
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.SQL(", ").join(map(sql.Identifier, names))))


def _dropped(conn: Connection) -> bool:
    """Whether an idle connection was closed by the server (a restart, a failover, an administrator): an idle
    connection has nothing to read unless the server sent it its farewell or hung up. No round trip."""
    if conn.closed:
        return True
    if hasattr(select, "poll"):  # any descriptor number (select() stops at 1024), and a hang-up counts
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([conn.fileno()], [], [], 0)
    return bool(readable)


def check_idle(conn: Connection) -> None:
    """The pools' check of a connection they hand out: probed (one round trip) only when it looks dropped, so
    a server restart costs no failed write per pooled connection, and a healthy one costs nothing. Raising
    makes the pool discard the connection and take another."""
    if _dropped(conn):
        ConnectionPool.check_connection(conn)


def redacted(url: str) -> str:
    """The URL without its password, to show in ``/stats`` and messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


class Database:
    """Units of work on a PostgreSQL store: ``write`` in one transaction, ``reader`` for reads."""

    def __init__(
        self,
        url: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        write_pool_size: int = WRITE_POOL_SIZE,
        read_pool_size: int = READ_POOL_SIZE,
        timeout: float = CONNECT_TIMEOUT_S,
    ) -> None:
        self.url = url
        self.schema = schema
        self.path: Path | None = None  # no file: ``describe()`` names the store
        self._local = threading.local()
        self._readers: list[tuple[threading.Thread, Connection]] = []
        self._readers_lock = threading.Lock()
        self._writes = self._open_pool("lossless-write", 1, write_pool_size, timeout, autocommit=False)
        try:
            self._reads = self._open_pool("lossless-read", 0, read_pool_size, timeout, autocommit=True)
        except BaseException:
            self._writes.close()
            raise

    def _open_pool(
        self, name: str, min_size: int, max_size: int, timeout: float, *, autocommit: bool
    ) -> ConnectionPool[Connection]:
        pool: ConnectionPool[Connection] = ConnectionPool(
            self.url,
            name=name,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout,
            kwargs={"autocommit": autocommit},
            configure=self._configure,
            check=check_idle,
            open=False,
        )
        try:
            pool.open(wait=True, timeout=timeout)
        except PoolTimeout as exc:
            pool.close()
            raise StoreUnavailable(f"cannot connect to the PostgreSQL server at {redacted(self.url)}") from exc
        return pool

    def _configure(self, conn: Connection) -> None:
        """Each new connection looks in the store's schema first, then where the extensions are, and never
        compiles a statement (``jit``: see the module's docstring)."""
        set_search_path(conn, self.schema)
        conn.execute("SET jit = off")
        if not conn.autocommit:
            conn.commit()

    def describe(self) -> str:
        return f"{redacted(self.url)} (schema {self.schema})"

    def write(self, work: Callable[[Connection], T]) -> T:
        """Run ``work`` in one transaction; all or nothing. A serialisation failure or deadlock rolled the
        transaction back on the server, so ``work`` is run again on a fresh transaction (a few times, with
        a growing random pause), never half applied."""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with self._writes.connection() as conn, conn.transaction():
                    return work(conn)
            except _RETRYABLE as exc:
                if attempt == WRITE_ATTEMPTS:
                    raise StoreUnavailable(
                        f"a write kept conflicting with other writers ({exc.sqlstate}); retry"
                    ) from exc
                time.sleep(RETRY_BASE_S * 2**attempt * random.random())
            except (psycopg.Error, PoolTimeout) as exc:
                raise store_error(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    @contextlib.contextmanager
    def translated(self) -> Iterator[None]:
        """Driver errors raised inside as the store's own (``store_error``), as ``write`` raises them."""
        try:
            yield
        except (psycopg.Error, PoolTimeout) as exc:
            raise store_error(exc) from exc

    @contextlib.contextmanager
    def writer(self) -> Iterator[Connection]:
        """A write connection outside any transaction (autocommit), for statements like ``VACUUM``."""
        with self._writes.connection() as conn:
            conn.autocommit = True
            try:
                yield conn
            finally:
                conn.autocommit = False

    def reader(self) -> Connection:
        """This thread's read connection (autocommit: each statement sees every commit made before it)."""
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None or _dropped(conn):
            with self._readers_lock:
                self._return_orphans()
            try:
                conn = self._reads.getconn()
            except PoolTimeout as exc:
                raise translate_error(exc) from exc
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append((threading.current_thread(), conn))
        return conn

    def _return_orphans(self) -> None:
        """Give the read connections of ended threads back to the pool (caller holds ``_readers_lock``)."""
        alive = []
        for thread, conn in self._readers:
            if thread.is_alive() and not conn.closed:
                alive.append((thread, conn))
            else:
                self._reads.putconn(conn)
        self._readers = alive

    def reader_count(self) -> int:
        with self._readers_lock:
            return len(self._readers)

    def file_bytes(self) -> int:
        """Bytes the store's tables, indexes and TOAST data occupy on the server."""
        cursor = self.reader().execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
            (self.schema,),
        )
        row = cursor.fetchone()
        return 0 if row is None else int(row[0])

    def close(self) -> None:
        with self._readers_lock:
            for _, conn in self._readers:
                self._reads.putconn(conn)
            self._readers.clear()
        self._reads.close()
        self._writes.close()


def checkpoint_fully(db: Database) -> None:
    """Nothing to do: the server's checkpointer keeps the data files current (SQLite's WAL has no twin here)."""


def set_secure_delete(db: Database, on: bool) -> bool:
    """PostgreSQL has no ``secure_delete``: freed rows are overwritten by ``VACUUM`` (forget runs it)."""
    return False
