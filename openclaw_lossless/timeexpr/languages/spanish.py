"""Spanish time expressions: the rule set ``timeexpr`` reads Spanish text with.

What each phrase resolves to (the same days as the English phrase it translates):

- days: "hoy", "ayer", "anteayer", "antier", "anoche", "mañana" (not "la mañana", "por la mañana"),
  "pasado mañana", "esta noche", "esta mañana";
- "el sábado pasado", "el pasado sábado", "la semana pasada", "el mes pasado", "el año pasado", "el fin de
  semana pasado"; "esta semana", "este mes"; "la próxima semana", "la semana que viene", "el próximo lunes",
  "el mes que viene";
- a bare weekday ("el sábado"): the last one or the coming one;
- counts: "hace tres días", "hace un par de semanas", "hace unos meses"; "dentro de dos días", "en tres días";
- dates: "8 de mayo de 2023", "el 8 de mayo" (the nearest 8 May), "mayo de 2023", "en mayo" (the nearest
  May), "en 2022".
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from openclaw_lossless.timeexpr.days import DayRange
from openclaw_lossless.timeexpr.language import Language, Resolved, Rule, Words, apply, either, word_set
from openclaw_lossless.timeexpr.vocabulary import Vocabulary, key, span

MONTHS = {"enero": 1, "febrero": 2, "marzo": 3, "abril": 4, "mayo": 5, "junio": 6, "julio": 7, "agosto": 8,
          "septiembre": 9, "setiembre": 9, "octubre": 10, "noviembre": 11, "diciembre": 12}  # fmt: skip
WEEKDAYS = {"lunes": 0, "martes": 1, "miércoles": 2, "miercoles": 2, "jueves": 3, "viernes": 4, "sábado": 5,
            "sabado": 5, "domingo": 6}  # fmt: skip
QUANTITIES = {"un": (1, 1), "una": (1, 1), "uno": (1, 1), "dos": (2, 2), "tres": (3, 3), "cuatro": (4, 4),
              "cinco": (5, 5), "seis": (6, 6), "siete": (7, 7), "ocho": (8, 8), "nueve": (9, 9), "diez": (10, 10),
              "once": (11, 11), "doce": (12, 12), "un par de": (2, 2), "unos": (2, 4), "unas": (2, 4),
              "unos pocos": (2, 4), "unas pocas": (2, 4), "algunos": (2, 4), "algunas": (2, 4),
              "varios": (3, 7), "varias": (3, 7)}  # fmt: skip
UNITS = {"día": "day", "días": "day", "dia": "day", "dias": "day", "semana": "week", "semanas": "week",
         "fin de semana": "weekend", "fines de semana": "weekend", "mes": "month", "meses": "month",
         "año": "year", "años": "year", "quincena": "fortnight", "quincenas": "fortnight"}  # fmt: skip
REL_UNITS = {"semana": "week", "fin de semana": "weekend", "mes": "month", "año": "year"}
DAY_WORDS = {"anteayer": -2, "antier": -2, "antes de ayer": -2, "ayer": -1, "anoche": -1, "hoy": 0,
             "esta noche": 0, "esta mañana": 0, "esta tarde": 0, "pasado mañana": 2, "mañana": 1}  # fmt: skip
LAST = ("pasado", "pasada")
NEXT = ("próximo", "próxima", "proximo", "proxima", "que viene", "siguiente")
THIS = ("este", "esta")

_COUNT = rf"(?P<n>\d{{1,3}}|{either(QUANTITIES)})"
_UNIT = rf"(?P<unit>{either(UNITS)})"
_MONTH = rf"(?P<month>{either(MONTHS)})"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_MORNING = re.compile(r"\b(?:la|una|cada|esa|aquella|toda|buena|buenas)\s+$", re.I)
_WHAT = rf"(?P<what>{either((*REL_UNITS, *WEEKDAYS, *MONTHS))})"


WORDS = Vocabulary(MONTHS, WEEKDAYS, QUANTITIES, UNITS, REL_UNITS, LAST, NEXT)


def _day_word(match: re.Match[str], today: date) -> Resolved:
    if key(match["word"]) == "mañana" and _MORNING.search(match.string, 0, match.start()):
        return None  # "por la mañana", "cada mañana": the morning, not tomorrow
    return span(match), [DayRange.day(today + timedelta(days=DAY_WORDS[key(match["word"])]))]


def _relative(match: re.Match[str], today: date) -> Resolved:
    """The three word orders ("el sábado pasado", "el pasado sábado", "este sábado") as one."""
    what = match["what"] or match["what2"] or match["what3"]
    rel = match["rel"] or match["rel2"] or match["rel3"]
    return span(match), WORDS.relative(rel, what, today)


_UNIT_WORDS = word_set(*(unit.split() for unit in UNITS))
_MONTH_WORDS = word_set(MONTHS)
_REL_WORDS = word_set(*(word.split() for word in (*LAST, *NEXT, *THIS)))
RULES = [
    Rule(
        re.compile(rf"\b(?P<day>[0-3]?\d)\s+de\s+{_MONTH}\b(?:\s+(?:de|del)\s+{_YEAR}\b)?", re.I),
        WORDS.on_date,
        (_MONTH_WORDS,),
    ),
    Rule(re.compile(rf"\b{_MONTH}\s+(?:de|del)\s+{_YEAR}\b", re.I), WORDS.month_year, (_MONTH_WORDS,)),
    Rule(re.compile(rf"\bhace\s+{_COUNT}\s+{_UNIT}\b", re.I), WORDS.ago, (word_set(["hace"]), _UNIT_WORDS)),
    Rule(
        re.compile(rf"\b(?:dentro\s+de|en)\s+{_COUNT}\s+{_UNIT}\b(?!\s+(?:antes|después|despues))", re.I),
        WORDS.ahead,
        (_UNIT_WORDS, word_set(["dentro", "en"])),
    ),
    Rule(
        re.compile(
            rf"\b(?:(?:el|la)\s+)?(?:(?P<rel2>{either((*LAST, *NEXT))})\s+{_WHAT}"
            rf"|{_WHAT.replace('what', 'what2')}\s+(?P<rel>{either((*LAST, *NEXT))})"
            rf"|(?P<rel3>{either(THIS)})\s+{_WHAT.replace('what', 'what3')})\b",
            re.I,
        ),
        _relative,
        (_REL_WORDS, word_set(*(w.split() for w in REL_UNITS), WEEKDAYS, MONTHS)),
    ),
    Rule(
        re.compile(rf"\b(?P<word>{either(DAY_WORDS)})\b", re.I),
        _day_word,
        (word_set(["anteayer", "antier", "ayer", "anoche", "hoy", "noche", "mañana", "tarde"]),),
    ),
    Rule(
        re.compile(rf"\b(?:el\s+)?(?P<weekday>{either(WEEKDAYS)})\b(?!\s+(?:pasad|próxim|proxim|que\s+viene))", re.I),
        WORDS.bare_weekday,
        (word_set(WEEKDAYS),),
    ),
    Rule(
        re.compile(
            rf"\b(?:en|durante|desde|hasta|a\s+principios\s+de|a\s+mediados\s+de|a\s+finales\s+de)\s+{_MONTH}\b", re.I
        ),
        WORDS.bare_month,
        (_MONTH_WORDS, word_set(["en", "durante", "desde", "hasta", "de"])),
    ),
    Rule(
        re.compile(rf"\b(?:en(?:\s+el\s+año)?|desde|hasta|durante)\s+{_YEAR}\b", re.I),
        WORDS.year,
        (word_set(["#year"]),),
    ),
]
_WHEN = re.compile(
    r"\bcu[áa]ndo\b(?=[^.!\n]*\?)|¿\s*cu[áa]ndo\b|\bcuándo\b|\b(?:qu[ée]|cu[áa]l)\s+(?:d[íi]a|fecha|año|mes|semana)\b"
    r"|\bhace\s+cu[áa]nto\b|\bdesde\s+cu[áa]ndo\b",
    re.I,
)


def ranges(text: str, today: date, present: Words) -> list[DayRange]:
    return apply(RULES, text, today, present)


_WHEN_HINTS = (
    "cuándo",
    "cuando",
    "cuánto",
    "cuanto",
    "qué",
    "que ",
    "cuál",
    "cual ",
)  # substrings of every match: most prompts skip the pattern


def asks_when(text: str) -> bool:
    lower = text.lower()
    return any(hint in lower for hint in _WHEN_HINTS) and _WHEN.search(text) is not None


LANGUAGE = Language("es", ranges, asks_when, trigger_words=word_set(*(rule.needs[0] for rule in RULES)))
