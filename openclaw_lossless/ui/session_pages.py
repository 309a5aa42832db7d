"""The web UI's timelines: the index of agents and their sessions, and one session's page of messages with the
compactions, snapshots, subagent spawns and ``/new`` resets drawn where they happened.

Why the merge is here and not in the store: where an event is drawn is presentation (a compaction after the
last message it kept, a spawn before the first message dated after it); the store reads one page and the events
that fall on it (``store/sqlite/timelines.py``), and this module lays them out in one ordered list for the template.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Literal
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse

from openclaw_lossless.errors import LosslessError
from openclaw_lossless.service.queries import Queries
from openclaw_lossless.store.model.messages import MessageView
from openclaw_lossless.store.model.snapshots import CompactionMark
from openclaw_lossless.store.model.timelines import SnapshotMark, SpawnMark, Timeline, Window
from openclaw_lossless.ui.html import page

PAGE = 200  # messages on a page by default: a session may hold 100,000
MAX_PAGE = 1000
MAX_SESSIONS = 500  # sessions listed on the index, the most recently begun first
MAX_ID = 2**62

Kind = Literal["message", "compaction", "snapshot", "spawn"]


@dataclass(frozen=True)
class Entry:
    """One line of the drawn timeline: a message or an event between messages."""

    kind: Kind
    item: MessageView | CompactionMark | SnapshotMark | SpawnMark


def timeline_page(request: Request, queries: Queries) -> HTMLResponse:
    """A session's page when one is named (``session``), else the index of agents and sessions."""
    params = request.query_params
    session_id = params.get("session", "")
    if not session_id:
        return _index(request, queries, params.get("agent") or None)
    window = _window(dict(params)) if len(session_id) <= 512 else "a session id is at most 512 characters"
    if isinstance(window, str):
        return page(request, "error.html", status=422, error=window)
    try:
        found = queries.timeline(session_id, window)
    except LosslessError as exc:
        return page(request, "error.html", status=exc.status, error=exc.message)
    sid = quote(found.session.session_id, safe="")
    return page(request, "timeline.html", t=found, entries=entries(found), limit=window.limit, sid=sid)


def _index(request: Request, queries: Queries, agent: str | None) -> HTMLResponse:
    if agent is not None and len(agent) > 128:
        return page(request, "error.html", status=422, error="an agent id is at most 128 characters")
    listed = queries.sessions(agent, MAX_SESSIONS)
    by_agent = defaultdict(list)
    for summary in listed:
        by_agent[summary.agent_id].append(summary)
    return page(
        request, "sessions.html", agents=sorted(by_agent.items()), agent=agent, capped=len(listed) == MAX_SESSIONS
    )


def _window(params: dict[str, str]) -> Window | str:
    """The page the query names, or what to fix: one of ``before``, ``after``, ``at`` (message ids), ``limit``."""
    limit = _number(params.get("limit", str(PAGE)), MAX_PAGE)
    if limit is None:
        return f"limit must be a whole number from 1 to {MAX_PAGE}"
    bounds = {name: params[name] for name in ("before", "after", "at") if params.get(name)}
    if len(bounds) > 1:
        return "name one of before, after or at, not several"
    values = {name: _number(text.removeprefix("msg:"), MAX_ID) for name, text in bounds.items()}
    if any(value is None for value in values.values()):
        return "before, after and at are message ids (msg:N)"
    return Window(limit, before=values.get("before"), after=values.get("after"), at=values.get("at"))


def _number(text: str, high: int) -> int | None:
    return int(text) if text.isdecimal() and len(text) <= 19 and 1 <= int(text) <= high else None


def entries(found: Timeline) -> list[Entry]:
    """The page's messages in order, each event drawn before the first message that came after it."""
    placed: list[tuple[int, float, Entry]] = [  # (after this message id, at this time, entry)
        *((c.last_message_id or 0, c.recorded_at, Entry("compaction", c)) for c in found.compactions),
        *((s.last_message_id or 0, s.created_at, Entry("snapshot", s)) for s in found.snapshots),
    ]
    placed.sort(key=lambda p: (p[0], p[1]))
    spawns = sorted(found.spawns, key=lambda s: s.spawned_at)
    drawn: list[Entry] = []
    for message in found.messages:
        while placed and placed[0][0] < message.id:
            drawn.append(placed.pop(0)[2])
        while spawns and spawns[0].spawned_at < message.created_at:
            drawn.append(Entry("spawn", spawns.pop(0)))
        drawn.append(Entry("message", message))
    drawn += [p[2] for p in placed] + [Entry("spawn", s) for s in spawns]
    return drawn
