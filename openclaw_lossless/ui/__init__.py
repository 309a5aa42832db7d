"""The web UI at ``/ui``: server-rendered pages over the read side, behind a login of their own.

``install`` adds the routes, the static files and the gate to an app; ``is_ui_path`` tells the bearer-token
guard which paths the gate answers for instead (a browser logs in once with the token and then holds a
session cookie; it cannot send an Authorization header).
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from openclaw_lossless.config import Settings
from openclaw_lossless.ui.gate import STATIC_PREFIX, UiGate, cookie_name, is_ui_path
from openclaw_lossless.ui.html import STATIC_DIR
from openclaw_lossless.ui.logins import Sessions
from openclaw_lossless.ui.routes import ui_router

__all__ = ["install", "is_ui_path"]


def install(app: FastAPI, settings: Settings, token: str) -> None:
    """Serve the UI from ``app``; call before the bearer guard is added, so the gate sits inside it."""
    sessions = Sessions()
    cookie = cookie_name(settings.port)
    app.include_router(ui_router(sessions, token, cookie))
    app.mount(STATIC_PREFIX.rstrip("/"), StaticFiles(directory=STATIC_DIR), name="ui-static")
    app.add_middleware(UiGate, sessions=sessions, allow_remote=settings.allow_remote, cookie=cookie)
