"""The web UI's snapshots and compactions: the lists, and the form that names a snapshot.

Why the form goes through ``Ingest.snapshot_create``: it is what ``openclaw-lossless snapshot create`` and the
HTTP API call, so a snapshot named in the browser is the same row with the same checks (a name of letters,
digits and ``_.:-``, never overwritten; a session that is stored). Bad input is said on the error page with its
4xx and changes nothing; the gate has checked the origin and the CSRF token before this runs.
"""

from __future__ import annotations

from urllib.parse import parse_qs, quote

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from openclaw_lossless.api.responses import SnapshotsResponse, wire
from openclaw_lossless.errors import LosslessError
from openclaw_lossless.service.ingest import Ingest
from openclaw_lossless.service.queries import Queries
from openclaw_lossless.store.model.snapshots import STATUSES
from openclaw_lossless.ui.html import page

MAX_COMPACTIONS = 500  # listed, newest first
SESSION_CHOICES = 50  # the latest sessions offered in the form's list


def snapshots_page(request: Request, queries: Queries, status: int = 200, error: str | None = None) -> HTMLResponse:
    """Every snapshot, and the form to name one (its session prefilled from ``session=``)."""
    listed = wire(SnapshotsResponse, {"snapshots": queries.snapshots()})["snapshots"]
    params = request.query_params
    return page(
        request,
        "snapshots.html",
        status=status,
        error=error,
        snapshots=listed,
        created=params.get("created", "")[:128],
        session=params.get("session", "")[:512],
        sessions=[s.session_id for s in queries.sessions(None, SESSION_CHOICES)],
    )


async def create_snapshot(request: Request, ingest: Ingest) -> Response:
    """Name the point a session has reached, as ``snapshot create --session`` does; then show the list."""
    form = {key: values[0] for key, values in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
    session, name = form.get("session", "").strip(), form.get("name", "").strip()
    if not session or len(session) > 512:
        return page(request, "error.html", status=422, error="name the session to snapshot (its session id)")
    try:
        ingest.snapshot_create(name, session)
    except LosslessError as exc:
        return page(request, "error.html", status=exc.status, error=exc.message)
    return RedirectResponse(f"/ui/snapshots?created={quote(name, safe='')}", status_code=303)


def compactions_page(request: Request, queries: Queries) -> HTMLResponse:
    """The latest compactions (``status=failed`` and the like to see only those), each with its snapshot and a
    link to the conversation as ``recover`` shows it up to the compaction."""
    status = request.query_params.get("status") or None
    if status is not None and status not in STATUSES:
        return page(request, "error.html", status=422, error="status must be " + ", ".join(STATUSES))
    listed = queries.compactions(MAX_COMPACTIONS, status)
    return page(request, "compactions.html", compactions=listed, chosen=status, statuses=STATUSES)
