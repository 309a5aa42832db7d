"""Which backend holds the store, and the one handle the rest of the package uses to reach it.

Why a handle and not imports: a caller that imported ``store.sqlite.messages`` would be SQLite's for ever.
Callers hold a ``Store`` instead: ``store.db`` runs units of work (``write``, ``reader``), and ``store.ops``
names the backend's module for each domain of ``store/api.py`` (``store.ops.messages.commit_turn(conn, ...)``).
Both backends' modules answer the same protocols, so a caller never asks which one it has.

Selection: ``LOSSLESS_DATABASE_URL`` (or ``serve --database-url``) set to ``postgresql://...`` puts the store
on that server; unset, the store is the SQLite file the settings name, as it always was. PostgreSQL's modules
are imported only then, so a SQLite user needs no PostgreSQL driver installed.
"""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, TypeVar

from openclaw_lossless.errors import LosslessError, StoreUnavailable
from openclaw_lossless.store import api
from openclaw_lossless.store.model.store_errors import StoreError
from openclaw_lossless.store.sqlite import connection as sqlite_connection
from openclaw_lossless.store.statements import POSTGRES, Dialect
from openclaw_lossless.store.statements import SQLITE as SQLITE_DIALECT
from openclaw_lossless.store.statements.timelines import Timelines

T = TypeVar("T")
BackendName = Literal["sqlite", "postgresql"]
# The sidecar's own reading threads: recall's vector lanes (4), the embedding worker and its extra drain
# thread, catch-up, the backfill (days, keyword pairs), the index loader, the size cap, and two to spare.
INTERNAL_READERS = 11


@dataclass(frozen=True)
class Backend:
    """One backend's module per domain, each an implementation of its protocol in ``store/api.py``."""

    name: BackendName
    migrations: api.Migrations[Any]
    sessions: api.Sessions[Any]
    messages: api.Messages[Any]
    fulltext: api.Fulltext[Any]
    term_stats: Callable[[int], api.TermStats[Any]]
    message_days: api.MessageDays[Any]
    keyword_pairs: api.KeywordPairs[Any]
    vectors: api.Vectors[Any]
    backlog: api.Backlog[Any]
    meta: api.Meta[Any]
    snapshots: api.Snapshots[Any]
    subagents: api.Subagents[Any]
    timelines: api.Timelines[Any]
    transcript_ledger: api.TranscriptLedger[Any]
    counts: api.Counts[Any]
    agents: api.Agents[Any]
    archive: api.Archive[Any, Any]
    forgetting: api.Forgetting[Any, Any]
    transfer: api.Transfer[Any, Any]
    rewrite: api.Rewrite[Any]
    checks: api.Checks[Any]
    file_maintenance: api.FileMaintenance[Any]
    memory_files: api.MemoryFiles[Any, Any]
    translate_error: Callable[[Exception], Exception]  # a driver's error as the project's (``errors.py``)


# The fields not answered by the package's module of the same name: built in ``assemble`` itself.
_BUILT = ("name", "term_stats", "timelines", "file_maintenance", "translate_error")


def assemble(name: BackendName, package: str, dialect: Dialect, file_maintenance: str) -> Backend:
    """The backend whose modules are ``package``'s: each field its module of the same name. mypy holds each
    module to its protocol in ``tests/test_store_api.py`` and ``tests/postgres/backend/test_api.py``."""
    modules: dict[str, Any] = {
        field.name: importlib.import_module(f"{package}.{field.name}")
        for field in fields(Backend)
        if field.name not in _BUILT
    }
    return Backend(
        name=name,
        term_stats=importlib.import_module(f"{package}.term_stats").TermStats,
        timelines=Timelines(dialect),
        file_maintenance=importlib.import_module(f"{package}.{file_maintenance}"),
        translate_error=importlib.import_module(f"{package}.connection").translate_error,
        **modules,
    )


