"""English time expressions: the rule set ``timeexpr`` reads English text with.

Each rule is a pattern and a resolver from its match and the reference day to day ranges. Rules run in order
and an earlier rule's match keeps later ones off its words, so "the week before 9 June 2023" is one range,
not also 9 June, and "last Saturday" is not also a bare "Saturday". What each phrase resolves to:

- dates: "2023-05-08", "8 May 2023", "May 8th, 2023", "the 8th of May" (no year: the nearest 8 May),
  "May 2023"; "in May", "early June" (the nearest such month); "in 2022" (the year);
- days: "today", "tonight", "this morning", "yesterday", "last night", "tomorrow", "the day before
  yesterday", "the other day" (the week before);
- "last / this / next" + week, weekend, month, year, a weekday, a month or a season ("last May" said in
  January: May of the year before; "next Friday": the coming Friday or the one after, as people mean
  either); "the past week"; a bare weekday ("on Saturday": the last one or the coming one);
- counts: "two weeks ago", "a few days ago", "in 3 months", "a couple of weekends ago"; a duration up to
  now ("I've had them for 3 years", "for the past two weeks"): since about then;
- anchored on a date: "the week before 9 June 2023", "the Friday before 15 July 2023", "two weekends
  before 17 July 2023", "the day after 8 May 2023", "the week of 23 August 2023".
Anchored on an event ("two weeks before the trip", "the day after the concert"): nothing; the event's date
is not in the text. Seasons are the northern hemisphere's (summer: June to August).
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta

from openclaw_lossless.timeexpr.arithmetic import add_months as _add_months
from openclaw_lossless.timeexpr.arithmetic import bare_weekday, named_month, relative_unit, relative_weekday
from openclaw_lossless.timeexpr.arithmetic import month_range as _month
from openclaw_lossless.timeexpr.arithmetic import nearest as _nearest
from openclaw_lossless.timeexpr.arithmetic import safe_date as _safe_date
from openclaw_lossless.timeexpr.arithmetic import steps as _steps
from openclaw_lossless.timeexpr.arithmetic import week_of as _week
from openclaw_lossless.timeexpr.arithmetic import weekday_after as _weekday_after
from openclaw_lossless.timeexpr.arithmetic import weekday_before as _weekday_before
from openclaw_lossless.timeexpr.arithmetic import weekend_of as _weekend_of
from openclaw_lossless.timeexpr.days import DayRange
from openclaw_lossless.timeexpr.language import Language, Resolved, Rule, Words, apply, either, word_set

MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
MONTH_ABBREVIATIONS = {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
                       "oct": 10, "nov": 11, "dec": 12}  # fmt: skip
WEEKDAYS = {name.lower(): number for number, name in enumerate(calendar.day_name)}  # Monday 0
QUANTITIES = {"a": (1, 1), "an": (1, 1), "one": (1, 1), "two": (2, 2), "three": (3, 3), "four": (4, 4),
              "five": (5, 5), "six": (6, 6), "seven": (7, 7), "eight": (8, 8), "nine": (9, 9), "ten": (10, 10),
              "eleven": (11, 11), "twelve": (12, 12), "a couple of": (2, 2), "a couple": (2, 2),
              "couple of": (2, 2), "a few": (2, 4), "few": (2, 4), "several": (3, 7)}  # fmt: skip
SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11), "winter": (12, 2)}


_FULL_MONTH = either(MONTHS)
_ANY_MONTH = either([*MONTHS, *MONTH_ABBREVIATIONS])
_WEEKDAY = either(WEEKDAYS)
_SEASON = either(SEASONS)
_COUNT = rf"(?P<n>\d{{1,3}}|{either(QUANTITIES)})"
_UNIT = r"(?P<unit>day|weekend|week|fortnight|month|year)s?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"

# A date people write: what the anchored rules need after "before" / "after", and rules of their own.
ABSOLUTE = [
    re.compile(rf"{_YEAR}-(?P<month_number>[01]?\d)-{_DAY}\b", re.I),
    re.compile(rf"(?:the\s+)?{_DAY}(?:\s+of)?\s+(?P<month>{_ANY_MONTH})\b\.?(?:,?\s+{_YEAR}\b)?", re.I),
    re.compile(rf"(?P<month>{_ANY_MONTH})\.?\s+(?:the\s+)?{_DAY}\b(?![:.]?\d)(?:,?\s+{_YEAR}\b)?", re.I),
    re.compile(rf"(?P<month>{_ANY_MONTH}),?\s+{_YEAR}\b", re.I),
]


def ranges(text: str, today: date, present: Words) -> list[DayRange]:
    """The day ranges a sentence (whose words are ``present``) names, read as said on ``today``, in the order
    the rules find them."""
    return apply(RULES, text, today, present)


def asks_when(text: str) -> bool:
    return _WHEN.search(text) is not None


_WHEN = re.compile(
    r"\bwhen\s+(?:did|do|does|was|were|is|are|will|would|has|have|had|'s)\b"
    r"|\b(?:what|which)\s+(?:date|day|year|month|week|time\s+of\s+year)\b|\bhow\s+long\s+(?:ago|has|have|had)\b"
    r"|\bsince\s+when\b",
    re.I,
)


# ---- helpers ----


def _season(name: str, start_year: int) -> DayRange:
    first, last = SEASONS[name.lower()]
    end_year = start_year if last >= first else start_year + 1
    return DayRange(date(start_year, first, 1), _month(end_year, last).last)


def _count(word: str) -> tuple[int, int]:
    return (int(word), int(word)) if word.isdigit() else QUANTITIES[re.sub(r"\s+", " ", word.lower())]


def _span(match: re.Match[str]) -> tuple[int, int]:
    return match.start(), match.end()


# ---- dates ----


def absolute(match: re.Match[str], today: date) -> DayRange | None:
    """The date an ``ABSOLUTE`` match names (the nearest one to ``today`` when it names no year)."""
    groups = match.groupdict()
    month_name = (groups.get("month") or "").lower()
    month = MONTHS.get(month_name) or MONTH_ABBREVIATIONS.get(month_name) or int(groups.get("month_number") or 0)
    if not 1 <= month <= 12:
        return None
    year = int(groups["year"]) if groups.get("year") else None
    if groups.get("day") is None:
        return _month(year, month) if year is not None else None
    day = int(groups["day"])
    if year is not None:
        found = _safe_date(year, month, day)
        return DayRange.day(found) if found else None

    def on(y: int) -> DayRange | None:
        found = _safe_date(y, month, day)
        return DayRange.day(found) if found else None

    return _nearest(today, on)


def _absolute_rule(match: re.Match[str], today: date) -> Resolved:
    """A written date; one that does not exist ("31 February") names no day, and no part of it does either."""
    found = absolute(match, today)
    return _span(match), [found] if found else []


def _date_at(text: str, position: int, today: date) -> tuple[int, DayRange] | None:
    """A date written at ``position`` of ``text``, and where it ends."""
    for pattern in ABSOLUTE:
        match = pattern.match(text, position)
        if match:
            found = absolute(match, today)
            if found is not None and found.first == found.last:
                return match.end(), found
    return None


def _anchored(match: re.Match[str], today: date) -> Resolved:
    """ "the week before 9 June 2023", "two weekends before 17 July 2023": a step from a written date."""
    anchor = _date_at(match.string, match.end(), today)
    if anchor is None:
        return None  # anchored on an event ("the day after the concert"): its date is not in the text
    end, day = anchor
    before = match["dir"].lower() in ("before", "prior to")
    if match["single"]:
        found = _one_step(match["single"].lower(), day.first, before)
    else:
        found = _steps(_count(match["n"]), match["unit"].lower(), day.first, -1 if before else 1)
    return ((match.start(), end), [found]) if found else None


def _week_of(match: re.Match[str], today: date) -> Resolved:
    anchor = _date_at(match.string, match.end(), today)
    if anchor is None:
        return None
    end, day = anchor
    unit = match["unit"].lower()
    found = _week(day.first) if unit == "week" else _weekend_of(day.first) if unit == "weekend" else None
    if unit == "month":
        found = _month(day.first.year, day.first.month)
    return ((match.start(), end), [found]) if found else None


def _one_step(what: str, day: date, before: bool) -> DayRange | None:
    """The day, week, weekend, month or weekday just before (or after) ``day``."""
    one = timedelta(days=1)
    if what == "day":
        return DayRange.day(day - one if before else day + one)
    if what in ("week", "month"):
        size = timedelta(days=7 if what == "week" else 31)
        return DayRange(day - size, day - one) if before else DayRange(day + one, day + size)
    if what == "weekend":
        sunday = _weekday_before(day, 6)
        return DayRange(sunday - one, sunday) if before else _weekend_of(_weekday_after(day, 5))
    weekday = WEEKDAYS[what]
    return DayRange.day(_weekday_before(day, weekday) if before else _weekday_after(day, weekday))


def _ago(match: re.Match[str], today: date) -> Resolved:
    found = _steps(_count(match["n"]), match["unit"].lower(), today, -1)
    return (_span(match), [found]) if found else None


def _ahead(match: re.Match[str], today: date) -> Resolved:
    found = _steps(_count(match["n"]), match["unit"].lower(), today, 1)
    return (_span(match), [found]) if found else None


# ---- days named relative to today ----

_DAY_WORDS = {"the day before yesterday": -2, "the day after tomorrow": 2, "yesterday": -1, "last night": -1,
              "today": 0, "tonight": 0, "this morning": 0, "this afternoon": 0, "this evening": 0,
              "tomorrow": 1}  # fmt: skip


def _day_word(match: re.Match[str], today: date) -> Resolved:
    offset = _DAY_WORDS[re.sub(r"\s+", " ", match[0].lower())]
    return _span(match), [DayRange.day(today + timedelta(days=offset))]


def _other_day(match: re.Match[str], today: date) -> Resolved:
    return _span(match), [DayRange(today - timedelta(days=7), today - timedelta(days=1))]


def _relative(match: re.Match[str], today: date) -> Resolved:
    """ "last / this / next" + week, weekend, month, year, weekday, month name or season."""
    rel = re.sub(r"\s+", " ", match["rel"].lower())
    what = match["what"].lower()
    step = -1 if rel in ("last", "past", "this past") else 1 if rel in ("next", "coming", "this coming") else 0
    if rel in ("past", "this past") and what in ("week", "month", "year"):
        size = {"week": 7, "month": 30, "year": 365}[what]
        return _span(match), [DayRange(today - timedelta(days=size), today - timedelta(days=1))]
    found = _relative_unit(what, today, step)
    return (_span(match), found) if found else None


def _relative_unit(what: str, today: date, step: int) -> list[DayRange]:
    if what in WEEKDAYS:
        return relative_weekday(WEEKDAYS[what], today, step)
    if what in MONTHS:
        return [named_month(MONTHS[what], today, step)]
    if what in SEASONS:
        return [_named_season(what, today, step)]
    return relative_unit(what, today, step)


def _named_season(name: str, today: date, step: int) -> DayRange:
    occurrences = [_season(name, today.year + k) for k in (-2, -1, 0, 1)]
    if step < 0:
        return [r for r in occurrences if r.last < today][-1]
    if step > 0:
        return next(r for r in occurrences if r.first > today)
    current = [r for r in occurrences if r.first <= today <= r.last]
    return current[0] if current else next(r for r in occurrences if r.first.year == today.year)


def _bare_weekday(match: re.Match[str], today: date) -> Resolved:
    return _span(match), bare_weekday(WEEKDAYS[match["weekday"].lower()], today)


def _bare_weekend(match: re.Match[str], today: date) -> Resolved:
    this = _weekend_of(today)
    if this.first > today:
        return _span(match), [_weekend_of(today - timedelta(days=7)), this]
    return _span(match), [this]


def _bare_month(match: re.Match[str], today: date) -> Resolved:
    month = MONTHS[match["month"].lower()]
    found = _nearest(today, lambda year: _month(year, month))
    return (_span(match), [found]) if found else None


def _year(match: re.Match[str], today: date) -> Resolved:
    year = int(match["year"])
    return _span(match), [DayRange(date(year, 1, 1), date(year, 12, 31))]


def _ordinal(match: re.Match[str], today: date) -> Resolved:
    day = int(match["day"])

    options = []
    for offset in (-1, 0, 1):  # that day of the month before, of this month, of the month after: the nearest
        month = _add_months(today.replace(day=1), offset)
        found = _safe_date(month.year, month.month, day)
        if found is not None:
            options.append(found)
    if not options:
        return None
    return _span(match), [DayRange.day(min(options, key=lambda d: (abs((d - today).days), d > today)))]


_UNITS = word_set(("day", "days", "week", "weeks", "weekend", "weekends", "fortnight", "fortnights", "month", "months",
               "year", "years"))  # fmt: skip
_MONTH_WORDS = word_set(MONTHS, MONTH_ABBREVIATIONS)
_STEP = rf"(?:{_COUNT}\s+{_UNIT}|the\s+(?P<single>day|weekend|week|month|{_WEEKDAY}))"
RULES: list[Rule] = [
    Rule(
        re.compile(rf"\b{_STEP}\s+(?P<dir>before|after|prior\s+to|following)\s+(?:the\s+)?", re.I),
        _anchored,
        (word_set(("before", "after", "prior", "following")), word_set(_MONTH_WORDS, ["#year"])),
    ),
    Rule(
        re.compile(r"\bthe\s+(?P<unit>weekend|week|month)\s+of\s+(?:the\s+)?", re.I),
        _week_of,
        (word_set(("week", "weekend", "month")), word_set(_MONTH_WORDS, ["#year"])),
    ),
    Rule(re.compile(rf"\b{ABSOLUTE[0].pattern}", re.I), _absolute_rule, (word_set(["#year"]),)),
    *(Rule(re.compile(rf"\b{p.pattern}", re.I), _absolute_rule, (_MONTH_WORDS,)) for p in ABSOLUTE[1:]),
    Rule(re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.I), _ago, (word_set(["ago"]), _UNITS)),
    Rule(  # "I've had them for 3 years", "for the past two weeks": since about then
        re.compile(
            r"(?:(?:['\u2019]ve|\bhave|\bhas|\bhad)\b[^.!?\n]{0,60}?\bfor\s+(?:the\s+(?:past|last)\s+)?"
            rf"|\bfor\s+the\s+(?:past|last)\s+){_COUNT}\s+{_UNIT}\b",
            re.I,
        ),
        _ago,
        (_UNITS, word_set(["for"])),
    ),
    Rule(
        re.compile(rf"\bin\s+{_COUNT}\s+{_UNIT}\b(?!\s+(?:ago|before|after))", re.I),
        _ahead,
        (_UNITS, word_set(["in"])),
    ),
    Rule(
        re.compile(rf"\b(?:{either(_DAY_WORDS)})\b", re.I),
        _day_word,
        (word_set(("yesterday", "today", "tonight", "tomorrow", "night", "morning", "afternoon", "evening")),),
    ),
    Rule(re.compile(r"\bthe\s+other\s+day\b", re.I), _other_day, (word_set(["day"]), word_set(["other"]))),
    Rule(
        re.compile(
            r"\b(?P<rel>this\s+past|this\s+coming|last|past|this|next|coming)\s+"
            rf"(?P<what>weekend|week|month|year|{_WEEKDAY}|{_FULL_MONTH}|{_SEASON})\b",
            re.I,
        ),
        _relative,
        (
            word_set(("weekend", "week", "month", "year"), WEEKDAYS, MONTHS, SEASONS),
            word_set(("this", "past", "last", "next", "coming")),
        ),
    ),
    Rule(re.compile(r"\b(?:over|on|at|during|for)\s+the\s+weekend\b", re.I), _bare_weekend, (word_set(["weekend"]),)),
    Rule(re.compile(rf"\b(?:on\s+)?(?P<weekday>{_WEEKDAY})\b", re.I), _bare_weekday, (word_set(WEEKDAYS),)),
    Rule(
        re.compile(
            r"\b(?:in|during|since|until|till|by|through|throughout|early|mid|late|end\s+of|beginning\s+of"
            rf"|start\s+of|middle\s+of)\s+(?:the\s+month\s+of\s+)?(?P<month>{_FULL_MONTH})\b",
            re.I,
        ),
        _bare_month,
        (word_set(MONTHS),),
    ),
    Rule(
        re.compile(rf"\b(?:in|during|since|of|from|back\s+in|around|until|by)\s+{_YEAR}\b", re.I),
        _year,
        (word_set(["#year"]),),
    ),
    Rule(re.compile(rf"\bon\s+the\s+{_DAY}\b", re.I), _ordinal, (word_set(["#ordinal"]), word_set(["on"]))),
]
# A text holding none of these words (most messages) is done after one set check.
TRIGGER_WORDS = word_set(*(rule.needs[0] for rule in RULES))
LANGUAGE = Language("en", ranges, asks_when, trigger_words=TRIGGER_WORDS)
