"""The application factory: ``create_app(settings)`` wires the Sidecar, the routers, the guard and errors.

The guard is plain ASGI middleware so it runs before anything reads the body: a request without the token
gets 401 and one too large gets 413 before a byte of it is parsed. One error handler gives every failure
the same shape, ``{"error": {"code": ..., "message": ...}}``, with the status from the error tree.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from anyio import to_thread
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from openclaw_lossless import __version__
from openclaw_lossless.api import agent_status, forget, hooks, identity, memory_file_index, ops, retrieval
from openclaw_lossless.api.redaction import router as redaction_router
from openclaw_lossless.api.schemas import ErrorResponse
from openclaw_lossless.auth_token import load_or_create_token
from openclaw_lossless.config import Settings
from openclaw_lossless.errors import LosslessError, PayloadTooLarge, Unauthorized
from openclaw_lossless.observe.prometheus import Exposition, RequestMetrics
from openclaw_lossless.sidecar import Sidecar, place_of
from openclaw_lossless.ui import install as install_ui
from openclaw_lossless.ui import is_ui_path

log = logging.getLogger(__name__)

PUBLIC_PATHS = frozenset({"/healthz", "/v1/identity"})
# A GET carries its query in the request line. h11's default cap (16 KiB) refused a long but valid search
# (q may be 20,000 characters, up to 12 bytes each once URL-encoded) with a bare text 400 and a reset
# connection, before the app could answer. This leaves room for the longest valid request line.
MAX_REQUEST_HEAD_BYTES = 1024 * 1024
# Documented on every operation, so the OpenAPI schema tells clients the error shape they really get
# (declaring 4XX also stops FastAPI from documenting its own 422 body, which this app never sends).
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorResponse, "description": "Bad input, missing token, unknown resource or body too large."},
    "5XX": {"model": ErrorResponse, "description": "The store or the embedder failed; 503 and 507 are retryable."},
}
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def error_body(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


class Guard:
    """Token check and body-size limit, before routing."""

    def __init__(self, app: ASGIApp, token: str, max_body_bytes: int) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        # /ui: the UI's gate (ui/gate.py) checks its own session cookie; a browser cannot send the header
        if (
            scope["path"] not in PUBLIC_PATHS
            and not is_ui_path(scope["path"])
            and not hmac.compare_digest(headers.get(b"authorization", b""), self.expected)
        ):
            await _reject(
                send,
                Unauthorized(
                    "missing or wrong token: send 'Authorization: Bearer <token>'"
                    " with the token from the sidecar's state dir"
                ),
            )
            return
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            await _reject(send, self._too_large())
            return
        await self.app(scope, self._limited(receive), send)

    def _too_large(self) -> PayloadTooLarge:
        return PayloadTooLarge(f"request body is over the {self.max_body_bytes}-byte limit (max_body_bytes)")

    def _limited(self, receive: Receive) -> Receive:
        seen = 0

        async def guarded() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_body_bytes:  # a chunked body without Content-Length
                raise StarletteHTTPException(413, self._too_large().message)
            return message

        return guarded


async def _reject(send: Send, error: LosslessError) -> None:
    response = JSONResponse(error_body(error.code, error.message), status_code=error.status)
    await response({"type": "http"}, _no_receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for error in exc.errors()[:5]:
        if error.get("type") == "json_invalid":  # FastAPI's loc is then the character offset, not a field
            reason = (error.get("ctx") or {}).get("error", "invalid JSON")
            return f"the body is not JSON: {reason} at character {error['loc'][-1]}; send a JSON object"
        if error.get("type") == "missing" and tuple(error.get("loc", ())) == ("body",):
            return "the body is empty: send a JSON object"
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(LosslessError)
    async def lossless_error(_: Request, exc: LosslessError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, exc.message), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(error_body("invalid_request", _validation_message(exc)), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:  # FastAPI could not decode the body (e.g. bytes that are not UTF-8)
            message = f"{exc.detail}: send a JSON object encoded as UTF-8"
            return JSONResponse(error_body("invalid_request", message), status_code=422)
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
            exc.status_code, "http_error"
        )
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        sidecar: Sidecar | None = getattr(request.app.state, "sidecar", None)
        translated = sidecar.ops.translate_error(exc) if sidecar is not None else exc
        if isinstance(translated, LosslessError):  # e.g. a read that hit a damaged page: say so, and the fix
            log.error("%s", translated.message)
            return JSONResponse(error_body(translated.code, translated.message), status_code=translated.status)
        log.exception("unexpected error")
        return JSONResponse(error_body("internal", "internal error; see the sidecar log"), status_code=500)


def create_app(settings: Settings, *, sidecar: Sidecar | None = None) -> FastAPI:
    """Build the app; the Sidecar is opened in the lifespan (or passed in, already open)."""
    token = load_or_create_token(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = sidecar is None
        app.state.sidecar = sidecar or Sidecar(settings, background_load=True)
        if app.state.sidecar.store.backend == "postgresql":  # as many requests at once as the read pool serves
            to_thread.current_default_thread_limiter().total_tokens = place_of(settings).request_threads
        app.state.store_id = identity.store_id(settings)  # the file opened, for /v1/identity
        app.state.sidecar.catch_up.start()  # serving: catch up from the host's transcripts (transcripts/catchup.py)
        app.state.sidecar.memory_files.start()  # serving: index the workspace memory files (memory_files/)
        try:
            yield
        finally:
            if owned:
                app.state.sidecar.close()

    app = FastAPI(title="openclaw-lossless", version=__version__, lifespan=lifespan, responses=ERROR_RESPONSES)
    app.state.identity_token = token  # /v1/identity proves it holds the token without sending it
    app.state.exposition = Exposition(lambda: getattr(app.state, "sidecar", None))  # /metrics (prometheus.py)
    for router in (
        hooks.router,
        retrieval.router,
        ops.router,
        identity.router,
        agent_status.router,
        forget.router,
        memory_file_index.router,
    ):
        app.include_router(router)
    app.include_router(redaction_router)
    install_error_handlers(app)
    install_ui(app, settings, token)  # before the guard, so the UI's gate sits inside it
    app.add_middleware(Guard, token=token, max_body_bytes=settings.max_body_bytes)
    app.add_middleware(RequestMetrics, exposition=app.state.exposition)  # outside the guard: a 401 is counted
    return app


def server_config(app: FastAPI, settings: Settings, *, log_level: str) -> uvicorn.Config:
    """How the app is served (by ``serve`` and by the tests alike): loopback unless allowed, no access log."""
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=log_level,
        access_log=False,
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
    )
