"""The web UI's gate: what every request under ``/ui`` passes before a page is built, and what every answer carries.

Why a middleware and not a check in each route: a page added later is covered without remembering to ask.
In order: the ``Host`` header must name this machine (a DNS-rebinding page in the user's browser reaches the
port under its own name and is refused), unless ``allow_remote``; a state-changing request must come from a
page of this origin (``Origin``, else ``Referer``) and carry its session's CSRF token; a page needs a live
session, else the browser is sent to the login form. Every answer, refusals and redirects included, gets a
strict Content-Security-Policy (no inline script or style), no framing, no sniffing, no cache.

The bearer-token guard in ``app.py`` lets ``/ui`` through to this gate: a browser cannot send the header.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from html import escape
from typing import Any
from urllib.parse import parse_qs

from openclaw_lossless.ui.logins import Sessions, UiSession

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PREFIX = "/ui"
LOGIN_PATH = "/ui/login"
STATIC_PREFIX = "/ui/static/"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; object-src 'none';"
    " base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
# same-origin rather than no-referrer: no URL (a search holds the query) goes to another site either way, but
# with no-referrer a browser sends "Origin: null" on our own form posts, and the origin check needs the origin.
SECURITY_HEADERS = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)


def is_ui_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def cookie_name(port: int) -> str:
    """One cookie per port: cookies are not kept apart by port, two sidecars' sessions must not collide."""
    return f"lossless_ui_{port}"


def loopback_host(host: str) -> bool:
    """``host`` (the Host header) names this machine: ``localhost`` or a loopback address (127.0.0.0/8, ::1).

    A rebinding page reaches the port under its own name, so the name is what tells it apart; the port is not
    checked, so the UI still opens through an SSH tunnel or port forward to another local port.
    """
    name = host[: host.rindex(":")] if host.count(":") == 1 or (host.startswith("[") and "]:" in host) else host
    name = name.lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def same_origin(headers: dict[bytes, bytes], origin: str) -> bool:
    """The request came from a page of ``origin``: its Origin header, else its Referer; neither is a refusal."""
    sent = headers.get(b"origin")
    if sent is not None:
        return sent.decode("latin-1").lower() == origin.lower()
    referer = headers.get(b"referer")
    return referer is not None and referer.decode("latin-1").lower().startswith(origin.lower() + "/")


def session_cookie(headers: dict[bytes, bytes], name: str) -> str | None:
    for part in headers.get(b"cookie", b"").decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


class UiGate:
    """ASGI middleware for ``/ui``: host check, origin and CSRF checks, session check, security headers."""

    def __init__(self, app: ASGIApp, sessions: Sessions, allow_remote: bool, cookie: str) -> None:
        self.app = app
        self.sessions = sessions
        self.allow_remote = allow_remote
        self.cookie = cookie

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not is_ui_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        send = _with_security_headers(send)
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.allow_remote and not loopback_host(host):
            await _refuse(
                send,
                403,
                "This page answers only at 127.0.0.1, localhost or [::1] (start the sidecar"
                " with --allow-remote to serve it under another name).",
            )
            return
        session = self.sessions.find(session_cookie(headers, self.cookie))
        scope.setdefault("state", {})["ui_session"] = session
        if scope["method"] in UNSAFE_METHODS:
            await self._unsafe(scope, receive, send, headers, f"{scope['scheme']}://{host}", session)
        elif session is None and scope["path"] != LOGIN_PATH and not scope["path"].startswith(STATIC_PREFIX):
            await _redirect(send, LOGIN_PATH)
        else:
            await self.app(scope, receive, send)

    async def _unsafe(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[bytes, bytes],
        origin: str,
        session: UiSession | None,
    ) -> None:
        """A state-changing request: from our own page, and (but for logging in) with the session's token."""
        if not same_origin(headers, origin):
            await _refuse(send, 403, "This form was not sent from this sidecar's own page: open the page again.")
            return
        if scope["path"] != LOGIN_PATH:
            body = await _read_body(receive)
            receive = _replay(body, receive)
            submitted = parse_qs(body.decode("utf-8", "replace")).get("csrf", [""])[0]
            if session is None or not session.csrf_matches(submitted):
                await _refuse(send, 403, "This form is stale or was not sent by this page: reload it and try again.")
                return
        await self.app(scope, receive, send)


def _with_security_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            present = {name.lower() for name, _ in message.get("headers", [])}
            extra = [(name, value) for name, value in SECURITY_HEADERS if name not in present]
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return sending


async def _read_body(receive: Receive) -> bytes:
    """The whole body (the bearer guard outside has already capped its size)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, then: Receive) -> Receive:
    """The body read once more for the route, then the connection's own messages (its disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return await then()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


async def _refuse(send: Send, status: int, reason: str) -> None:
    body = (
        '<!doctype html><html lang="en"><meta charset="utf-8"><title>Refused</title>'
        f"<h1>Refused ({status})</h1><p>{escape(reason)}</p></html>"
    ).encode()
    await _answer(send, status, [(b"content-type", b"text/html; charset=utf-8")], body)


async def _redirect(send: Send, location: str) -> None:
    await _answer(send, 303, [(b"location", location.encode())], b"")


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
