"""Time as people say it: the days a text refers to ("last Saturday", "上周六", "letzten Samstag", "el sábado
pasado", "in May", "the week before 9 June 2023").

Messages and questions name time relatively, so a message's words and a question's rarely share the date they
are both about: "last Saturday" said on 8 May 2023 and "what did I do on 6 May?" meet only once each is read
against its own moment. This package turns the date expressions of a text into day ranges against a reference
day (the message's own time at capture, "now" at query time), and tells a question that asks *when* from one
that does not.

A language is one module of ``languages/`` (English, Chinese, German, Spanish), registered in ``LANGUAGES``
with a cheap test for whether a text may hold its time words; a text is read by every language whose test it
passes (a message may mix languages, and none is declared). Nothing here touches the store: callers decide
what to keep.

Why hand-written rules rather than a library: capture runs them on every stored message, inside the commit,
where the budget is tens of microseconds a message. The general parsers measured (``dateparser``'s
``search_dates``, ``ctparse``) cost milliseconds a message and pull in heavy dependencies; a precompiled
trigger-word check rejects the common message (no time words) in a few microseconds here.

Expressions anchored on an event ("two weeks before the trip", "the day after the concert") cannot be resolved
without the event's date and are skipped. Times are days in UTC, the calendar the recalled lines print.
"""

from __future__ import annotations

import re

from openclaw_lossless.timeexpr.days import DayRange, day_of
from openclaw_lossless.timeexpr.language import Language, words
from openclaw_lossless.timeexpr.languages import LANGUAGES

__all__ = ["LANGUAGES", "DayRange", "Language", "asks_when", "referenced"]

MAX_SPAN_DAYS = 366  # a range wider than a year says little about when: dropped


def _languages(language: str | None) -> tuple[Language, ...]:
    return tuple(LANGUAGES.values()) if language is None else (LANGUAGES[language],)


def referenced(text: str, at: float, language: str | None = None, limit: int = 8) -> list[DayRange]:
    """The distinct day ranges ``text`` refers to, read as if said at ``at`` (seconds), at most ``limit``;
    in every language (``language`` None) or in one (its code: "en", "zh", "de", "es").

    Read a sentence at a time (no expression spans two), tokenised once for all languages, and only by the
    languages whose words the sentence holds: a long message costs its tokenising pass plus the rules its few
    dated sentences call for. A time a calendar cannot hold (a request's ``now`` in the year 1,600,000) or a
    day it would reach ("in 9000 years") refers to nothing: this only weighs candidates, so it never refuses
    a turn.
    """
    found: list[DayRange] = []
    readers = _languages(language)
    try:
        spans = [span for chunk in _sentences(text) for span in _read(chunk, at, readers)]
    except (ValueError, OverflowError, OSError):
        return found
    for span in spans:
        if (span.last - span.first).days < MAX_SPAN_DAYS and span not in found:
            found.append(span)
            if len(found) == limit:
                break
    return found


_SENTENCE_END = re.compile(r"(?<=[.!?;\n])\s+")


def _sentences(text: str) -> list[str]:
    return [text] if len(text) < 200 else _SENTENCE_END.split(text)


_ALL_WORDS = frozenset(word for lang in LANGUAGES.values() for word in lang.trigger_words)
_ALL_CHARACTERS = "".join(sorted({c for lang in LANGUAGES.values() for c in lang.trigger_characters}))


def _read(text: str, at: float, readers: tuple[Language, ...]) -> list[DayRange]:
    present = words(text)
    if present.isdisjoint(_ALL_WORDS) and (text.isascii() or not _ALL_CHARACTERS):
        return []  # the common sentence: no language's word, no other script
    triggered = [lang for lang in readers if lang.triggered(text, present)]
    if not triggered:
        return []
    today = day_of(at)
    return [span for lang in triggered for span in lang.ranges(text, today, present)]


def asks_when(text: str, language: str | None = None) -> bool:
    """Whether a question asks for a time ("when did ...", "什么时候", "wann", "cuándo", "how long ago ...")."""
    return any(lang.asks_when(text) for lang in _languages(language))