SQLITE = assemble("sqlite", "openclaw_lossless.store.sqlite", SQLITE_DIALECT, file_maintenance="connection")


@dataclass(frozen=True)
class Store:
    """An opened store: where its units of work run (``db``) and the backend's operations on them (``ops``)."""

    db: api.Database[Any]  # store/sqlite/connection.py or store/postgres/connection.py
    ops: Backend

    @property
    def backend(self) -> BackendName:
        return self.ops.name


@dataclass(frozen=True)
class Place:
    """Where the store is: a SQLite file, or (``url`` set) a schema on a PostgreSQL server."""

    path: Path
    synchronous: str = "FULL"
    url: str | None = None
    schema: str = "lossless"
    connections: int = 24

    @property
    def pools(self) -> tuple[int, int]:
        """(write, read) connections on PostgreSQL: commits are short, reads (recall, search, status) the many."""
        writers = max(2, min(4, self.connections // 6))
        return writers, self.connections - writers

    @property
    def request_threads(self) -> int:
        """The requests served at once on PostgreSQL: a reading thread keeps its connection while it lives, so
        the request threads and the sidecar's own (``INTERNAL_READERS``) must fit in the read pool together, or
        a reader would wait for a connection none of them gives back."""
        return max(2, self.pools[1] - INTERNAL_READERS)


def connect(place: Place) -> Store:
    """Open and migrate the store; a failed migration closes what it opened and raises."""
    store = (
        Store(sqlite_connection.Database(place.path, synchronous=place.synchronous), SQLITE)
        if place.url is None
        else (_open_postgres(place))
    )
    try:
        store.ops.migrations.migrate(store.db)
    except LosslessError:
        store.db.close()
        raise
    return store


def holds_store(place: Place) -> bool:
    """Whether there is a store to read at ``place`` (a read never creates one: no file, or no tables)."""
    if place.url is None:
        return place.path.exists()
    from openclaw_lossless.store.postgres.checks import store_exists  # the driver, only when a URL asks

    return store_exists(place.url, place.schema)


def edge_errors() -> tuple[type[Exception], ...]:
    """What a process's edge catches besides ``LosslessError``: ``StoreError``, and the SQLite binding's own
    DatabaseError met by a read outside a translated path (a damaged page; sqlean's is not the stdlib's),
    which ``SQLITE.translate_error`` names."""
    return (StoreError, sqlite3.DatabaseError, sqlite_connection.sqlite_module().DatabaseError)


def read_file(path: Path, read: Callable[[Any], T]) -> T | None:
    """``read`` on a read-only connection to the SQLite file at ``path``; None when there is no file to read
    (none is created) or it lacks what ``read`` asks for (a store not yet migrated)."""
    try:
        conn = sqlite_connection.open_connection(path, readonly=True)
    except LosslessError:
        return None
    try:
        return read(conn)
    except sqlite_connection.sqlite_module().Error:
        return None
    finally:
        conn.close()


def _open_postgres(place: Place) -> Store:
    """PostgreSQL's modules are imported here, only when a URL names a server: SQLite users need no driver."""
    try:
        from openclaw_lossless.store.postgres import connection as pg_connection
    except ImportError as exc:  # installed without the extra: say how to get it, not a traceback
        raise StoreUnavailable(
            "LOSSLESS_DATABASE_URL names a PostgreSQL server, but its driver is not installed:"
            " pip install 'openclaw-lossless[postgres]' (or unset it to use the SQLite file)"
        ) from exc
    assert place.url is not None
    writers, readers = place.pools
    db = pg_connection.Database(place.url, schema=place.schema, write_pool_size=writers, read_pool_size=readers)
    return Store(db, postgres())


def postgres() -> Backend:
    """PostgreSQL + pgvector (``store/postgres/``): the modules answering the same protocols on a server."""
    return assemble("postgresql", "openclaw_lossless.store.postgres", POSTGRES, file_maintenance="file_maintenance")
