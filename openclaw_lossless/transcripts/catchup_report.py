"""What catch-up reports of itself: the brief ``/healthz`` shows and the fuller report of ``/stats``.

Kept apart from ``catchup.py`` (the thread and its rules) so the services and the routes that show catch-up
import only its report.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CatchUpBrief:
    """Catch-up as ``/healthz`` shows it: ``off``, ``idle`` or ``running``, its last run and error, targets queued."""

    state: str
    last_run_at: str | None
    last_error: str | None
    pending: int
    watching: tuple[str, ...] = ()  # watch mode's sources: "openclaw", "claude-code" (docs/watch-mode.md)


@dataclass(frozen=True)
class CatchUpReport:
    """Catch-up as ``/stats`` shows it: the brief, and what its runs imported."""

    state: str
    last_run_at: str | None
    last_error: str | None
    last_imported: int
    total_imported: int
    pending: int
    runs: int
    watching: tuple[str, ...] = ()
