"""The web UI's forgetting: a message or a whole session, shown exactly before it goes, then confirmed.

Why through ``api.forget.run_forget``: it is what ``POST /v1/forget`` and ``DELETE /v1/messages/{id}`` run (the
CLI goes through them when the sidecar serves the store), so the page's list is the API's dry run and the
confirmation the same removal: tombstones, the vector index, the archives, subagent outcomes that cite it.

The confirmation carries the count it showed; if the selection names a different number by the time it is
posted (the session took another turn), nothing is forgotten and the new list is shown to confirm again, so
what goes is always what the user saw. The gate has checked the origin and the CSRF token before a post.
"""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import Request
from fastapi.responses import HTMLResponse

from openclaw_lossless.api.forget import CITATION, ForgetParts, ForgetResponse, run_forget
from openclaw_lossless.errors import LosslessError
from openclaw_lossless.store.model.forgetting import Selector
from openclaw_lossless.ui.html import page

SHOWN_EACH_END = 5  # a long selection shows its first and last few; a short one is listed whole
LISTED_WHOLE = 3 * SHOWN_EACH_END


def confirm_page(request: Request, parts: ForgetParts) -> HTMLResponse:
    """What the selection in the query (``message=msg:N`` or ``session=ID``) would forget, and the form to confirm."""
    fields = dict(request.query_params)
    chosen = _selection(fields)
    if isinstance(chosen, str):
        return page(request, "error.html", status=422, error=chosen)
    return _confirmation(request, parts, fields, chosen)


async def forget_post(request: Request, parts: ForgetParts) -> HTMLResponse:
    """Forget what the confirmation listed, if the selection still names as many messages; else show it again."""
    form = {key: values[0] for key, values in parse_qs((await request.body()).decode("utf-8", "replace")).items()}
    chosen = _selection(form)
    if isinstance(chosen, str):
        return page(request, "error.html", status=422, error=chosen)
    try:
        planned = run_forget(parts, chosen, dry_run=True)
        if str(planned.forgotten) != form.get("count", ""):
            problem = "The selection changed since it was shown: check the list again before forgetting."
            return _render(request, form, planned, status=409, error=problem)
        done = run_forget(parts, chosen, dry_run=False)
    except LosslessError as exc:
        return page(request, "error.html", status=exc.status, error=exc.message)
    return page(request, "forgotten.html", done=done, by_session=_sessions(done))


def _confirmation(request: Request, parts: ForgetParts, fields: dict[str, str], chosen: Selector) -> HTMLResponse:
    try:
        planned = run_forget(parts, chosen, dry_run=True)
    except LosslessError as exc:
        return page(request, "error.html", status=exc.status, error=exc.message)
    return _render(request, fields, planned)


def _render(
    request: Request, fields: dict[str, str], planned: ForgetResponse, status: int = 200, error: str | None = None
) -> HTMLResponse:
    items = planned.messages
    listed = items if len(items) <= LISTED_WHOLE else items[:SHOWN_EACH_END] + items[-SHOWN_EACH_END:]
    return page(
        request,
        "forget.html",
        status=status,
        error=error,
        plan=planned,
        listed=listed,
        hidden=len(items) - len(listed),
        split=SHOWN_EACH_END,
        message=fields.get("message", ""),
        session=fields.get("session", ""),
        by_session=_sessions(planned),
    )


def _sessions(answer: ForgetResponse) -> dict[str, int]:
    """How many of the messages each session loses (an outcome record may sit in a parent's session)."""
    counts: dict[str, int] = {}
    for item in answer.messages:
        counts[item.session_id] = counts.get(item.session_id, 0) + 1
    return counts


def _selection(fields: dict[str, str]) -> Selector | str:
    """One message (``message``: msg:N) or one session (``session``), else what to fix."""
    message, session = fields.get("message", "").strip(), fields.get("session", "").strip()
    if bool(message) == bool(session):
        return "name what to forget: one message (message=msg:N) or one session (session=ID)"
    if session:
        return Selector(session=session) if len(session) <= 512 else "a session id is at most 512 characters"
    found = CITATION.match(message)
    return Selector(ids=(int(found.group(1)),)) if found else f"a citation is msg:N, not {message[:40]!r}"
