"""The web UI's status page: what ``/stats`` answers, and the last hour drawn as small charts.

Why the last hour beside the numbers since the start: an operator opening the page asks "is it slow now?" and
"is the backlog draining?". Each operation gets a chart of its p50 and p95 per minute, the backlog a chart of
its size and one of the worker's drain rate, with a sentence saying which way it goes. The numbers behind
each chart are in a table under it (the chart's text alternative, and the figures to copy).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from openclaw_lossless.api.responses import StatsResponse, wire
from openclaw_lossless.observe.last_hour import MinuteBacklog, MinuteLatency
from openclaw_lossless.service.status import Status
from openclaw_lossless.ui.charts import Chart, Series, svg
from openclaw_lossless.ui.html import page


@dataclass(frozen=True)
class LatencyRow:
    at: str  # the minute, HH:MM UTC
    calls: int
    p50_ms: float | None
    p95_ms: float | None


@dataclass(frozen=True)
class LatencyView:
    """One operation's last hour: its calls, its chart and the minutes that had calls, newest first."""

    operation: str
    calls: int
    chart: Markup
    rows: list[LatencyRow]


@dataclass(frozen=True)
class BacklogRow:
    at: str
    backlog: int | None
    drain_per_s: float | None


@dataclass(frozen=True)
class BacklogView:
    """The backlog's last hour: which way it goes in words, its charts, and the sampled minutes, newest first."""

    trend: str
    size_chart: Markup | None
    drain_chart: Markup | None
    rows: list[BacklogRow]


@dataclass(frozen=True)
class ModeView:
    """How turns reach the store: ``watch`` (read from transcripts, docs/watch-mode.md) or ``engine``."""

    name: str
    sentence: str


def status_page(request: Request, status: Status) -> HTMLResponse:
    stats = wire(StatsResponse, status.stats())
    hour = status.last_hour()
    latency = [latency_view(op, minutes) for op, minutes in sorted(hour.latency.items())]
    mode = mode_view(stats["catchUp"]["watching"])
    return page(request, "status.html", stats=stats, mode=mode, latency=latency, backlog=backlog_view(hour.backlog))


def mode_view(watching: list[str]) -> ModeView:
    """The mode in words, from what the sidecar watches (``catchUp.watching``)."""
    if "openclaw" in watching:
        also = " and Claude Code's sessions" if "claude-code" in watching else ""
        return ModeView(
            "watch",
            f"every turn OpenClaw records is stored from its transcripts within seconds{also}, whichever engine"
            " the host runs; recalled into the prompt only when lossless is the selected engine.",
        )
    if "claude-code" in watching:
        return ModeView(
            "watch",
            "Claude Code's sessions are stored from their transcripts; OpenClaw's turns arrive from the plugin"
            " when lossless is the selected engine.",
        )
    return ModeView(
        "engine",
        "turns arrive from the plugin when lossless is OpenClaw's selected context engine (serve --watch would"
        " store them from the host's transcripts whichever engine runs).",
    )


def minute_label(start: float) -> str:
    return time.strftime("%H:%M UTC", time.gmtime(start))


def latency_view(operation: str, minutes: list[MinuteLatency]) -> LatencyView:
    """An operation's chart (p50 and p95 per minute) and the minutes that had calls."""
    busy = [m for m in minutes if m.count]
    calls = sum(m.count for m in busy)
    worst = max((m.p95_ms or 0.0 for m in busy), default=0.0)
    chart = Chart(
        chart_id=f"chart-latency-{operation}",
        title=f"{operation}: latency per minute, last hour",
        description=f"{calls} call{'' if calls == 1 else 's'} in {len(busy)} of the last 60 minutes; the highest"
        f" p95 of a minute was {worst:.3g} ms. The table below lists each minute.",
        unit="ms",
        series=[
            Series("p50", "series-p50", [m.p50_ms for m in minutes]),
            Series("p95", "series-p95", [m.p95_ms for m in minutes]),
        ],
        first_label=minute_label(minutes[0].start) if minutes else "",
    )
    rows = [LatencyRow(minute_label(m.start), m.count, m.p50_ms, m.p95_ms) for m in reversed(busy)]
    return LatencyView(operation, calls, svg(chart), rows)


def backlog_view(minutes: list[MinuteBacklog]) -> BacklogView:
    """The backlog's size and drain rate per sampled minute, and a sentence saying which way it goes."""
    sampled = [m for m in minutes if m.backlog is not None]
    rows = [BacklogRow(minute_label(m.start), m.backlog, m.drain_per_s) for m in reversed(sampled)]
    if not minutes:
        return BacklogView(trend(sampled), None, None, rows)
    first = minute_label(minutes[0].start)
    size = Chart(
        "chart-backlog",
        "Embedding backlog, last hour",
        f"Messages waiting for their vectors, sampled in {len(sampled)} of the last 60 minutes. {trend(sampled)}",
        "msgs",
        [Series("waiting", "series-backlog", [m.backlog for m in minutes], across_gaps=True)],
        first_label=first,
    )
    drain = Chart(
        "chart-drain",
        "Drain rate, last hour",
        "Messages embedded per second between one sample and the one before it. The table below lists them.",
        "/s",
        [Series("embedded per second", "series-drain", [m.drain_per_s for m in minutes], across_gaps=True)],
        first_label=first,
    )
    return BacklogView(trend(sampled), svg(size), svg(drain), rows)


def trend(sampled: list[MinuteBacklog]) -> str:
    """Whether the backlog drains, in words, from its first and last sample of the hour."""
    if not sampled:
        return "Not sampled in the last hour."
    first, last = sampled[0], sampled[-1]
    since = minute_label(first.start)
    if last.backlog == 0:
        return "Empty: every stored message has its vector." if first.backlog == 0 else f"Drained since {since}."
    if len(sampled) == 1:
        return f"{last.backlog} waiting now; later samples will show whether it drains."
    if (last.backlog or 0) < (first.backlog or 0):
        return f"Draining: {first.backlog} waiting at {since}, {last.backlog} now."
    if (last.backlog or 0) > (first.backlog or 0):
        return f"Growing: {first.backlog} waiting at {since}, {last.backlog} now."
    return f"Steady at {last.backlog} since {since}."
