"""A deterministic long conversation, as OpenClaw would commit it turn by turn."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

FACT = "Remember that the staging database password rotates every Tuesday at 09:00 UTC, so update the vault then."
QUESTION = "When does the staging database password rotate?"
FACT_TURN = 5

_TOPICS = [
    ("the CI pipeline", ["caching node modules", "flaky integration jobs", "the nightly build matrix"]),
    ("the billing service", ["invoice rounding", "retrying failed charges", "the currency table"]),
    ("the mobile app", ["push notification batching", "the onboarding screens", "offline sync conflicts"]),
    ("our hiring plan", ["the backend role", "interview loops", "the take-home exercise"]),
    ("the search feature", ["typo tolerance", "ranking by freshness", "the autocomplete latency"]),
    ("the design system", ["button variants", "dark mode tokens", "icon sizing"]),
    ("the quarterly roadmap", ["the analytics dashboard", "SSO for enterprise", "the export API"]),
    ("the office move", ["desk booking", "the new coffee machine", "parking permits"]),
]
_ASKS = [
    "Can you summarise where we are with {x}?",
    "What do you think about {x}?",
    "Draft a short note on {x}.",
    "List the open questions about {x}.",
    "How should we handle {x} next sprint?",
]
_ANSWERS = [
    "For {x}, I suggest we start small and measure.",
    "Here is a summary of {x}: two items are done.",
    "The main risk with {x} is scope creep.",
    "I drafted a note on {x} and left two TODOs.",
]


@dataclass(frozen=True)
class Turn:
    key: str
    messages: list[dict[str, Any]]


def conversation(turns: int = 200, *, session: str = "s-main", seed: int = 7, start: float | None = None) -> list[Turn]:
    """``turns`` user/assistant turns, one per minute, ending now; the fact is the user's text in FACT_TURN."""
    rng = random.Random(seed)
    begin = (time.time() if start is None else start) - turns * 60
    out: list[Turn] = []
    for n in range(1, turns + 1):
        topic, details = rng.choice(_TOPICS)
        detail = f"{rng.choice(details)} in {topic}"
        user = FACT if n == FACT_TURN else rng.choice(_ASKS).format(x=detail)
        answer = "Noted: staging rotation is on Tuesdays." if n == FACT_TURN else rng.choice(_ANSWERS).format(x=detail)
        stamp = int((begin + n * 60) * 1000)
        out.append(
            Turn(
                f"{session}:turn:{n}",
                [
                    {"role": "user", "content": user, "timestamp": stamp},
                    {
                        "role": "assistant",
                        "content": [{"type": "text", "text": answer}],
                        "timestamp": stamp + 1500,
                        "model": "fake-model",
                        "usage": {"input": 10, "output": 12},
                    },
                ],
            )
        )
    return out


def commit_body(turn: Turn, session: str = "s-main", key: str = "agent:main:main") -> dict[str, Any]:
    return {"advancementKey": turn.key, "sessionId": session, "sessionKey": key, "messages": turn.messages}


def history(turns: list[Turn]) -> list[dict[str, Any]]:
    return [message for turn in turns for message in turn.messages]
