"""Time as people say it beyond English: "上周六", "letzten Samstag" and "el sábado pasado" are the Saturday
"last Saturday" is, read against the same fixed moment; ordinary sentences in those languages that name no
day resolve to nothing, and English reads as it did."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from openclaw_lossless.timeexpr import LANGUAGES, asks_when, referenced

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

MONDAY = date(2023, 5, 8)  # a Monday
THURSDAY = date(2023, 6, 1)


def days(text: str, said: date = MONDAY, language: str | None = None) -> list[tuple[str, str]]:
    moment = datetime(said.year, said.month, said.day, 13, tzinfo=UTC).timestamp()
    return [(r.first.isoformat(), r.last.isoformat()) for r in referenced(text, moment, language)]


def one(first: str, last: str | None = None) -> list[tuple[str, str]]:
    return [(first, last or first)]


CHINESE = [
    ("上周六我们去爬山了。", one("2023-05-06")),
    ("上星期六", one("2023-05-06")),
    ("三天前我给她打了电话", one("2023-05-05")),
    ("昨天下雨了", one("2023-05-07")),
    ("前天我在北京", one("2023-05-06")),
    ("大前天", one("2023-05-05")),
    ("明天见", one("2023-05-09")),
    ("后天出发", one("2023-05-10")),
    ("上个月我换了工作", one("2023-04-01", "2023-04-30")),
    ("下个月", one("2023-06-01", "2023-06-30")),
    ("上周很忙", one("2023-05-01", "2023-05-07")),
    ("上周一直下雨", one("2023-05-01", "2023-05-07")),  # "一直" is "all along", not Monday
    ("这周末去露营", one("2023-05-13", "2023-05-14")),
    ("上周末", one("2023-05-06", "2023-05-07")),
    ("两周前", one("2023-04-21", "2023-04-27")),
    ("两个星期前", one("2023-04-21", "2023-04-27")),
    ("一个月前", one("2023-03-24", "2023-04-23")),
    ("几天前", one("2023-05-04", "2023-05-06")),
    ("十天前", one("2023-04-28")),
    ("去年", one("2022-01-01", "2022-12-31")),
    ("2023年5月8日", one("2023-05-08")),
    ("5月8号开会", one("2023-05-08")),
    ("2023年6月", one("2023-06-01", "2023-06-30")),
    ("我们六月去日本", one("2023-06-01", "2023-06-30")),
    ("我2022年搬的家", one("2022-01-01", "2022-12-31")),
    ("上週六", one("2023-05-06")),  # Traditional
]
GERMAN = [
    ("Letzten Samstag waren wir klettern.", one("2023-05-06")),
    ("am vergangenen Samstag", one("2023-05-06")),
    ("vor zwei Wochen", one("2023-04-21", "2023-04-27")),
    ("vor drei Tagen", one("2023-05-05")),
    ("vor ein paar Tagen", one("2023-05-04", "2023-05-06")),
    ("vor einem Monat", one("2023-03-24", "2023-04-23")),
    ("gestern", one("2023-05-07")),
    ("vorgestern", one("2023-05-06")),
    ("wir sehen uns morgen", one("2023-05-09")),
    ("übermorgen", one("2023-05-10")),
    ("letzte Woche", one("2023-05-01", "2023-05-07")),
    ("nächste Woche", one("2023-05-15", "2023-05-21")),
    ("letzten Monat", one("2023-04-01", "2023-04-30")),
    ("letztes Jahr", one("2022-01-01", "2022-12-31")),
    ("letztes Wochenende", one("2023-05-06", "2023-05-07")),
    ("in drei Tagen", one("2023-05-11")),
    ("am 8. Mai 2023", one("2023-05-08")),
    ("am 8. Mai", one("2023-05-08")),
    ("08.05.2023", one("2023-05-08")),
    ("im Juni", one("2023-06-01", "2023-06-30")),
    ("Mai 2023", one("2023-05-01", "2023-05-31")),
    ("im Jahr 2022", one("2022-01-01", "2022-12-31")),
]
SPANISH = [
    ("El sábado pasado fuimos a escalar.", one("2023-05-06")),
    ("el pasado sábado", one("2023-05-06")),
    ("hace tres días", one("2023-05-05")),
    ("hace un par de semanas", one("2023-04-21", "2023-04-27")),
    ("hace unos días", one("2023-05-04", "2023-05-06")),
    ("ayer", one("2023-05-07")),
    ("anteayer", one("2023-05-06")),
    ("anoche", one("2023-05-07")),
    ("hoy", one("2023-05-08")),
    ("nos vemos mañana", one("2023-05-09")),
    ("pasado mañana", one("2023-05-10")),
    ("la semana pasada", one("2023-05-01", "2023-05-07")),
    ("la semana que viene", one("2023-05-15", "2023-05-21")),
    ("la próxima semana", one("2023-05-15", "2023-05-21")),
    ("el mes pasado", one("2023-04-01", "2023-04-30")),
    ("el año pasado", one("2022-01-01", "2022-12-31")),
    ("el fin de semana pasado", one("2023-05-06", "2023-05-07")),
    ("dentro de dos días", one("2023-05-10")),
    ("el 8 de mayo de 2023", one("2023-05-08")),
    ("el 8 de mayo", one("2023-05-08")),
    ("mayo de 2023", one("2023-05-01", "2023-05-31")),
    ("en junio", one("2023-06-01", "2023-06-30")),
    ("en 2022", one("2022-01-01", "2022-12-31")),
]


@pytest.mark.parametrize(("text", "expected"), CHINESE + GERMAN + SPANISH)
def test_expressions_resolve_to_the_days_meant(text: str, expected: list[tuple[str, str]]) -> None:
    assert days(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        # Chinese: time-ish characters, no day
        "以前天气很好",  # holds "前天", says "before, the weather"
        "我每周六都去游泳",  # every Saturday
        "一周三次",  # three times a week
        "我们等了三个月了吗",
        "这个问题之后天天都有",
        "我学了三年中文",
        "密码错误，请重试",
        "3号线在这里换乘",
        # German
        "Guten Morgen! Wie geht's?",
        "Am Morgen trinke ich Kaffee.",
        "Das war der letzte Tag im Urlaub.",
        "Wir treffen uns jeden Samstag.",
        "Ich habe seit Jahren keinen Urlaub gemacht.",
        "Das Passwort ist falsch.",
        # Spanish
        "Por la mañana fui al gimnasio.",
        "Cada mañana tomo café.",
        "Los sábados juego al fútbol.",
        "Me encanta la mayonesa.",
        "No sé cuándo llegará el paquete",
        "La contraseña es incorrecta.",
    ],
)
def test_what_names_no_day_resolves_to_nothing(text: str) -> None:
    assert days(text) == []


def test_last_saturday_is_a_week_before_when_said_on_a_saturday_and_the_chinese_week_is_named() -> None:
    saturday, sunday = date(2023, 5, 13), date(2023, 5, 14)
    assert days("letzten Samstag", saturday) == one("2023-05-06")
    assert days("el sábado pasado", saturday) == one("2023-05-06")
    # "上周六" names last week's Saturday: on a Sunday, not yesterday but the one before
    assert days("上周六", sunday) == one("2023-05-06")
    assert days("last Saturday", sunday) == one("2023-05-13")
    assert days("上周六", THURSDAY) == days("last Saturday", THURSDAY) == one("2023-05-27")


def test_months_and_years_are_read_across_year_boundaries() -> None:
    january = date(2024, 1, 15)
    assert days("上个月", january) == one("2023-12-01", "2023-12-31")
    assert days("letzten Monat", january) == one("2023-12-01", "2023-12-31")
    assert days("el mes pasado", january) == one("2023-12-01", "2023-12-31")
    assert days("im Dezember", january) == one("2023-12-01", "2023-12-31")
    assert days("la semana pasada", date(2024, 1, 3)) == one("2023-12-25", "2023-12-31")


def test_a_message_mixing_languages_is_read_in_each() -> None:
    assert days("Yesterday 我们见面了, y el sábado pasado también.") == [
        ("2023-05-07", "2023-05-07"),
        ("2023-05-06", "2023-05-06"),
    ]


def test_one_language_can_be_asked_for() -> None:
    assert days("ayer y gestern", language="de") == one("2023-05-07")
    assert days("上周六", language="en") == []
    assert set(LANGUAGES) >= {"en", "zh", "de", "es"}


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("我们什么时候去的北京？", True),
        ("你哪天有空？", True),
        ("上周六我们说了什么", False),
        ("Wann waren wir in Berlin?", True),
        ("Seit wann hast du die Katze?", True),
        ("Was haben wir letzten Samstag gemacht?", False),
        ("¿Cuándo fuimos a Madrid?", True),
        ("¿Qué día es la reunión?", True),
        ("¿Qué hicimos el sábado pasado?", False),
    ],
)
def test_a_question_that_asks_when(question: str, asks: bool) -> None:
    assert asks_when(question) is asks
