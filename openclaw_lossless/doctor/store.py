"""The store's side of ``doctor``: binding, embedder, database, index, permissions, disk.

It never writes and never starts the sidecar's machinery (no migration, no vector rebuild), so it can be
pointed at a damaged or foreign database and say what is wrong instead of making it worse. A finding that is
not ok fails the run; one that is ok may still carry a fix (a note: nothing is broken, but something is worth
doing, such as draining a large embedding backlog). Every finding has a stable ``code``.

The checks of what a store holds (schema, keyword index, vectors, forgotten messages, backlog, the model the
vectors were built with) ask the backend's modules (``store.backend.Backend``), so they read alike on both
backends; how the store is opened, its integrity check and the fixes that name the engine's own tools are
each backend's: the SQLite file here, a PostgreSQL store in ``doctor/postgres.py``.
"""

from __future__ import annotations

from openclaw_lossless.config import Settings
from openclaw_lossless.doctor.findings import Finding
from openclaw_lossless.doctor.store_checks import Check, disk, embedder, permissions, store_checks
from openclaw_lossless.errors import LosslessError
from openclaw_lossless.store.backend import SQLITE
from openclaw_lossless.store.sqlite import checks
from openclaw_lossless.store.sqlite.connection import Connection, open_connection, sqlite_module, translate_error
from openclaw_lossless.store.sqlite.migrations import MIGRATIONS

SALVAGE = "openclaw-lossless salvage"


def store_findings(settings: Settings) -> list[Finding]:
    """Every check of the sidecar's own installation, in the order the report shows them."""
    if settings.database_url is not None:
        return _postgres(settings)
    findings = [_binding(), embedder(settings), permissions(settings), disk(settings)]
    path = settings.database_path
    if not path.exists():
        created = f"no database yet at {path}; it is created on first start"
        return [*findings, Finding("database", True, created, code="store_not_created")]
    try:
        conn = open_connection(path, readonly=True)
    except LosslessError as exc:
        return [*findings, Finding("database", False, exc.message, SALVAGE, code="database_unreadable")]
    try:
        known = {fn.__name__ for fn in MIGRATIONS}
        findings += [_guarded(name, check, conn) for name, check in store_checks(SQLITE, settings, known, _integrity)]
    finally:
        conn.close()
    return findings


def _postgres(settings: Settings) -> list[Finding]:
    """A PostgreSQL store's findings (``doctor/postgres.py``), whose driver is imported only when a URL asks."""
    try:
        from openclaw_lossless.doctor.postgres import postgres_findings
    except ImportError as exc:  # installed without the extra: say how to get it, not a traceback
        binding = Finding(
            "binding",
            False,
            f"LOSSLESS_DATABASE_URL names a PostgreSQL store, but its driver cannot be loaded ({exc})",
            "pip install 'openclaw-lossless[postgres]' (or unset LOSSLESS_DATABASE_URL to use the SQLite file)",
            code="driver_missing",
        )
        return [binding, embedder(settings), permissions(settings), disk(settings)]
    return postgres_findings(settings)


def _guarded(name: str, check: Check, conn: Connection) -> Finding:
    try:
        return check(conn)
    except sqlite_module().DatabaseError as exc:
        error = translate_error(exc)
        message = error.message if isinstance(error, LosslessError) else str(exc)
        return Finding(name, False, message, SALVAGE, code=f"{name}_unreadable")


def _binding() -> Finding:
    sqlite_version, vec_version = checks.library_versions()
    return Finding(
        "binding",
        True,
        f"{sqlite_module().__name__} with SQLite {sqlite_version}, sqlite-vec {vec_version}",
        code="binding_ok",
        data={"sqlite": sqlite_version, "sqliteVec": vec_version},
    )


def _integrity(conn: Connection) -> Finding:
    result = checks.integrity_problems(conn, 20)
    if result == ["ok"]:
        return Finding("integrity", True, "integrity_check ok", code="integrity_ok")
    more = f" (and {len(result) - 5} more problems)" if len(result) > 5 else ""
    return Finding("integrity", False, "; ".join(result[:5]) + more, SALVAGE, code="integrity_problems")
