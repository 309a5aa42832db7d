"""Chinese time expressions (Simplified and Traditional): the rule set ``timeexpr`` reads Chinese text with.

Written without spaces, so the cheap test is a character check (a text without any of the characters these
expressions need, and every ASCII text, is done at once) and the patterns guard their edges by the characters
around them ("以前天气" holds "前天" but names no day). What each phrase resolves to:

- days: "今天", "昨天", "前天", "大前天", "明天", "后天", "昨晚", "今晚";
- "上 / 这 / 本 / 下" + 周, 星期, 礼拜 (the week), + a weekday ("上周六": the Saturday of last week, Monday-first
  weeks, whatever day it is said), + 周末 (the weekend); 上个月, 这个月, 下个月; 去年, 今年, 明年, 前年;
- a bare weekday ("周六", "星期六", "礼拜天"): the last one or the coming one;
- counts: "三天前", "两周前", "一个月前", "十年前", "几天前"; "三天后"; "前几天" (the week before);
- dates: "2023年5月8日", "5月8号", "2023年5月", "五月" (the nearest May), "2022年".
"""

from __future__ import annotations

import re
from datetime import date, timedelta

from openclaw_lossless.timeexpr.arithmetic import (
    Count,
    bare_weekday,
    day_in_year,
    month_range,
    nearest_month,
    relative_unit,
    steps,
    weekday_of_week,
    year_range,
)
from openclaw_lossless.timeexpr.days import DayRange
from openclaw_lossless.timeexpr.language import Language, Resolved, Rule, Words, apply

DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "兩": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
          "九": 9}  # fmt: skip
WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
DAY_WORDS = {"大前天": -3, "前天": -2, "昨天": -1, "昨晚": -1, "昨日": -1, "今天": 0, "今晚": 0, "今早": 0,
             "明天": 1, "后天": 2, "後天": 2, "大后天": 3, "大後天": 3}  # fmt: skip
STEP = {"上": -1, "上个": -1, "上個": -1, "上一": -1, "这": 0, "这个": 0, "這": 0, "這個": 0, "本": 0, "下": 1,
        "下个": 1, "下個": 1, "下一": 1}  # fmt: skip
