"""The web UI's "what did the model see": an agent's last Recalled Context block with its whole trace.

Why: a user asking "why did it not remember X" needs to see what came back, and what was considered and left
out, with the reason (``over_budget``, ``below_min_similarity``, ``in_window``, ...) and the score parts that
led there. It is the same record ``GET /v1/agents/{id}/last-recall`` answers, kept in memory since the start.
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import HTMLResponse

from openclaw_lossless.api.agents import RecallDetail
from openclaw_lossless.api.responses import wire
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.ui.render import page

MAX_AGENT_ID_CHARS = 128


def recall_page(request: Request, sidecar: Sidecar) -> HTMLResponse:
    """The agents that assembled since the start, and the chosen one's last recall (the first by default)."""
    agents = sidecar.activity.times()
    assembled = [agent for agent, times in agents.items() if times.last_assemble_at is not None]
    chosen = request.query_params.get("agent") or (assembled[0] if assembled else "")
    if len(chosen) > MAX_AGENT_ID_CHARS:
        return page(request, "error.html", status=422, error="an agent id is at most 128 characters")
    recall = sidecar.activity.agent(chosen)[2] if chosen else None
    detail = wire(RecallDetail, recall.detail()) if recall is not None else None
    status = 404 if chosen and chosen not in agents else 200
    return page(request, "recall.html", status=status, agents=assembled, chosen=chosen, recall=detail)
