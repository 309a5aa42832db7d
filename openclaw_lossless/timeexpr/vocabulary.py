"""A language's calendar words and the resolvers that turn a rule's named groups into days.

A language written with spaces names the same parts in its phrases (a count and a unit, a month, a weekday,
a year, "last" or "next"); only its words and word order differ. Its module keeps its own patterns and builds
one ``Vocabulary`` for the resolvers, so "vor zwei Wochen" and "hace dos semanas" resolve by one rule of
arithmetic (``arithmetic.py``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

from openclaw_lossless.timeexpr.arithmetic import (
    Count,
    bare_weekday,
    day_in_year,
    month_range,
    named_month,
    nearest_month,
    relative_unit,
    relative_weekday,
    steps,
    year_range,
)
from openclaw_lossless.timeexpr.days import DayRange
from openclaw_lossless.timeexpr.language import Resolved


def span(match: re.Match[str]) -> tuple[int, int]:
    return match.start(), match.end()


def key(word: str) -> str:
    """A matched word as the tables spell it: lower case, one space between the words of a phrase."""
    return re.sub(r"\s+", " ", word.lower())


@dataclass(frozen=True)
class Vocabulary:
    """The tables a language's resolvers read; each resolver takes the named groups its rules capture."""

    months: Mapping[str, int]
    weekdays: Mapping[str, int]
    quantities: Mapping[str, Count]
    units: Mapping[str, str]
    rel_units: Mapping[str, str]
    last: tuple[str, ...]
    next: tuple[str, ...]

    def count(self, word: str) -> Count:
        return (int(word), int(word)) if word.isdigit() else self.quantities[key(word)]

    def ago(self, match: re.Match[str], today: date) -> Resolved:
        """``n`` ``unit`` back: "vor zwei Wochen", "hace tres días"."""
        return span(match), [steps(self.count(match["n"]), self.units[key(match["unit"])], today, -1)]

    def ahead(self, match: re.Match[str], today: date) -> Resolved:
        return span(match), [steps(self.count(match["n"]), self.units[key(match["unit"])], today, 1)]

    def relative(self, rel: str, what: str, today: date) -> list[DayRange]:
        """ "last" / "next" / "this" with a unit, a weekday or a month."""
        rel, what = key(rel), key(what)
        step = -1 if rel in self.last else 1 if rel in self.next else 0
        if what in self.weekdays:
            return relative_weekday(self.weekdays[what], today, step)
        if what in self.months:
            return [named_month(self.months[what], today, step)]
        return relative_unit(self.rel_units[what], today, step)

    def bare_weekday(self, match: re.Match[str], today: date) -> Resolved:
        return span(match), bare_weekday(self.weekdays[key(match["weekday"])], today)

    def on_date(self, match: re.Match[str], today: date) -> Resolved:
        """``day`` with ``month`` (a name) or ``month_number``, and ``year`` when given (else the nearest)."""
        groups = match.groupdict()
        month = self.months[key(groups["month"])] if groups.get("month") else int(groups["month_number"])
        found = day_in_year(int(groups["year"]) if groups.get("year") else None, month, int(groups["day"]), today)
        return span(match), [found] if found else []

    def month_year(self, match: re.Match[str], today: date) -> Resolved:
        return span(match), [month_range(int(match["year"]), self.months[key(match["month"])])]

    def bare_month(self, match: re.Match[str], today: date) -> Resolved:
        found = nearest_month(self.months[key(match["month"])], today)
        return (span(match), [found]) if found else None

    def year(self, match: re.Match[str], today: date) -> Resolved:
        return span(match), [year_range(int(match["year"]))]
