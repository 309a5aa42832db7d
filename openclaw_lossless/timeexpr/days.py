"""A range of calendar days: what a time expression resolves to, and how the store keeps it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

EPOCH = date(1970, 1, 1).toordinal()


@dataclass(frozen=True, order=True)
class DayRange:
    """The days from ``first`` to ``last``, both included."""

    first: date
    last: date

    def overlaps(self, other: DayRange) -> bool:
        return self.first <= other.last and other.first <= self.last

    @property
    def epoch_days(self) -> tuple[int, int]:
        """Days since 1970-01-01 of the first and last day: how the store keeps a range."""
        return self.first.toordinal() - EPOCH, self.last.toordinal() - EPOCH

    @classmethod
    def from_epoch_days(cls, first: int, last: int) -> DayRange:
        return cls(date.fromordinal(first + EPOCH), date.fromordinal(last + EPOCH))

    @classmethod
    def day(cls, when: date) -> DayRange:
        return cls(when, when)


def day_of(seconds: float) -> date:
    """The UTC calendar day of a time in seconds since the epoch."""
    return datetime.fromtimestamp(seconds, UTC).date()


def epoch_day(seconds: float) -> int:
    """Days since 1970-01-01 (UTC) of a time in seconds since the epoch."""
    return int(seconds // 86_400)
