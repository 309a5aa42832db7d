"""The days messages refer to: which messages are read for dates and how the backfill is paced (both backends)."""

from __future__ import annotations

from openclaw_lossless import timeexpr

ROLES = frozenset({"user", "assistant"})


MAX_CHARS = 4000


BACKFILL_KEY = "message_days_backfill_below"  # meta: messages with a smaller id are still to be read


BACKFILL_BATCH = 500


# meta: the languages the stored days were read in; a release that reads more reads every message again
LANGUAGES_KEY = "message_days_languages"


def languages() -> str:
    """The languages ``timeexpr`` reads now, as kept in ``meta``."""
    return ",".join(sorted(timeexpr.LANGUAGES))