YEARS = {"前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2, "後年": 2}
UNITS = {"天": "day", "日": "day", "周": "week", "週": "week", "星期": "week", "礼拜": "week", "禮拜": "week",
         "个星期": "week", "個星期": "week", "个礼拜": "week", "個禮拜": "week", "个月": "month", "個月": "month",
         "年": "year"}  # fmt: skip

_NUMBER = r"(?P<n>\d{1,3}|[一二两兩三四五六七八九十]{1,3}|几|幾)"
_WEEK = r"(?:周|週|星期|礼拜|禮拜)"
_STEP = r"(?P<step>上个|上個|上一|上|这个|這個|这|這|本|下个|下個|下一|下)"
# After a weekday's numeral these say it is a count, not a day: "上周一直", "上周三次", "周天气".
_NOT_WEEKDAY = r"(?![次个個遍回年月周週号號点點位种種直起样樣共切些下气氣])"


def number(word: str) -> Count:
    """A number as written with digits or Chinese numerals up to 999; "几" is a few."""
    if word.isdigit():
        return int(word), int(word)
    if word in ("几", "幾"):
        return 2, 4
    if "十" not in word:
        return DIGITS.get(word, 0), DIGITS.get(word, 0)
    tens, _, units = word.partition("十")
    value = (DIGITS.get(tens, 0) if tens else 1) * 10 + (DIGITS.get(units, 0) if units else 0)
    return value, value


def _span(match: re.Match[str]) -> tuple[int, int]:
    return match.start(), match.end()


def _day_word(match: re.Match[str], today: date) -> Resolved:
    return _span(match), [DayRange.day(today + timedelta(days=DAY_WORDS[match["word"]]))]


def _week_relative(match: re.Match[str], today: date) -> Resolved:
    weeks = STEP[match["step"]]
    what = match["what"]
    if what is None:
        return _span(match), relative_unit("week", today, weeks)
    if what == "末":
        return _span(match), relative_unit("weekend", today, weeks)
    return _span(match), [weekday_of_week(WEEKDAYS[what], today, weeks)]


def _month_relative(match: re.Match[str], today: date) -> Resolved:
    return _span(match), relative_unit("month", today, STEP[match["step"]])


def _year_word(match: re.Match[str], today: date) -> Resolved:
    return _span(match), [year_range(today.year + YEARS[match["word"]])]


def _ago(match: re.Match[str], today: date) -> Resolved:
    count = number(match["n"])
    if count[0] < 1:
        return None
    sign = 1 if match["dir"] in ("后", "後", "以后", "以後", "之后", "之後") else -1
    return _span(match), [steps(count, UNITS[match["unit"]], today, sign)]


def _other_day(match: re.Match[str], today: date) -> Resolved:
    return _span(match), [DayRange(today - timedelta(days=7), today - timedelta(days=1))]


def _bare_weekday(match: re.Match[str], today: date) -> Resolved:
    return _span(match), bare_weekday(WEEKDAYS[match["what"]], today)


def _month_number(word: str) -> int:
    return number(word)[0]


def _date(match: re.Match[str], today: date) -> Resolved:
    year = int(match["year"]) if match["year"] else None
    found = day_in_year(year, _month_number(match["month"]), int(match["day"]), today)
    return _span(match), [found] if found else []


def _year_month(match: re.Match[str], today: date) -> Resolved:
    month = _month_number(match["month"])
    return (_span(match), [month_range(int(match["year"]), month)]) if 1 <= month <= 12 else None


def _bare_month(match: re.Match[str], today: date) -> Resolved:
    found = nearest_month(_month_number(match["month"]), today)
    return (_span(match), [found]) if found else None


def _year(match: re.Match[str], today: date) -> Resolved:
    return _span(match), [year_range(int(match["year"]))]


_MONTH = r"(?P<month>1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九])"
RULES = [
    Rule(
        re.compile(
            rf"(?:(?P<year>(?:19|20)\d\d)\s*年\s*)?(?<![\d个個上下这這本每])(?<!十){_MONTH}\s*月\s*(?P<day>[0-3]?\d)\s*[日号號]"
        ),
        _date,
    ),
    Rule(re.compile(rf"(?P<year>(?:19|20)\d\d)\s*年\s*{_MONTH}\s*月(?!\s*\d)"), _year_month),
    Rule(
        re.compile(
            rf"{_NUMBER}\s*(?P<unit>个星期|個星期|个礼拜|個禮拜|个月|個月|星期|礼拜|禮拜|天|日|周|週|年)\s*"
            r"(?P<dir>以前|之前|以后|以後|之后|之後|前|后|後)(?![天年])"
        ),
        _ago,
    ),
    Rule(re.compile(r"前几天|前幾天|前些天|前些日子"), _other_day),
    Rule(re.compile(rf"{_STEP}{_WEEK}(?:(?P<what>[一二三四五六日天末]){_NOT_WEEKDAY})?"), _week_relative),
    Rule(
        re.compile(r"(?P<step>上个|上個|上|这个|這個|本|下个|下個|下)月(?![份初中底]?[\d一二三四五六七八九十])"),
        _month_relative,
    ),
    Rule(
        re.compile(
            r"(?P<word>大前天|大后天|大後天|昨天|昨晚|昨日|今天|今晚|今早|明天|(?<![以之])前天|(?<![以之然最])(?:后天|後天))"
        ),
        _day_word,
    ),
    Rule(re.compile(r"(?P<word>去年|今年|明年|(?<![以之几幾多数數])前年|(?<![以之然最])(?:后年|後年))"), _year_word),
    Rule(
        re.compile(
            rf"(?<![每一两兩三四五六七八九十几幾上下这這本])(?:{_WEEK})(?P<what>[一二三四五六日天]){_NOT_WEEKDAY}"
        ),
        _bare_weekday,
    ),
    Rule(
        re.compile(rf"(?<![\d个個上下这這本每一二两兩三四五六七八九十几幾])(?<!十){_MONTH}月份?(?![\d日号號])"),
        _bare_month,
    ),
    Rule(re.compile(r"(?<!\d)(?P<year>(?:19|20)\d\d)\s*年(?![\d月级級代])"), _year),
]
_WHEN = re.compile(
    r"什么时候|什麼時候|何时|何時|哪天|哪一天|几号|幾號|几月|幾月|哪年|哪一年|哪个月|哪個月|多久以前|多久之前|多长时间以前|几时|幾時"
)
_HINTS = "天日周週星期礼禮拜月年号號前后後晚早"


def ranges(text: str, today: date, present: Words) -> list[DayRange]:
    return apply(RULES, text, today, present)


def asks_when(text: str) -> bool:
    return not text.isascii() and _WHEN.search(text) is not None


LANGUAGE = Language("zh", ranges, asks_when, trigger_characters=_HINTS)
