"""German time expressions: the rule set ``timeexpr`` reads German text with.

What each phrase resolves to (the same days as the English phrase it translates):

- days: "heute", "gestern", "vorgestern", "morgen" (not the noun: "heute Morgen", "am Morgen"), "übermorgen",
  "gestern Abend", "heute Abend";
- "letzte / vergangene / vorige / diese / nächste / kommende" + Woche, Wochenende, Monat, Jahr, a weekday
  ("letzten Samstag": the Saturday before today) or a month ("letzten Mai");
- a bare weekday ("am Samstag"): the last one or the coming one;
- counts: "vor zwei Wochen", "vor ein paar Tagen", "vor einem Monat"; "in drei Tagen";
- dates: "8. Mai 2023", "am 8. Mai" (the nearest 8 May), "08.05.2023", "Mai 2023", "im Mai" (the nearest
  May), "im Jahr 2022".
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from openclaw_lossless.timeexpr.days import DayRange
from openclaw_lossless.timeexpr.language import Language, Resolved, Rule, Words, apply, either, word_set
from openclaw_lossless.timeexpr.vocabulary import Vocabulary, span

MONTHS = {"januar": 1, "jänner": 1, "februar": 2, "märz": 3, "april": 4, "mai": 5, "juni": 6, "juli": 7,
          "august": 8, "september": 9, "oktober": 10, "november": 11, "dezember": 12}  # fmt: skip
WEEKDAYS = {"montag": 0, "dienstag": 1, "mittwoch": 2, "donnerstag": 3, "freitag": 4, "samstag": 5,
            "sonnabend": 5, "sonntag": 6}  # fmt: skip
QUANTITIES = {"ein": (1, 1), "einem": (1, 1), "einer": (1, 1), "eine": (1, 1), "zwei": (2, 2), "drei": (3, 3),
              "vier": (4, 4), "fünf": (5, 5), "sechs": (6, 6), "sieben": (7, 7), "acht": (8, 8), "neun": (9, 9),
              "zehn": (10, 10), "elf": (11, 11), "zwölf": (12, 12), "ein paar": (2, 4), "paar": (2, 4),
              "einigen": (3, 7), "ein oder zwei": (1, 2), "zwei oder drei": (2, 3),
              "ein bis zwei": (1, 2), "zwei bis drei": (2, 3)}  # fmt: skip
UNITS = {"tag": "day", "tage": "day", "tagen": "day", "woche": "week", "wochen": "week", "wochenende": "weekend",
         "wochenenden": "weekend", "monat": "month", "monate": "month", "monaten": "month", "monats": "month",
         "jahr": "year", "jahre": "year", "jahren": "year", "jahres": "year"}  # fmt: skip
REL_UNITS = {"woche": "week", "wochenende": "weekend", "monat": "month", "monats": "month", "jahr": "year",
             "jahres": "year"}  # fmt: skip
DAY_WORDS = {"vorgestern": -2, "gestern": -1, "heute": 0, "morgen": 1, "übermorgen": 2}
LAST = ("letzte", "letzten", "letzter", "letztes", "vergangene", "vergangenen", "vergangener", "vergangenes",
        "vorige", "vorigen", "voriger", "voriges")  # fmt: skip
NEXT = ("nächste", "nächsten", "nächster", "nächstes", "kommende", "kommenden", "kommender", "kommendes")
THIS = ("diese", "diesen", "dieser", "dieses")

_COUNT = rf"(?P<n>\d{{1,3}}|{either(QUANTITIES)})"
_UNIT = rf"(?P<unit>{either(UNITS)})"
_MONTH = rf"(?P<month>{either(MONTHS)})"
_YEAR = r"(?P<year>(?:19|20)\d\d)"


WORDS = Vocabulary(MONTHS, WEEKDAYS, QUANTITIES, UNITS, REL_UNITS, LAST, NEXT)


def _day_word(match: re.Match[str], today: date) -> Resolved:
    return span(match), [DayRange.day(today + timedelta(days=DAY_WORDS[match["word"].lower()]))]


def _relative(match: re.Match[str], today: date) -> Resolved:
    return span(match), WORDS.relative(match["rel"], match["what"], today)


_UNIT_WORDS = word_set(UNITS)
_ENGLISH_MONTHS = ("april", "august", "september", "november")
_MONTH_WORDS = word_set(MONTHS)
RULES = [
    Rule(re.compile(rf"\b(?P<day>[0-3]?\d)\.\s*{_MONTH}\b(?:\s+{_YEAR}\b)?", re.I), WORDS.on_date, (_MONTH_WORDS,)),
    Rule(
        re.compile(rf"\b(?P<day>[0-3]?\d)\.(?P<month_number>[01]?\d)\.{_YEAR}\b", re.I),
        WORDS.on_date,
        (word_set(["#year"]),),
    ),
    Rule(  # "Mai 2023"; "August 2023" is English as well, and English reads it
        re.compile(rf"\b(?P<month>{either(m for m in MONTHS if m not in _ENGLISH_MONTHS)})\s+{_YEAR}\b", re.I),
        WORDS.month_year,
        (_MONTH_WORDS,),
    ),
    Rule(re.compile(rf"\bvor\s+{_COUNT}\s+{_UNIT}\b", re.I), WORDS.ago, (word_set(["vor"]), _UNIT_WORDS)),
    Rule(
        re.compile(rf"\b(?:in|nach)\s+{_COUNT}\s+{_UNIT}\b", re.I), WORDS.ahead, (_UNIT_WORDS, word_set(["in", "nach"]))
    ),
    Rule(
        re.compile(
            rf"\b(?P<rel>{either((*LAST, *NEXT, *THIS))})\s+(?P<what>{either((*REL_UNITS, *WEEKDAYS, *MONTHS))})\b",
            re.I,
        ),
        _relative,
        (word_set(LAST, NEXT, THIS), word_set(REL_UNITS, WEEKDAYS, MONTHS)),
    ),
    Rule(
        # lower-case "morgen" is tomorrow; "Morgen" the morning ("heute Morgen"), but at the start of a sentence
        re.compile(r"\b(?P<word>(?i:vorgestern|gestern|heute|übermorgen)|morgen|(?:^|(?<=[.!?]\s))Morgen)\b"),
        _day_word,
        (word_set(DAY_WORDS),),
    ),
    Rule(
        re.compile(rf"(?<!jeden\s)(?<!jedem\s)\b(?:am\s+)?(?P<weekday>{either(WEEKDAYS)})\b", re.I),
        WORDS.bare_weekday,
        (word_set(WEEKDAYS),),
    ),
    Rule(
        re.compile(rf"\b(?:im|seit|bis|ab|anfang|mitte|ende)\s+{_MONTH}\b", re.I),
        WORDS.bare_month,
        (_MONTH_WORDS, word_set(["im", "seit", "bis", "ab", "anfang", "mitte", "ende"])),
    ),
    Rule(re.compile(rf"\b(?:im\s+jahre?|im|seit|von|bis)\s+{_YEAR}\b", re.I), WORDS.year, (word_set(["#year"]),)),
]
_WHEN = re.compile(
    r"\bwann\b|\b(?:an\s+welchem|welches|welchen|in\s+welchem|welcher)\s+(?:tag|datum|jahr|monat|woche)\b"
    r"|\bwie\s+lange\s+(?:ist\s+es\s+)?her\b|\bseit\s+wann\b",
    re.I,
)


def ranges(text: str, today: date, present: Words) -> list[DayRange]:
    return apply(RULES, text, today, present)


_WHEN_HINTS = ("wann", "welch", "lange")  # substrings of every match: most prompts skip the pattern


def asks_when(text: str) -> bool:
    lower = text.lower()
    return any(hint in lower for hint in _WHEN_HINTS) and _WHEN.search(text) is not None


LANGUAGE = Language("de", ranges, asks_when, trigger_words=word_set(*(rule.needs[0] for rule in RULES)))
