"""What ``doctor`` checks of a store on either backend: the embedder, the schema, the keyword index, the vectors,
forgotten messages, the backlog, the model the vectors were built with, and the state dir's permissions and
free disk.

Why a module of its own: each asks the backend's modules (``store.backend.Backend``) and reads alike on both
backends, while how a store is opened, its integrity check and the fixes naming the engine's own tools are each
backend's (``doctor/store.py`` for the SQLite file, ``doctor/postgres.py`` for a server); both use these.
"""

from __future__ import annotations

import ipaddress
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from openclaw_lossless.config import Settings
from openclaw_lossless.doctor.findings import Finding
from openclaw_lossless.embed.index import recorded_identity
from openclaw_lossless.embed.service import build_provider
from openclaw_lossless.errors import LosslessError
from openclaw_lossless.store.backend import SQLITE, Backend

MIN_FREE_BYTES = 200 * 1024 * 1024
# About 20 s of the local model's work on one core (docs/decisions/0009): a backlog beyond it leaves recall
# without those messages' vectors long enough that the operator should know, and what drains it.
BACKLOG_LARGE = 1000
Check = Callable[[Any], Finding]


def store_checks(ops: Backend, settings: Settings, known: set[str], integrity: Check) -> list[tuple[str, Check]]:
    """The checks of what the store holds, by name, in the report's order: ``known`` names the backend's
    migrations, ``integrity`` is the backend's own check."""
    return [
        ("schema", lambda conn: schema(ops, conn, known)),
        ("integrity", integrity),
        ("fts", lambda conn: fts(ops, conn)),
        ("vectors", lambda conn: vectors(ops, conn)),
        ("forgotten", lambda conn: forgotten(ops, conn)),
        ("backlog", lambda conn: backlog(ops, conn, settings)),
        ("index", lambda conn: index_identity(ops, conn, settings)),
        ("memory_files", lambda conn: memory_files(ops, conn, settings)),
    ]


def memory_files(ops: Backend, conn: Any, settings: Settings) -> Finding:
    """The workspace memory files: how many are indexed, and whether any in a workspace waits (stale or new)."""
    from openclaw_lossless.memory_files.workspaces import locate, memory_paths, read_config

    if not ops.checks.has_table(conn, "memory_files"):
        return Finding("memory_files", True, "not migrated yet (done on first start)", code="memory_files_not_migrated")
    indexed = {(f.agent_id, f.path): f for f in ops.memory_files.files(conn)}
    config = read_config(settings.openclaw_state, settings.openclaw_config)
    waiting = []
    for workspace in locate(settings.openclaw_state, config, settings.openclaw_workspace):
        for relative, path in memory_paths(workspace.root):
            row = indexed.get((workspace.agent_id, relative))
            if row is None or row.size != path.stat().st_size or row.mtime_ns != path.stat().st_mtime_ns:
                waiting.append(f"{workspace.agent_id}:{relative}")
    chunks = sum(f.chunks for f in indexed.values())
    detail = f"{len(indexed)} memory files indexed ({chunks} chunks)"
    data = {"files": len(indexed), "chunks": chunks, "waiting": waiting}
    if not waiting:
        return Finding("memory_files", True, detail, code="memory_files_ok", data=data)
    fix = (
        "start the sidecar (it indexes them at start and every memory_files_interval_s) or POST"
        " /v1/memory-files/reindex"
        if settings.memory_files
        else "set LOSSLESS_MEMORY_FILES=true to index them"
    )
    shown = ", ".join(waiting[:5]) + (" ..." if len(waiting) > 5 else "")
    return Finding(
        "memory_files", True, f"{detail}; not yet indexed as they are now: {shown}", fix=fix,
        code="memory_files_waiting", data=data,
    )  # fmt: skip


def embedder(settings: Settings) -> Finding:
    """Whether the configured provider can start. ``none`` is only ever set on purpose: a choice, not a fault."""
    if settings.embedding_provider == "none":
        return Finding(
            "embedder",
            True,
            "provider 'none' chosen: no vectors are built, recall uses keyword search",
            code="embedder_none",
        )
    if settings.embedding_provider == "openai-compatible" and settings.openai_api_key is None:
        missing_key = _missing_api_key(settings.embedding_base_url)
        if missing_key is not None:
            return missing_key
    try:
        provider = build_provider(settings)
    except LosslessError as exc:
        return Finding(
            "embedder",
            False,
            f"{settings.embedding_provider}: {exc.message}",
            _fetch_command(settings),
            code="embedder_unavailable",
        )
    identity = provider.identity
    provider.close()
    return Finding(
        "embedder",
        True,
        f"{identity.provider} {identity.model} ({identity.variant}, {identity.dimension}-d)",
        code="embedder_ok",
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
        code="api_key_missing",
    )


def _is_loopback_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def index_identity(ops: Backend, conn: Any, settings: Settings) -> Finding:
    """The model the stored vectors were built with against the configured one (no model is loaded to ask)."""
    recorded = recorded_identity(ops, conn)
    if recorded is None:
        return Finding("index", True, "no vectors built yet", code="index_empty")
    try:
        wanted = build_provider(settings).identity
    except LosslessError:
        return Finding("index", True, f"built with {recorded.model} ({recorded.dimension}-d)", code="index_built")
    if wanted != recorded:
        return Finding(
            "index",
            False,
            f"vectors were built with {recorded.model}/{recorded.variant}/"
            f"{recorded.dimension}-d but {wanted.model}/{wanted.variant}/{wanted.dimension}-d is"
            " configured; the sidecar rebuilds them at its next start",
            "openclaw-lossless serve",
            code="index_model_changed",
        )
    return Finding("index", True, f"vectors match {wanted.model} ({wanted.dimension}-d)", code="index_ok")


