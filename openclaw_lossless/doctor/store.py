"""The store's side of ``doctor``: binding, embedder, database, index, permissions, disk.

It never writes and never starts the sidecar's machinery (no migration, no vector rebuild), so it can be
pointed at a damaged or foreign database and say what is wrong instead of making it worse. A finding that is
not ok fails the run; one that is ok may still carry a fix (a note: nothing is broken, but something is worth
doing, such as draining a large embedding backlog).
"""

from __future__ import annotations

import ipaddress
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from openclaw_lossless.config import Settings
from openclaw_lossless.doctor.findings import Finding
from openclaw_lossless.embed.index import recorded_identity
from openclaw_lossless.embed.service import build_provider
from openclaw_lossless.errors import LosslessError
from openclaw_lossless.store.backend import SQLITE
from openclaw_lossless.store.sqlite import backlog as queued
from openclaw_lossless.store.sqlite import checks, messages, vectors
from openclaw_lossless.store.sqlite.connection import Connection, open_connection, sqlite_module, translate_error
from openclaw_lossless.store.sqlite.forget import forgotten_count, resurrected
from openclaw_lossless.store.sqlite.migrations import MIGRATIONS

MIN_FREE_BYTES = 200 * 1024 * 1024
# About 20 s of the local model's work (48 msg/s on one core): a backlog beyond it leaves recall without those
# messages' vectors long enough that the operator should know, and what drains it.
BACKLOG_LARGE = 1000


def store_findings(settings: Settings) -> list[Finding]:
    """Every check of the sidecar's own installation, in the order the report shows them."""
    findings = [_binding(), _embedder(settings), _permissions(settings), _disk(settings)]
    path = settings.database_path
    if not path.exists():
        return [*findings, Finding("database", True, f"no database yet at {path}; it is created on first start")]
    try:
        conn = open_connection(path, readonly=True)
    except LosslessError as exc:
        return [*findings, Finding("database", False, exc.message, "openclaw-lossless salvage")]
    try:
        checks: list[Callable[[Connection], Finding]] = [_schema, _integrity, _fts, _vectors, _forgotten]
        for check in checks:
            findings.append(_guarded(check, conn))
        findings.append(_guarded(lambda c: _backlog(c, settings), conn))
        findings.append(_guarded(lambda c: _index_identity(c, settings), conn))
    finally:
        conn.close()
    return findings


def _guarded(check: Callable[[Connection], Finding], conn: Connection) -> Finding:
    try:
        return check(conn)
    except sqlite_module().DatabaseError as exc:
        error = translate_error(exc)
        message = error.message if isinstance(error, LosslessError) else str(exc)
        return Finding(getattr(check, "__name__", "check").strip("_"), False, message, "openclaw-lossless salvage")


def _binding() -> Finding:
    sqlite_version, vec_version = checks.library_versions()
    return Finding(
        "binding", True, f"{sqlite_module().__name__} with SQLite {sqlite_version}, sqlite-vec {vec_version}"
    )


def _embedder(settings: Settings) -> Finding:
    """Whether the configured provider can start. ``none`` is only ever set on purpose: a choice, not a fault."""
    if settings.embedding_provider == "none":
        return Finding("embedder", True, "provider 'none' chosen: no vectors are built, recall uses keyword search")
    if settings.embedding_provider == "openai-compatible" and settings.openai_api_key is None:
        missing_key = _missing_api_key(settings.embedding_base_url)
        if missing_key is not None:
            return missing_key
    try:
        provider = build_provider(settings)
    except LosslessError as exc:
        return Finding(
            "embedder", False, f"{settings.embedding_provider}: {exc.message}", "openclaw-lossless model fetch"
        )
    identity = provider.identity
    provider.close()
    return Finding(
        "embedder", True, f"{identity.provider} {identity.model} ({identity.variant}, {identity.dimension}-d)"
    )


def _missing_api_key(base_url: str) -> Finding | None:
    """No API key: a problem for a remote endpoint (every request is refused), fine for a local server."""
    host = urlsplit(base_url).hostname or ""
    if host == "localhost" or _is_loopback_address(host):
        return None
    return Finding(
        "embedder",
        False,
        f"openai-compatible at {base_url} but no OPENAI_API_KEY is set: every embedding request will be refused",
        "set OPENAI_API_KEY (or LOSSLESS_OPENAI_API_KEY) where the sidecar starts, then restart it",
    )


def _is_loopback_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _index_identity(conn: Connection, settings: Settings) -> Finding:
    recorded = recorded_identity(SQLITE, conn)
    if recorded is None:
        return Finding("index", True, "no vectors built yet")
    try:
        wanted = build_provider(settings).identity
    except LosslessError:
        return Finding("index", True, f"built with {recorded.model} ({recorded.dimension}-d)")
    if wanted != recorded:
        return Finding(
            "index",
            False,
            f"vectors were built with {recorded.model}/{recorded.variant}/"
            f"{recorded.dimension}-d but {wanted.model}/{wanted.variant}/{wanted.dimension}-d is"
            " configured; the sidecar rebuilds them at its next start",
            "openclaw-lossless serve",
        )
    return Finding("index", True, f"vectors match {wanted.model} ({wanted.dimension}-d)")


