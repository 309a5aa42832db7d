"""Recall's sense of time: a candidate whose time matches the question's is weighed up, within a bound.

A question names time as people do ("what did I do last Saturday?", "when did Melanie go camping in June?",
"when did Caroline go to the support group?"). Read against "now" (the assemble request's), its expressions
become day ranges (``timeexpr``); a candidate matches when it was written on one of those days or refers to
one (``store/sqlite/message_days.py``: "last Saturday" said on 8 May 2023 refers to 6 May). A question that asks
*when* but names no day ("when did ...") is answered by a message that says when: a candidate that refers to
any day matches. A match multiplies the candidate's score (and its prompt score) by ``1 + recall_time_boost``:
a bounded nudge that reorders near-ties, never a lane of its own that could bring in an unrelated message
of the right day. Traced as ``time_match``: ``written`` (its own day), ``refers`` (a day it names) or
``says_when``.

Costs nothing for a prompt without time words (one tokenising pass); otherwise one primary-key read of the
candidates' days.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from openclaw_lossless import timeexpr
from openclaw_lossless.recall.scoring import Candidate
from openclaw_lossless.store.api import MessageDays
from openclaw_lossless.store.model.messages import StoredMessage
from openclaw_lossless.timeexpr import DayRange
from openclaw_lossless.timeexpr.days import day_of

PROMPT_CHARS = 2000  # of the prompt read for its time: a question names it early


@dataclass(frozen=True)
class TimeQuestion:
    """The days a question names (read against its "now"), and whether it asks when."""

    days: tuple[DayRange, ...]
    asks_when: bool

    @classmethod
    def of(cls, prompt: str | None, now: float) -> TimeQuestion | None:
        """The question's time, or None when it names none and does not ask when."""
        if not prompt or not prompt.strip():
            return None
        text = prompt[:PROMPT_CHARS]  # a pasted document must not cost the turn its reading
        days = tuple(timeexpr.referenced(text, now))
        asks = timeexpr.asks_when(text)
        return cls(days, asks) if days or asks else None

    def match(self, message: StoredMessage, refers_to: list[DayRange]) -> str | None:
        """How the message matches the question's time, if it does."""
        if self.days:
            written = day_of(message.created_at)
            if any(span.first <= written <= span.last for span in self.days):
                return "written"
            if any(span.overlaps(day) for span in self.days for day in refers_to):
                return "refers"
            return None
        return "says_when" if self.asks_when and refers_to else None


def weigh(
    conn: Any,
    days: MessageDays[Any],
    question: TimeQuestion | None,
    candidates: Iterable[Candidate],
    stored: dict[int, StoredMessage],
    boost: float,
) -> None:
    """Raise the score of each candidate whose time matches the question's by ``1 + boost``."""
    if question is None or boost <= 0:
        return
    eligible = [c for c in candidates if c.message_id in stored]
    refers = days.of(conn, [c.message_id for c in eligible])
    for candidate in eligible:
        how = question.match(stored[candidate.message_id], refers.get(candidate.message_id, []))
        if how is None:
            continue
        candidate.time_match = how
        candidate.score *= 1.0 + boost
        if candidate.prompt_score is not None:
            candidate.prompt_score *= 1.0 + boost
