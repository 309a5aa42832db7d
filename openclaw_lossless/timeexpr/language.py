"""What a language brings to ``timeexpr``: a cheap test for whether a text may name a time, its rules, and
how a question asks *when*.

The test runs on every stored message and every prompt, so it must be cheaper than any rule: a language
written with spaces names the words its rules cannot match without (one set check against the text's words,
tokenised once for all languages); a language written without spaces names the characters (a check that an
all-ASCII text skips at once). Only a language whose test passes runs its rules.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date

from openclaw_lossless.timeexpr.days import DayRange

Resolved = tuple[tuple[int, int], list[DayRange]] | None
Words = frozenset[str]

_SEPARATORS = str.maketrans(
    dict.fromkeys(string.punctuation + "\u2018\u2019\u201c\u201d\u2013\u2014\u2026\u00bf\u00a1", " ")
)
_YEAR_TOKEN = re.compile(r"(?:19|20)\d\d")
_ORDINAL_TOKEN = re.compile(r"\d+(?:st|nd|rd|th)")


def words(text: str) -> Words:
    """The text's lower-case words, with ``#year`` for a year-like number and ``#ordinal`` for "5th".

    Each rule names the words it cannot match without, the rarest set first; a rule runs only on a text holding
    them, so the common message (no time words) costs one tokenising pass and one set check, and the rest
    only the rules their words call for.
    """
    found = set(text.lower().translate(_SEPARATORS).split())  # str methods: several times a regex's speed
    if any(_YEAR_TOKEN.fullmatch(w) for w in found if w[:1].isdigit()):
        found.add("#year")
    if any(_ORDINAL_TOKEN.fullmatch(w) for w in found if w[:1].isdigit()):
        found.add("#ordinal")
    return frozenset(found)


def word_set(*groups: Iterable[str]) -> Words:
    return frozenset(word for group in groups for word in group)


def either(words: Iterable[str]) -> str:
    """An alternation of ``words``, longest first, so "a couple of" wins over "a"."""
    return "|".join(sorted((re.escape(w).replace(r"\ ", r"\s+") for w in words), key=len, reverse=True))


@dataclass(frozen=True)
class Rule:
    """A pattern and what its match resolves to against the reference day (its span and day ranges)."""

    pattern: re.Pattern[str]
    resolve: Callable[[re.Match[str], date], Resolved]
    needs: tuple[Words, ...] = ()  # the text must hold a word of each set (``words``)


def apply(rules: Sequence[Rule], text: str, today: date, present: Words) -> list[DayRange]:
    """The day ranges the rules find, in order; an earlier rule's match keeps later ones off its words."""
    taken: list[tuple[int, int]] = []
    found: list[DayRange] = []
    for rule in rules:
        if any(present.isdisjoint(need) for need in rule.needs):
            continue
        for match in rule.pattern.finditer(text):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            resolved = rule.resolve(match, today)
            if resolved is None:
                continue
            span, days = resolved
            taken.append(span)
            found += days
    return found


@dataclass(frozen=True)
class Language:
    """One language's time expressions. ``triggered`` is the cheap test (the text and its ``words``);
    ``ranges`` reads the day ranges of a text that passed it; ``asks_when`` tells a question asking when."""

    code: str
    triggered: Callable[[str, Words], bool]
    ranges: Callable[[str, date, Words], list[DayRange]]
    asks_when: Callable[[str], bool]


def by_words(triggers: Words) -> Callable[[str, Words], bool]:
    """The test of a language written with spaces: the text holds one of ``triggers``."""

    def triggered(text: str, present: Words) -> bool:
        return not present.isdisjoint(triggers)

    return triggered


def by_characters(characters: str) -> Callable[[str, Words], bool]:
    """The test of a language written without spaces: the text holds one of ``characters``."""
    hint = re.compile(f"[{re.escape(characters)}]")

    def triggered(text: str, present: Words) -> bool:
        return not text.isascii() and hint.search(text) is not None

    return triggered
