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
from functools import cache

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
    """One language's time expressions. Its cheap test: the text holds one of ``trigger_words`` (a language
    written with spaces) or of ``trigger_characters`` (one written without); ``ranges`` reads the day ranges
    of a text that passed it; ``asks_when`` tells a question asking when."""

    code: str
    ranges: Callable[[str, date, Words], list[DayRange]]
    asks_when: Callable[[str], bool]
    trigger_words: Words = frozenset()
    trigger_characters: str = ""

    def triggered(self, text: str, present: Words) -> bool:
        """Whether ``text`` (whose words are ``present``) may hold this language's time words."""
        if not present.isdisjoint(self.trigger_words):
            return True
        return bool(self.trigger_characters) and not text.isascii() and _holds(text, self.trigger_characters)


def _holds(text: str, characters: str) -> bool:
    return _hint(characters).search(text) is not None


@cache
def _hint(characters: str) -> re.Pattern[str]:
    return re.compile(f"[{re.escape(characters)}]")
