"""The web UI's search: the CLI's filters (scope, mode, role, time, number of hits) read from the page's form.

Why its own module: the form is read and checked here, so bad input is said on the page (422, with what to
fix) instead of reaching the read side; role and time choose among the best hits the way ``search --role
--since --until`` does, so the page and the command agree.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from openclaw_lossless.api import readable
from openclaw_lossless.api.responses import SearchResponse, wire
from openclaw_lossless.errors import LosslessError
from openclaw_lossless.service.queries import Queries
from openclaw_lossless.ui.html import page

MODES = ("hybrid", "keyword", "vector")
ROLES = ("", "user", "assistant", "system", "tool")
MAX_QUERY_CHARS = 20_000
FILTER_POOL = 200  # like the CLI: role and time filters choose among the best 200 hits
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def search_page(request: Request, queries: Queries) -> HTMLResponse:
    """The search form and, when it holds a query, the hits; bad input is said on the page, with a 422."""
    params = request.query_params
    form = {name: params.get(name, default) for name, default in _FIELDS.items()}
    form["scope"] = form["scope"] or "all"
    problem = _problem(form)
    hits: list[dict[str, Any]] | None = None
    missed: str | None = None
    status = 422 if problem else 200
    if problem is None and form["q"].strip():
        try:
            hits, missed = _hits(queries, form)
        except LosslessError as exc:
            problem, status = exc.message, exc.status
    context = {"form": form, "hits": hits, "missed": missed, "error": problem, "modes": MODES, "roles": ROLES}
    return page(request, "search.html", status=status, **context)


_FIELDS = {"q": "", "scope": "all", "mode": "hybrid", "k": "10", "role": "", "since": "", "until": ""}


def _hits(queries: Queries, form: dict[str, str]) -> tuple[list[dict[str, Any]], str | None]:
    """The hits the filters keep, and what a lane that gave nothing leaves out (``readable.lanes_missed``)."""
    k = int(form["k"])
    since, until = moment(form["since"]), moment(form["until"], end_of_day=True)
    filtered = bool(form["role"]) or since is not None or until is not None
    found = queries.search(form["q"], form["scope"], FILTER_POOL if filtered else k, form["mode"])
    answer = wire(SearchResponse, found)
    kept = [
        hit
        for hit in answer["hits"]
        if (not form["role"] or hit["role"] == form["role"])
        and (since is None or hit["createdAt"] >= since)
        and (until is None or hit["createdAt"] <= until)
    ][:k]
    return kept, readable.lanes_missed(answer)


def moment(text: str, *, end_of_day: bool = False) -> float | None:
    """An ISO date or time as epoch seconds (no offset: UTC), as the CLI reads ``--since``/``--until``.

    Raises ValueError for text that is not one; a date alone is its start, or with ``end_of_day`` its end."""
    if not text.strip():
        return None
    parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    seconds = (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)).timestamp()
    return seconds + 86400 - 0.001 if end_of_day and _DATE.fullmatch(text.strip()) else seconds


def _problem(form: dict[str, str]) -> str | None:
    if len(form["q"]) > MAX_QUERY_CHARS:
        return f"the query is longer than {MAX_QUERY_CHARS} characters: shorten it"
    if form["mode"] not in MODES:
        return "mode must be hybrid, keyword or vector"
    if not (form["k"].strip().isdecimal() and len(form["k"]) <= 3 and 1 <= int(form["k"]) <= 200):
        return "hits must be a whole number from 1 to 200"
    if form["role"] not in ROLES:
        return "role must be user, assistant, system or tool"
    if len(form["scope"]) > 600:
        return "scope must be 'all', 'agent:<agentId>' or 'session:<sessionId>'"
    for name in ("since", "until"):
        try:
            moment(form[name])
        except ValueError:
            return f"{name} must be a date (YYYY-MM-DD) or an ISO time, not {form[name][:40]!r}"
    return None