def schema(ops: Backend, conn: Any, known: set[str]) -> Finding:
    """A store a newer version wrote is never touched by this one: say which migrations it has."""
    applied = ops.checks.applied_migrations(conn)
    if applied is None:
        return Finding("schema", True, "not migrated yet (done on first start)", code="schema_not_migrated")
    unknown = sorted(applied - known)
    if unknown:
        elsewhere = "--state-dir" if ops is SQLITE else "LOSSLESS_DATABASE_URL or LOSSLESS_DATABASE_SCHEMA"
        return Finding(
            "schema",
            False,
            f"written by a newer openclaw-lossless (migrations {', '.join(unknown)}); this version will not open it",
            f"pip install --upgrade openclaw-lossless (or use another {elsewhere})",
            code="schema_too_new",
            data={"unknown": unknown},
        )
    return Finding("schema", True, f"{len(applied)} of {len(known)} migrations applied", code="schema_ok")


def fts(ops: Backend, conn: Any) -> Finding:
    """The engine's own check of the keyword index against the messages (``checks.fts_problem``: it writes
    nothing): FTS5's on SQLite, each stored ``tsvector`` against its text's on PostgreSQL."""
    stored = ops.messages.count(conn)
    problem = ops.checks.fts_problem(conn)
    if problem is not None:
        return Finding(
            "fts",
            False,
            f"full-text index out of step with messages: {problem}",
            "openclaw-lossless reindex --fts",
            code="fts_out_of_step",
        )
    return Finding("fts", True, f"full-text index covers {stored} messages", code="fts_ok")


def forgotten(ops: Backend, conn: Any) -> Finding:
    """No message a tombstone names is stored again (``forget.resurrected``): forgetting held."""
    if not ops.checks.has_table(conn, "forgotten"):
        return Finding("forgotten", True, "nothing forgotten yet", code="forgotten_none")
    back = ops.forgetting.resurrected(conn)
    count = ops.forgetting.forgotten_count(conn)
    if back:
        return Finding(
            "forgotten",
            False,
            f"{back} stored messages carry the identity of a forgotten one",
            "openclaw-lossless forget --dry-run <msg:N ...> to see them, then forget them again",
            code="forgotten_present",
        )
    return Finding("forgotten", True, f"{count} messages forgotten; none of them is stored", code="forgotten_held")


def vectors(ops: Backend, conn: Any) -> Finding:
    """Every message has a vector or waits for one, and no vector outlived its message."""
    if not ops.vectors.in_current_format(conn):
        table = "sqlite-vec vector table" if ops is SQLITE else "vector table"
        return Finding(
            "vectors", True, f"no {table} yet (made or converted at the next start)", code="vectors_not_created"
        )
    if recorded_identity(ops, conn) is None:
        return Finding("vectors", True, "no vectors built yet", code="vectors_none_yet")
    missing, orphans = ops.vectors.unaccounted(conn)
    if orphans or missing:
        return Finding(
            "vectors",
            False,
            f"{missing} messages have no vector and are not queued; {orphans} vectors belong to no message",
            "openclaw-lossless reindex --vectors",
            code="vectors_unaccounted",
            data={"missing": missing, "orphans": orphans},
        )
    return Finding("vectors", True, "every message has a vector or is queued for one", code="vectors_ok")


def backlog(ops: Backend, conn: Any, settings: Settings) -> Finding:
    """How many messages wait for a vector; a large backlog is a note saying what drains it."""
    size = ops.backlog.size(conn)
    detail = f"{size} messages waiting to be embedded"
    if size <= BACKLOG_LARGE:
        return Finding("backlog", True, detail, code="backlog_ok", data={"size": size})
    if settings.embedding_provider == "none":
        return Finding(
            "backlog",
            True,
            f"{detail}; provider 'none' embeds nothing, so they wait (keyword search still finds them)",
            "only to add vector search: LOSSLESS_EMBEDDING_PROVIDER=local and 'openclaw-lossless model fetch';"
            " the sidecar then drains it",
            code="backlog_waits_for_provider",
            data={"size": size},
        )
    return Finding(
        "backlog",
        True,
        f"{detail}; until then keyword search alone finds them. The running sidecar drains it in the background",
        "openclaw-lossless serve (the plugin starts it), or with the sidecar stopped:"
        " openclaw-lossless reindex --vectors --missing",
        code="backlog_large",
        data={"size": size},
    )


def permissions(settings: Settings) -> Finding:
    """The state dir and what it holds (token, archives; the SQLite file and its WAL) are the owner's alone."""
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
        return Finding("permissions", False, "; ".join(loose), fix, code="permissions_loose")
    return Finding("permissions", True, "state directory 0700, files 0600", code="permissions_ok")


def disk(settings: Settings, beside: str = "") -> Finding:
    """Free space where the state dir is; ``beside`` adds what the report should say about the store's own."""
    target = settings.state_dir if settings.state_dir.exists() else settings.state_dir.parent
    while not target.exists() and target != target.parent:
        target = target.parent
    free = shutil.disk_usage(target).free
    detail = f"{free // (1024 * 1024)} MiB free on the state directory's disk{beside}"
    if free < MIN_FREE_BYTES:
        return Finding(
            "disk",
            False,
            detail,
            "free disk space, or 'openclaw-lossless prune' to archive old messages",
            code="disk_low",
            data={"freeBytes": free},
        )
    return Finding("disk", True, detail, code="disk_ok", data={"freeBytes": free})


def _fetch_command(settings: Settings) -> str:
    """The command that fetches the configured local model (the default one needs no ``--model``)."""
    default = Settings.model_fields["local_model"].default
    return "openclaw-lossless model fetch" + (
        "" if settings.local_model == default else f" --model {settings.local_model}"
    )
