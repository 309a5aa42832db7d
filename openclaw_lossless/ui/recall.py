"""The web UI's "what did the model see": an agent's recent turns, and a chosen turn's Recalled Context block
with its whole trace.

Why: a user asking "why did it not remember X" needs to see what came back, and what was considered and left
out, with the reason (``over_budget``, ``below_min_similarity``, ``in_window``, ...) and the score parts that
led there, for the turn they mean, which is often not the last one. The page lists the agent's last turns kept
in memory since the start (``activity.py``: time, session, lines, tokens) and shows the chosen one
(``?agent=A&turn=K``), the last by default: for the last, the same record ``GET /v1/agents/{id}/last-recall``
answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request
from fastapi.responses import HTMLResponse

from openclaw_lossless.api.agent_status import RecallDetail
from openclaw_lossless.api.responses import wire
from openclaw_lossless.observe.activity import RECALLS_PER_AGENT, Activity, Recall, RecallSummary
from openclaw_lossless.ui.html import page

MAX_AGENT_ID_CHARS = 128


@dataclass(frozen=True)
class TurnRow:
    """One of the agent's recent turns in the list: its number and what ``/lossless`` shows of it."""

    turn: int
    summary: RecallSummary


def recall_page(request: Request, activity: Activity) -> HTMLResponse:
    """The agents that assembled since the start, the chosen one's recent turns and one turn's trace."""
    agents = activity.times()
    assembled = [agent for agent, times in agents.items() if times.last_assemble_at is not None]
    chosen = request.query_params.get("agent") or (assembled[0] if assembled else "")
    if len(chosen) > MAX_AGENT_ID_CHARS:
        return page(request, "error.html", status=422, error="an agent id is at most 128 characters")
    turn = _turn(request.query_params.get("turn"))
    if turn is None:
        return page(request, "error.html", status=422, error="turn must be a turn's number from the list")
    recent = activity.recalls(chosen) if chosen else []
    shown = _shown(recent, turn)
    if turn and shown is None:
        return page(
            request,
            "error.html",
            status=404,
            error=f"Agent {chosen} has no turn {turn} kept: the recall page lists the last {RECALLS_PER_AGENT}"
            " turns each agent assembled since the sidecar started.",
        )
    rows = [TurnRow(recall.turn, recall.summary()) for recall in recent]
    return page(
        request,
        "recall.html",
        status=404 if chosen and chosen not in agents else 200,
        agents=assembled,
        chosen=chosen,
        turns=rows,
        turn=shown.turn if shown else None,
        recall=wire(RecallDetail, shown.detail()) if shown is not None else None,
    )


def _turn(text: str | None) -> int | None:
    """The ``turn`` parameter: 0 when absent (the last turn), None when it is not a turn's number."""
    if not text:
        return 0
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 and int(text) > 0 else None


def _shown(recent: list[Recall], turn: int) -> Recall | None:
    """The chosen turn among the recent ones (newest first), or the last when none is chosen."""
    if not turn:
        return recent[0] if recent else None
    return next((recall for recall in recent if recall.turn == turn), None)
