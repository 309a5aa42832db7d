"""Importance grading: a deterministic score in [0, 1] for how worth remembering a message is.

No LLM: a role prior plus signals a person would call notable — decisions, preferences, commitments,
corrections, explicit "remember that…", names, dates and numbers, errors resolved. The score feeds the
importance weight of recall and decides which of a subagent's messages its parent inherits
(``must_remember``). Small talk and acknowledgements are graded down, never dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MUST_REMEMBER = 0.80
NICE_TO_HAVE = 0.50

_ROLE_PRIOR = {"user": 0.45, "assistant": 0.35, "toolResult": 0.2, "bashExecution": 0.2}

_SIGNALS: list[tuple[float, re.Pattern[str]]] = [
    (0.45, re.compile(r"\b(remember|don'?t forget|note that|keep in mind|for the record)\b", re.I)),
    (0.30, re.compile(r"\b(we|i) (decided|agreed|chose|settled on|will go with)\b|\bdecision\b", re.I)),
    (0.25, re.compile(r"\b(i|we) (prefer|always|never|like|hate|want)\b|\bpreference\b", re.I)),
    (0.25, re.compile(r"\b(i will|i'll|we will|we'll|promise|deadline|due (on|by))\b", re.I)),
    (0.25, re.compile(r"\b(actually|correction|i was wrong|that's wrong|not \w+ but)\b", re.I)),
    (0.20, re.compile(r"\b(password|api key|token|credential|address|phone|email|birthday)\b", re.I)),
    (0.15, re.compile(r"\b(fixed|resolved|root cause|the (bug|issue|error) was)\b", re.I)),
    (0.10, re.compile(r"\b\d{4}-\d{2}-\d{2}\b|\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b", re.I)),
    (0.05, re.compile(r"\b\d+(?:[.,]\d+)?\b")),
    (0.05, re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]{2,}\b")),
]
_ACK = r"(ok(ay)?|thanks?( you)?|thank you|thx|ty|cool|great|nice|sure|yes|no|yep|nope|got it|hi|hello|hey|bye|perfect)"
_SMALL_TALK = re.compile(rf"^\s*{_ACK}([\s,.!?]+{_ACK})*[\s.!?]*$", re.I)


@dataclass(frozen=True)
class Grade:
    score: float
    label: str


def grade(role: str, text: str) -> Grade:
    """Grade one message; the same input always gives the same grade."""
    if not text.strip():
        return Grade(0.0, "ignore")
    if _SMALL_TALK.match(text):
        return Grade(0.05, "ignore")
    score = _ROLE_PRIOR.get(role, 0.3)
    score += sum(weight for weight, pattern in _SIGNALS if pattern.search(text))
    score = round(min(score, 1.0), 3)
    return Grade(score, label_for(score))


def label_for(score: float) -> str:
    if score >= MUST_REMEMBER:
        return "must_remember"
    if score >= NICE_TO_HAVE:
        return "nice_to_have"
    return "ignore"


def weight(importance: float | None) -> float:
    """Multiplier of a recall score: 0.75 for the least notable, 1.25 for must-remember; unknown is neutral."""
    if importance is None:
        return 1.0
    return 0.75 + 0.5 * importance