def _schema(conn: Connection) -> Finding:
    """A database a newer version wrote is never touched by this one: say which migrations it has."""
    known = {fn.__name__ for fn in MIGRATIONS}
    applied = checks.applied_migrations(conn)
    if applied is None:
        return Finding("schema", True, "not migrated yet (done on first start)")
    unknown = sorted(applied - known)
    if unknown:
        return Finding(
            "schema",
            False,
            f"written by a newer openclaw-lossless (migrations {', '.join(unknown)}); this version will not open it",
            "pip install --upgrade openclaw-lossless (or use another --state-dir)",
        )
    return Finding("schema", True, f"{len(applied)} of {len(known)} migrations applied")


def _integrity(conn: Connection) -> Finding:
    result = checks.integrity_problems(conn, 20)
    if result == ["ok"]:
        return Finding("integrity", True, "integrity_check ok")
    more = f" (and {len(result) - 5} more problems)" if len(result) > 5 else ""
    return Finding("integrity", False, "; ".join(result[:5]) + more, "openclaw-lossless salvage")


def _fts(conn: Connection) -> Finding:
    """FTS5's own check against the content table (``store/sqlite/checks.fts_problem``: it writes nothing)."""
    stored = messages.count(conn)
    problem = checks.fts_problem(conn)
    if problem is not None:
        return Finding(
            "fts", False, f"full-text index out of step with messages: {problem}", "openclaw-lossless reindex --fts"
        )
    return Finding("fts", True, f"full-text index covers {stored} messages")


def _forgotten(conn: Connection) -> Finding:
    """No message a tombstone names is stored again (``store/sqlite/forget.py``): forgetting held."""
    if not checks.has_table(conn, "forgotten"):
        return Finding("forgotten", True, "nothing forgotten yet")
    back = resurrected(conn)
    count = forgotten_count(conn)
    if back:
        return Finding(
            "forgotten",
            False,
            f"{back} stored messages carry the identity of a forgotten one",
            "openclaw-lossless forget --dry-run <msg:N ...> to see them, then forget them again",
            code="forgotten_present",
        )
    return Finding("forgotten", True, f"{count} messages forgotten; none of them is stored")


def _vectors(conn: Connection) -> Finding:
    if not vectors.in_current_format(conn):
        return Finding("vectors", True, "no sqlite-vec vector table yet (made or converted at the next start)")
    if recorded_identity(SQLITE, conn) is None:
        return Finding("vectors", True, "no vectors built yet")
    missing, orphans = vectors.unaccounted(conn)
    if orphans or missing:
        return Finding(
            "vectors",
            False,
            f"{missing} messages have no vector and are not queued; {orphans} vectors belong to no message",
            "openclaw-lossless reindex --vectors",
        )
    return Finding("vectors", True, "every message has a vector or is queued for one")


def _backlog(conn: Connection, settings: Settings) -> Finding:
    """How many messages wait for a vector; a large backlog is a note saying what drains it."""
    backlog = queued.size(conn)
    detail = f"{backlog} messages waiting to be embedded"
    if backlog <= BACKLOG_LARGE:
        return Finding("backlog", True, detail)
    if settings.embedding_provider == "none":
        return Finding(
            "backlog",
            True,
            f"{detail}; provider 'none' embeds nothing, so they wait (keyword search still finds them)",
            "only to add vector search: LOSSLESS_EMBEDDING_PROVIDER=local and 'openclaw-lossless model fetch';"
            " the sidecar then drains it",
        )
    return Finding(
        "backlog",
        True,
        f"{detail}; until then keyword search alone finds them. The running sidecar drains it in the background",
        "openclaw-lossless serve (the plugin starts it), or with the sidecar stopped:"
        " openclaw-lossless reindex --vectors --missing",
    )


def _permissions(settings: Settings) -> Finding:
    loose = []
    state = settings.state_dir
    if state.exists() and stat.S_IMODE(state.stat().st_mode) & 0o077:
        loose.append(f"{state} is {oct(stat.S_IMODE(state.stat().st_mode))}, not 0o700")
    archives = settings.archive_dir
    if archives.is_dir() and stat.S_IMODE(archives.stat().st_mode) & 0o077:
        loose.append(f"{archives} is {oct(stat.S_IMODE(archives.stat().st_mode))}, not 0o700")
    database = settings.database_path
    files = [database, Path(f"{database}-wal"), Path(f"{database}-shm"), settings.token_path]
    files += sorted(archives.glob("*")) if archives.is_dir() else []
    for path in files:
        if path.exists() and stat.S_IMODE(path.stat().st_mode) & 0o077:
            loose.append(f"{path} is {oct(stat.S_IMODE(path.stat().st_mode))}, not 0o600")
    if loose:
        fix = f"chmod -R u=rwX,go= {state}"
        return Finding("permissions", False, "; ".join(loose), fix)
    return Finding("permissions", True, "state directory 0700, files 0600")


def _disk(settings: Settings) -> Finding:
    target = settings.state_dir if settings.state_dir.exists() else settings.state_dir.parent
    while not target.exists() and target != target.parent:
        target = target.parent
    free = shutil.disk_usage(target).free
    detail = f"{free // (1024 * 1024)} MiB free on the state directory's disk"
    if free < MIN_FREE_BYTES:
        return Finding("disk", False, detail, "free disk space, or 'openclaw-lossless prune' to archive old messages")
    return Finding("disk", True, detail)
