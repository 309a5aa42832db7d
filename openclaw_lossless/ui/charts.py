"""Small line charts for the status page, drawn on the server as inline SVG.

Why SVG built here: the UI's Content-Security-Policy allows no inline script or style and no asset from
elsewhere; an ``<svg>`` element in the page is neither. Geometry is in attributes (``viewBox``, ``points``),
colours in classes of ``style.css``, so dark mode applies. Each chart carries a ``<title>`` and a ``<desc>``
that say what it shows in words, and the page puts its numbers in a table beside it.

Every value drawn is a number formatted here; the only text (title, description, labels) is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

WIDTH, HEIGHT = 600, 150
LEFT, RIGHT, TOP, BOTTOM = 84, 8, 10, 22  # room for the value labels left and the time labels below
DOT_RADIUS = 2.5


@dataclass(frozen=True)
class Series:
    """One line: its name (legend), the class that colours it, one value per point (None: no value there).

    ``across_gaps``: a level sampled now and then (the backlog) is joined across the minutes without a sample;
    a rate of calls (latency) is not, since a minute without calls had no latency to draw.
    """

    label: str
    css: str
    values: Sequence[float | None]
    across_gaps: bool = False


@dataclass(frozen=True)
class Chart:
    """A chart: its element id, what it shows in words, the unit of its values and its lines."""

    chart_id: str
    title: str
    description: str
    unit: str
    series: Sequence[Series]
    first_label: str = "60 min ago"
    last_label: str = "now"


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above ``value``: a round top for the axis."""
    if not value > 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= value)


def svg(chart: Chart) -> Markup:
    """The chart as an ``<svg>`` element: a baseline, the top value, the times at both ends, each line."""
    values = [v for s in chart.series for v in s.values if v is not None]
    top = nice_ceiling(max(values, default=0.0))
    title_id, desc_id = f"{chart.chart_id}-title", f"{chart.chart_id}-desc"
    parts = [
        Markup(
            '<svg class="chart" id="{}" viewBox="0 0 {} {}" width="{}" height="{}" role="img" aria-labelledby="{} {}">'
        ).format(chart.chart_id, WIDTH, HEIGHT, WIDTH, HEIGHT, title_id, desc_id),
        Markup('<title id="{}">{}</title><desc id="{}">{}</desc>').format(
            title_id, chart.title, desc_id, chart.description
        ),
        _frame(top, chart),
    ]
    parts += [_line(series, top) for series in chart.series]
    parts.append(Markup("</svg>"))
    return Markup("").join(parts)


def _frame(top: float, chart: Chart) -> Markup:
    """The axis lines and their labels: the top value and 0 on the left, the first and last time below."""
    bottom_y, right_x = HEIGHT - BOTTOM, WIDTH - RIGHT
    return Markup(
        '<line class="chart-grid" x1="{left}" y1="{top_y}" x2="{right}" y2="{top_y}"/>'
        '<line class="chart-axis" x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}"/>'
        '<text class="chart-label" x="{label_x}" y="{top_text}" text-anchor="end">{top_value}</text>'
        '<text class="chart-label" x="{label_x}" y="{bottom}" text-anchor="end">0</text>'
        '<text class="chart-label" x="{left}" y="{time_y}" text-anchor="start">{first}</text>'
        '<text class="chart-label" x="{right}" y="{time_y}" text-anchor="end">{last}</text>'
    ).format(
        left=LEFT,
        right=right_x,
        top_y=TOP,
        bottom=bottom_y,
        label_x=LEFT - 6,
        top_text=TOP + 8,
        top_value=f"{top:g} {chart.unit}",
        time_y=HEIGHT - 4,
        first=chart.first_label,
        last=chart.last_label,
    )


def _line(series: Series, top: float) -> Markup:
    """One series: a polyline through each run of consecutive values, and a dot at every value."""
    points = [(_x(n, len(series.values)), _y(v, top)) for n, v in enumerate(series.values) if v is not None]
    runs: list[list[tuple[float, float]]] = [[]]
    for n, value in enumerate(series.values):
        if value is None:
            if not series.across_gaps:
                runs.append([])
        else:
            runs[-1].append((_x(n, len(series.values)), _y(value, top)))
    drawn = [
        Markup('<polyline class="chart-line {}" points="{}"/>').format(series.css, _points(run))
        for run in runs
        if len(run) > 1
    ]
    drawn += [
        Markup('<circle class="chart-dot {}" cx="{:.1f}" cy="{:.1f}" r="{}"/>').format(series.css, x, y, DOT_RADIUS)
        for x, y in points
    ]
    return Markup("").join(drawn)


def _points(run: list[tuple[float, float]]) -> str:
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in run)


def _x(n: int, count: int) -> float:
    return LEFT + (WIDTH - LEFT - RIGHT) * (n / (count - 1) if count > 1 else 1.0)


def _y(value: float, top: float) -> float:
    return TOP + (HEIGHT - TOP - BOTTOM) * (1 - min(max(value, 0.0), top) / top)
