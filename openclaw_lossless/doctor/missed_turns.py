"""Turns the host recorded that the store does not have, from the host's own transcripts.

The host's transcripts are the ground truth of what was said; ``transcripts.gaps.find_gaps`` compares them with
the store, read-only on both sides. Missing messages in sessions the sidecar follows fail the run (memory
lost them until a catch-up or an import brings them in); older history never imported is a note.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from openclaw_lossless.config import Settings
from openclaw_lossless.doctor.findings import Finding
from openclaw_lossless.errors import LosslessError
from openclaw_lossless.selection import SessionSelection
from openclaw_lossless.store.sqlite.connection import open_connection, sqlite_module
from openclaw_lossless.transcripts.gaps import GapReport, find_gaps

CHECK = "transcript-gaps"
SESSIONS_SHOWN = 50  # doctor --json lists at most this many sessions (the report says how many there are)


def selection_for(settings: Settings, plugin_config: dict[str, Any]) -> SessionSelection:
    """The sessions the user chose to capture: the plugin entry's patterns, else the sidecar's settings."""
    include = plugin_config.get("includeSessions") or settings.include_sessions
    exclude = plugin_config.get("excludeSessions") or settings.exclude_sessions
    return SessionSelection.of(
        include if isinstance(include, list) else [], exclude if isinstance(exclude, list) else []
    )


def gaps(settings: Settings, openclaw_state: Path, plugin_config: dict[str, Any], import_flags: str) -> Finding:
    """The gap finding; ``import_flags`` is what ``import`` must be told to reach these transcripts and store."""
    if settings.database_url is not None:
        return _postgres_gaps(settings, openclaw_state, plugin_config, import_flags)
    database = settings.database_path
    if not database.exists():
        return Finding(CHECK, True, f"no store yet at {database}: the first turn creates it", code="gaps_no_store")
    try:
        conn = open_connection(database, readonly=True)
    except LosslessError as exc:
        return Finding(CHECK, True, f"not checked: {exc.message}", code="gaps_unchecked")
    try:
        report = find_gaps(conn, openclaw_state, selection=selection_for(settings, plugin_config))
    except sqlite_module().DatabaseError as exc:
        return Finding(CHECK, True, f"not checked: the store cannot be read ({exc})", code="gaps_unchecked")
    finally:
        conn.close()
    return _finding(report, openclaw_state, import_flags)


def _postgres_gaps(
    settings: Settings, openclaw_state: Path, plugin_config: dict[str, Any], import_flags: str
) -> Finding:
    """The same finding on a PostgreSQL store, read in doctor's read-only session (its driver imported only here)."""
    try:
        import psycopg

        from openclaw_lossless.doctor.postgres import connect
        from openclaw_lossless.store.backend import postgres
        from openclaw_lossless.store.postgres import checks
    except ImportError:  # the database finding names the extra to install
        return Finding(CHECK, True, "not checked: the PostgreSQL driver is not installed", code="gaps_unchecked")
    assert settings.database_url is not None
    opened = connect(settings.database_url.get_secret_value(), settings.database_schema)
    if isinstance(opened, Finding):
        unreachable = "not checked: the store cannot be reached (see the database finding)"
        return Finding(CHECK, True, unreachable, code="gaps_unchecked")
    with opened as conn:
        if not checks.has_table(conn, "messages"):
            return Finding(CHECK, True, "no store yet: the first turn creates it", code="gaps_no_store")
        try:
            selection = selection_for(settings, plugin_config)
            report = find_gaps(conn, openclaw_state, selection=selection, ops=postgres())
        except psycopg.Error as exc:
            return Finding(CHECK, True, f"not checked: the store cannot be read ({exc})", code="gaps_unchecked")
    return _finding(report, openclaw_state, import_flags)


def _when(epoch: float | None) -> str:
    return "?" if epoch is None else datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _data(report: GapReport) -> dict[str, Any]:
    data = report.as_dict()
    data["sessionsTotal"] = len(report.sessions)
    data["sessions"] = data["sessions"][:SESSIONS_SHOWN]
    return data


def _finding(report: GapReport, openclaw_state: Path, import_flags: str) -> Finding:
    data = _data(report)
    problems = f"; {'; '.join(report.errors)}" if report.errors else ""
    if report.missing:
        agents = ", ".join(f"{agent} ({count})" for agent, count in sorted(report.agents.items()))
        sessions = sorted({gap.session_key or gap.session_id for gap in report.sessions if gap.followed})
        shown = ", ".join(sessions[:5]) + (f" and {len(sessions) - 5} more" if len(sessions) > 5 else "")
        imports = " && ".join(
            f"openclaw-lossless import --agent {agent}{import_flags}" for agent in sorted(report.agents)
        )
        return Finding(
            CHECK,
            False,
            f"{report.missing} messages the host recorded are not in the store, from {_when(report.first_at)} to"
            f" {_when(report.last_at)}; agents: {agents}; sessions: {shown}{problems}",
            f"start the sidecar (it catches up from the host's transcripts by itself), or bring them in now: {imports}",
            code="turns_missing",
            data=data,
        )
    if report.not_imported:
        return Finding(
            CHECK,
            True,
            f"every turn since the plugin was set up is stored; {report.not_imported} older messages in"
            f" {openclaw_state} were never imported{problems}",
            f"to add them: openclaw-lossless import{import_flags}",
            code="history_not_imported",
            data=data,
        )
    return Finding(
        CHECK,
        not report.errors,
        (
            f"every one of the {report.scanned} messages in the host's transcripts is stored"
            if report.scanned
            else "the host's transcripts hold no messages yet"
        )
        + problems,
        None if not report.errors else "check the files named above (permissions, or a damaged archive)",
        code="gaps_none" if not report.errors else "transcripts_unreadable",
        data=data,
    )
