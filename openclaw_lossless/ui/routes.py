"""The web UI's pages: log in and out, status, search, a message in its context, snapshots.

Thin routes over the same read side the HTTP API uses (``service/queries.py``, ``service/status.py``), so a
page shows exactly what ``/stats``, ``/v1/search`` and ``/v1/messages/{id}`` answer. None is in the OpenAPI
schema: they are for a person's browser, not for clients. The gate (``gate.py``) has checked the host, the
session and, for a post, the origin and CSRF token before any route here runs.
"""

from __future__ import annotations

import hmac
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from openclaw_lossless.api import readable
from openclaw_lossless.api.deps import (
    ActivityDep,
    IngestDep,
    MemoryFilesDep,
    QueriesDep,
    SettingsDep,
    StatusDep,
    StoreDep,
)
from openclaw_lossless.api.forget import ForgetPartsDep
from openclaw_lossless.api.responses import MessageResponse, RecoverResponse, wire
from openclaw_lossless.errors import LosslessError
from openclaw_lossless.ui.forget_page import confirm_page, forget_post
from openclaw_lossless.ui.gate import LOGIN_PATH, PREFIX
from openclaw_lossless.ui.html import page, session_of
from openclaw_lossless.ui.logins import Sessions
from openclaw_lossless.ui.memory import memory_page
from openclaw_lossless.ui.recall import recall_page
from openclaw_lossless.ui.search_form import search_page
from openclaw_lossless.ui.session_pages import timeline_page
from openclaw_lossless.ui.snapshot_pages import compactions_page, create_snapshot, snapshots_page
from openclaw_lossless.ui.status_page import status_page


def ui_router(sessions: Sessions, token: str, cookie: str) -> APIRouter:
    """The routes, bound to this app's sessions, token and cookie name."""
    router = APIRouter(prefix=PREFIX, include_in_schema=False)

    @router.get("/login")
    def login_form(request: Request) -> Response:
        if session_of(request) is not None:
            return RedirectResponse(PREFIX, status_code=303)
        return page(request, "login.html")

    @router.post("/login")
    async def login(request: Request) -> Response:
        submitted = _form(await request.body()).get("token", "")
        if not hmac.compare_digest(submitted.encode(), token.encode()):
            return page(request, "login.html", status=401, error="That is not this sidecar's token.")
        session = sessions.create()
        response = RedirectResponse(PREFIX, status_code=303)
        response.set_cookie(
            cookie,
            session.session_id,
            max_age=int(sessions.ttl_s),
            path=PREFIX,
            httponly=True,
            samesite="strict",
        )
        return response

    @router.post("/logout")
    def logout(request: Request) -> Response:
        session = session_of(request)
        if session is not None:
            sessions.end(session.session_id)
        response = RedirectResponse(LOGIN_PATH, status_code=303)
        response.delete_cookie(cookie, path=PREFIX, httponly=True, samesite="strict")
        return response

    @router.get("")
    def status_view(request: Request, status: StatusDep) -> HTMLResponse:
        return status_page(request, status)

    @router.get("/search")
    def search_form(request: Request, queries: QueriesDep) -> HTMLResponse:
        return search_page(request, queries)

    @router.get("/messages/{message_id}")
    def message_page(
        request: Request, queries: QueriesDep, message_id: Annotated[int, Path(ge=1, le=2**62)]
    ) -> HTMLResponse:
        context = _int(request.query_params.get("context", "3"), 0, 50)
        try:
            found = wire(MessageResponse, queries.message(message_id, 3 if context is None else context))
        except LosslessError as exc:
            return page(request, "error.html", status=exc.status, error=exc.message)
        return page(request, "message.html", found=found)

    @router.get("/recall")
    def recall_trace(request: Request, activity: ActivityDep) -> HTMLResponse:
        return recall_page(request, activity)

    @router.get("/conversation")
    def conversation_page(request: Request, queries: QueriesDep) -> HTMLResponse:
        return _conversation(request, queries)

    @router.get("/timeline")
    def timeline(request: Request, queries: QueriesDep) -> HTMLResponse:
        return timeline_page(request, queries)

    @router.get("/snapshots")
    def snapshots(request: Request, queries: QueriesDep) -> HTMLResponse:
        return snapshots_page(request, queries)

    @router.post("/snapshots")
    async def snapshot_create(request: Request, ingest: IngestDep) -> Response:
        return await create_snapshot(request, ingest)

    @router.get("/forget")
    def forget_confirm(request: Request, parts: ForgetPartsDep) -> HTMLResponse:
        return confirm_page(request, parts)

    @router.post("/forget")
    async def forget(request: Request, parts: ForgetPartsDep) -> HTMLResponse:
        return await forget_post(request, parts)

    @router.get("/compactions")
    def compactions(request: Request, queries: QueriesDep) -> HTMLResponse:
        return compactions_page(request, queries)

    @router.get("/memory")
    def memory(request: Request, store: StoreDep, settings: SettingsDep, indexer: MemoryFilesDep) -> HTMLResponse:
        return memory_page(request, store, settings, indexer)

    return router


def _conversation(request: Request, queries: QueriesDep) -> HTMLResponse:
    """A session's last messages (up to one, for a snapshot), shown and as the markdown ``recover`` prints."""
    params = request.query_params
    session_id, last, up_to = params.get("session", ""), _int(params.get("last", "50"), 1, 10_000), None
    if params.get("upTo"):
        up_to = _int(params["upTo"].removeprefix("msg:"), 1, 2**62)
        if up_to is None:
            return page(request, "error.html", status=422, error="upTo must be a citation msg:N")
    if not session_id or len(session_id) > 512 or last is None:
        return page(request, "error.html", status=422, error="name a session (session=ID) and last from 1 to 10000")
    try:
        data = wire(RecoverResponse, queries.recover(session_id, last, up_to))
    except LosslessError as exc:
        return page(request, "error.html", status=exc.status, error=exc.message)
    return page(request, "conversation.html", data=data, markdown=readable.conversation(data), last=last)


def _int(text: str, low: int, high: int) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return value if low <= value <= high else None


def _form(body: bytes) -> dict[str, str]:
    """An urlencoded form's fields, the first value of each."""
    return {key: values[0] for key, values in parse_qs(body.decode("utf-8", "replace")).items()}
