"""Turning the read side's answers into HTML: the Jinja2 environment and the few filters the pages use.

Why autoescape is on for every template (not chosen by file name): the pages show stored and recalled text,
which may hold anything a conversation held, ``<script>`` included. Every value is escaped unless a filter
here builds it from escaped parts, as ``highlight`` does.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup, escape

from openclaw_lossless.ui.logins import UiSession

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
_WORD = re.compile(r"\w+")
MAX_HIGHLIGHTED_WORDS = 32


def highlight(text: str, query: str) -> Markup:
    """``text`` escaped, with each of the query's words (case-insensitive, whole words) in ``<mark>``."""
    words = sorted({w.lower() for w in _WORD.findall(query)}, key=len, reverse=True)[:MAX_HIGHLIGHTED_WORDS]
    if not words:
        return escape(text)
    pattern = re.compile(r"\b(" + "|".join(re.escape(w) for w in words) + r")\b", re.IGNORECASE)
    parts: list[Markup] = []
    for n, piece in enumerate(pattern.split(text)):
        parts.append(Markup("<mark>{}</mark>").format(piece) if n % 2 else escape(piece))
    return Markup("").join(parts)


def when(epoch_s: float | None) -> str:
    if epoch_s is None:
        return "—"
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(epoch_s))


def size(n_bytes: float | None) -> str:
    if n_bytes is None:
        return "—"
    value = float(n_bytes)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def shorten(text: str, limit: int = 800) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


ENV = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined)
ENV.filters.update(highlight=highlight, when=when, size=size, pretty_json=pretty_json, shorten=shorten)


def session_of(request: Request) -> UiSession | None:
    """The session the gate found for this request (None on the login page before logging in)."""
    found: UiSession | None = request.scope.get("state", {}).get("ui_session")
    return found


def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A whole page: the template with the session's CSRF token for its forms (logout is on every page)."""
    session = session_of(request)
    values = {"error": None} | context  # strict templates: a page without an error says so
    html = ENV.get_template(template).render(csrf=session.csrf if session else None, **values)
    return HTMLResponse(html, status_code=status)
