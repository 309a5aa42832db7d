"""Time as people say it: the days a text refers to ("last Saturday", "in May", "the week before 9 June 2023").

Messages and questions name time relatively, so a message's words and a question's rarely share the date they
are both about: "last Saturday" said on 8 May 2023 and "what did I do on 6 May?" meet only once each is read
against its own moment. This package turns the date expressions of a text into day ranges against a reference
day (the message's own time at capture, "now" at query time), and tells a question that asks *when* from one
that does not.

The rules of a language are data in a module of their own (``english.py``); another language is another
module registered in ``GRAMMARS``. Nothing here touches the store: callers decide what to keep.

Why hand-written rules rather than a library: capture runs them on every stored message, inside the commit,
where the budget is tens of microseconds a message. The general parsers measured (``dateparser``'s
``search_dates``, ``ctparse``) cost milliseconds a message and pull in heavy dependencies; a precompiled
trigger-word check rejects the common message (no time words) in a few microseconds here.

Expressions anchored on an event ("two weeks before the trip", "the day after the concert") cannot be resolved
without the event's date and are skipped. Times are days in UTC, the calendar the recalled lines print.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

import openclaw_lossless.timeexpr.english as english
from openclaw_lossless.timeexpr.days import DayRange, day_of

__all__ = ["GRAMMARS", "DayRange", "Grammar", "asks_when", "referenced"]

MAX_SPAN_DAYS = 366  # a range wider than a year says little about when: dropped


@dataclass(frozen=True)
class Grammar:
    """One language's rules: the day ranges a text names, and whether a question asks when."""

    ranges: Callable[[str, date], list[DayRange]]
    asks_when: Callable[[str], bool]


GRAMMARS: dict[str, Grammar] = {"en": Grammar(english.ranges, english.asks_when)}


def referenced(text: str, at: float, language: str = "en", limit: int = 8) -> list[DayRange]:
    """The distinct day ranges ``text`` refers to, read as if said at ``at`` (seconds), at most ``limit``.

    A time a calendar cannot hold (a request's ``now`` in the year 1,600,000) or a day it would reach ("in
    9000 years") refers to nothing: this only weighs candidates, so it never refuses a turn.
    """
    found: list[DayRange] = []
    try:
        spans = GRAMMARS[language].ranges(text, day_of(at))
    except (ValueError, OverflowError, OSError):
        return found
    for span in spans:
        if (span.last - span.first).days < MAX_SPAN_DAYS and span not in found:
            found.append(span)
            if len(found) == limit:
                break
    return found


def asks_when(text: str, language: str = "en") -> bool:
    """Whether a question asks for a time ("when did ...", "what date ...", "how long ago ...")."""
    return GRAMMARS[language].asks_when(text)
