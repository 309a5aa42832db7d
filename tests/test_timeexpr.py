"""Time as people say it: relative and written dates resolve to the days a person means, read against the
moment they were said; what cannot be resolved (an event's date) resolves to nothing rather than a guess."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from openclaw_lossless.timeexpr import DayRange, asks_when, referenced

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

MONDAY = date(2023, 5, 8)  # a Monday


def at(day: date, hour: int = 13) -> float:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC).timestamp()


def days(text: str, said: date = MONDAY) -> list[tuple[str, str]]:
    return [(r.first.isoformat(), r.last.isoformat()) for r in referenced(text, at(said))]


def one(first: str, last: str | None = None) -> list[tuple[str, str]]:
    return [(first, last or first)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Last Saturday I climbed Castle Rock with Dana.", one("2023-05-06")),
        ("I went to a support group yesterday", one("2023-05-07")),
        ("we talked about it last night", one("2023-05-07")),
        ("the day before yesterday was rough", one("2023-05-06")),
        ("Tonight we cook", one("2023-05-08")),
        ("see you tomorrow", one("2023-05-09")),
        ("the day after tomorrow", one("2023-05-10")),
        ("I started a new job two weeks ago", one("2023-04-21", "2023-04-27")),
        ("a few days ago I called her", one("2023-05-04", "2023-05-06")),
        ("3 days ago", one("2023-05-05")),
        ("I've had them for 3 years now", one("2020-01-01", "2020-12-31")),
        ("we have been friends for four years", one("2019-01-01", "2019-12-31")),
        ("for the past two weeks", one("2023-04-21", "2023-04-27")),
        ("last week was busy", one("2023-05-01", "2023-05-07")),
        ("this week", one("2023-05-08", "2023-05-14")),
        ("next week", one("2023-05-15", "2023-05-21")),
        ("the past week", one("2023-05-01", "2023-05-07")),
        ("last weekend we went camping", one("2023-05-06", "2023-05-07")),
        ("this weekend", one("2023-05-13", "2023-05-14")),
        ("last month", one("2023-04-01", "2023-04-30")),
        ("next month", one("2023-06-01", "2023-06-30")),
        ("last year", one("2022-01-01", "2022-12-31")),
        ("I painted it in 2022", one("2022-01-01", "2022-12-31")),
        ("we went camping in June", one("2023-06-01", "2023-06-30")),
        ("Last May we moved", one("2022-05-01", "2022-05-31")),
        ("last summer", one("2022-06-01", "2022-08-31")),
        ("the other day", one("2023-05-01", "2023-05-07")),
        ("in 3 days", one("2023-05-11")),
        ("on the 5th", one("2023-05-05")),
        ("It was on 8 May, 2023.", one("2023-05-08")),
        ("May 8th, 2023", one("2023-05-08")),
        ("2023-05-08", one("2023-05-08")),
        ("the 8th of May", one("2023-05-08")),
        ("in May 2023", one("2023-05-01", "2023-05-31")),
        ("the week before 9 June 2023", one("2023-06-02", "2023-06-08")),
        ("The Friday before 15 July 2023", one("2023-07-14")),
        ("the weekend before 17 July 2023", one("2023-07-15", "2023-07-16")),
        ("two weekends before 17 July 2023", one("2023-07-08", "2023-07-09")),
        ("the day after 8 May 2023", one("2023-05-09")),
        ("The week of 23 August 2023", one("2023-08-21", "2023-08-27")),
    ],
)
def test_expressions_resolve_to_the_days_meant(text: str, expected: list[tuple[str, str]]) -> None:
    assert days(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "two weeks before the trip",
        "the day after the concert",
        "I may go if it fits",
        "I have 3 kids and 2 cats",
        "Sounds great, I will bring the snacks.",
        "we meet on Saturdays",
        "I am going away for 2 days",
        "last time was better",
        "a march for climate action",
        "",
    ],
)
def test_what_names_no_day_resolves_to_nothing(text: str) -> None:
    assert days(text) == []


def test_a_bare_weekday_is_the_last_one_or_the_coming_one() -> None:
    assert days("on Saturday") == [("2023-05-06", "2023-05-06"), ("2023-05-13", "2023-05-13")]
    assert days("on Monday") == [("2023-05-08", "2023-05-08"), ("2023-05-15", "2023-05-15")]  # said that day


def test_next_friday_is_this_coming_one_or_the_one_after() -> None:
    assert days("next Friday") == [("2023-05-12", "2023-05-12"), ("2023-05-19", "2023-05-19")]


def test_last_saturday_said_on_a_saturday_is_a_week_before() -> None:
    assert days("last Saturday", date(2023, 5, 13)) == one("2023-05-06")


def test_months_are_read_across_year_boundaries() -> None:
    january = date(2024, 1, 15)
    assert days("last May", january) == one("2023-05-01", "2023-05-31")
    assert days("in December", january) == one("2023-12-01", "2023-12-31")  # the nearest December
    assert days("next May", january) == one("2024-05-01", "2024-05-31")
    assert days("last month", january) == one("2023-12-01", "2023-12-31")
    assert days("last week", date(2024, 1, 3)) == one("2023-12-25", "2023-12-31")
    assert days("two months ago", date(2023, 3, 31)) == one("2023-01-16", "2023-02-15")  # 31 Jan, clamped
    assert days("last winter", date(2023, 3, 10)) == one("2022-12-01", "2023-02-28")  # just ended
    assert days("this winter", date(2023, 1, 10)) == one("2022-12-01", "2023-02-28")


def test_month_ends_and_leap_days() -> None:
    assert days("yesterday", date(2023, 3, 1)) == one("2023-02-28")
    assert days("yesterday", date(2024, 3, 1)) == one("2024-02-29")
    assert days("last month", date(2024, 3, 31)) == one("2024-02-01", "2024-02-29")
    assert days("on 31 February 2023") == []  # no such day
    assert days("on the 31st", date(2023, 4, 10)) == one("2023-03-31")  # April has none: the nearest 31st


def test_a_date_without_a_year_is_the_nearest_one() -> None:
    assert days("on 5 January", date(2023, 12, 20)) == one("2024-01-05")
    assert days("on 20 December", date(2024, 1, 3)) == one("2023-12-20")


def test_several_expressions_in_one_message_each_count_once() -> None:
    text = "Yesterday I booked the flight for next month; yesterday was also when I called."
    assert days(text) == [("2023-05-07", "2023-05-07"), ("2023-06-01", "2023-06-30")]


def test_a_range_wider_than_a_year_says_too_little() -> None:
    assert days("a few years ago") == []
    assert days("several years ago") == []


def test_day_ranges_keep_their_days_in_the_store_form() -> None:
    span = DayRange(date(2023, 5, 6), date(2023, 5, 7))
    assert DayRange.from_epoch_days(*span.epoch_days) == span


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("When did Caroline go to the LGBTQ support group?", True),
        ("when is Melanie planning on going camping?", True),
        ("What year did they move?", True),
        ("How long ago was Caroline's 18th birthday?", True),
        ("How long has Nate had his turtles?", True),
        ("How long is the drive?", False),
        ("What did Caroline paint?", False),
        ("Where did we go last Saturday?", False),
    ],
)
def test_a_question_that_asks_when(question: str, asks: bool) -> None:
    assert asks_when(question) is asks


@pytest.mark.parametrize("at", [5.06e13, -1e15, 253_402_300_000.0])
def test_a_time_no_calendar_holds_refers_to_nothing_rather_than_failing(at: float) -> None:
    """Found by the fuzzer: an assemble whose ``now`` lay in the year 1,603,693 answered 500."""
    assert referenced("what did we do last Saturday, and next year?", at) == []
