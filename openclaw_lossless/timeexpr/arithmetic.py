"""Calendar arithmetic every language's rules share: months, weeks, weekends, weekdays and steps from a day.

The languages differ in how they say "last Saturday" or "two weeks ago", not in what day that is; the
resolution lives here once so that "上周六", "letzten Samstag" and "el sábado pasado" cannot drift apart.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from datetime import date, timedelta

from openclaw_lossless.timeexpr.days import DayRange

Count = tuple[int, int]  # a number people say, as a low and high bound ("a few": 2 to 4)


def month_range(year: int, month: int) -> DayRange:
    return DayRange(date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1]))


def year_range(year: int) -> DayRange:
    return DayRange(date(year, 1, 1), date(year, 12, 31))


def add_months(day: date, months: int) -> date:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def nearest(today: date, build: Callable[[int], DayRange | None]) -> DayRange | None:
    """Of the occurrences last year, this year and next (``build(year)``), the one nearest ``today``."""
    options = [r for r in (build(today.year + k) for k in (-1, 0, 1)) if r is not None]

    def distance(r: DayRange) -> tuple[int, bool]:
        away = 0 if r.first <= today <= r.last else min(abs((r.first - today).days), abs((r.last - today).days))
        return away, r.first > today  # a tie goes to the past

    return min(options, key=distance) if options else None


def weekday_before(day: date, weekday: int) -> date:
    """The last ``weekday`` (Monday 0) strictly before ``day``."""
    return day - timedelta(days=(day.weekday() - weekday - 1) % 7 + 1)


def weekday_after(day: date, weekday: int) -> date:
    """The first ``weekday`` strictly after ``day``."""
    return day + timedelta(days=(weekday - day.weekday() - 1) % 7 + 1)


def week_of(day: date) -> DayRange:
    """The Monday-to-Sunday week holding ``day``."""
    monday = day - timedelta(days=day.weekday())
    return DayRange(monday, monday + timedelta(days=6))


def weekend_of(day: date) -> DayRange:
    saturday = day - timedelta(days=day.weekday()) + timedelta(days=5)
    return DayRange(saturday, saturday + timedelta(days=1))


def safe_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def day_in_year(year: int | None, month: int, day: int, today: date) -> DayRange | None:
    """A written day of a month: in ``year``, or without one the nearest such day to ``today``."""
    if not 1 <= month <= 12:
        return None
    if year is not None:
        found = safe_date(year, month, day)
        return DayRange.day(found) if found else None

    def on(y: int) -> DayRange | None:
        found = safe_date(y, month, day)
        return DayRange.day(found) if found else None

    return nearest(today, on)


def nearest_month(month: int, today: date) -> DayRange | None:
    """ "in May": the nearest May to ``today``."""
    return nearest(today, lambda year: month_range(year, month)) if 1 <= month <= 12 else None


def relative_unit(what: str, today: date, step: int) -> list[DayRange]:
    """The week, weekend, month or year ``step`` units from ``today``'s (-1 last, 0 this, +1 next)."""
    if what == "week":
        return [week_of(today + timedelta(days=7 * step))]
    if what == "weekend":
        return [weekend_of(today + timedelta(days=7 * step))]
    if what == "month":
        shifted = add_months(today.replace(day=1), step)
        return [month_range(shifted.year, shifted.month)]
    return [year_range(today.year + step)]


def relative_weekday(weekday: int, today: date, step: int) -> list[DayRange]:
    """ "last Saturday" (the one before today), "this Saturday" (this week's), "next Saturday" (the coming one
    or the one after, as people mean either)."""
    if step < 0:
        return [DayRange.day(weekday_before(today, weekday))]
    if step > 0:
        coming = weekday_after(today, weekday)
        return [DayRange.day(coming), DayRange.day(coming + timedelta(days=7))]
    return [DayRange.day(today - timedelta(days=today.weekday() - weekday))]


def weekday_of_week(weekday: int, today: date, weeks: int) -> DayRange:
    """The ``weekday`` of the week ``weeks`` from today's: where a language names the week ("上周六" is
    the Saturday of last week, whatever day it is said)."""
    return DayRange.day(week_of(today + timedelta(days=7 * weeks)).first + timedelta(days=weekday))


def named_month(month: int, today: date, step: int) -> DayRange:
    """ "last May" (the one before this month), "next May" (the one after), "this May"."""
    if step < 0:
        return month_range(today.year if month < today.month else today.year - 1, month)
    if step > 0:
        return month_range(today.year if month > today.month else today.year + 1, month)
    return month_range(today.year, month)


def bare_weekday(weekday: int, today: date) -> list[DayRange]:
    """ "on Saturday": the last one (today included) or the coming one; the text rarely says which."""
    last = today if today.weekday() == weekday else weekday_before(today, weekday)
    return [DayRange.day(last), DayRange.day(weekday_after(today, weekday))]


def steps(count: Count, unit: str, day: date, sign: int) -> DayRange:
    """``count`` units (day, week, fortnight, weekend, month, year) before (``sign`` -1) or after (+1)
    ``day``, loose where people are loose."""
    low, high = count
    if unit == "day":
        ends = (day + timedelta(days=sign * low), day + timedelta(days=sign * high))
    elif unit in ("week", "fortnight"):
        size = 7 if unit == "week" else 14
        slack = 3 if unit == "week" else 4
        ends = (day + timedelta(days=sign * size * low), day + timedelta(days=sign * size * high))
        ends = (min(ends) - timedelta(days=slack), max(ends) + timedelta(days=slack))
    elif unit == "weekend":
        step = weekday_before if sign < 0 else weekday_after
        sunday = step(day, 6) if sign < 0 else step(day, 5) + timedelta(days=1)
        ends = (sunday + timedelta(days=sign * 7 * (low - 1)), sunday + timedelta(days=sign * 7 * (high - 1)))
        return DayRange(min(ends) - timedelta(days=1), max(ends))
    elif unit == "month":
        ends = (add_months(day, sign * low), add_months(day, sign * high))
        ends = (min(ends) - timedelta(days=15), max(ends) + timedelta(days=15))
    else:
        years = (day.year + sign * low, day.year + sign * high)
        return DayRange(date(min(years), 1, 1), date(max(years), 12, 31))
    return DayRange(min(ends), max(ends))
