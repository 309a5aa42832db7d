"""Where a command's work goes: the running sidecar when it serves the store named, else the database file.

The CLI and the MCP server both answer from the running sidecar when they can (warm model, warm index, and
its vector index sees a forget at once) and open the database file in this process otherwise. The sidecar is
used only when its ``/v1/identity`` answer shows both that it holds this store's token (the HMAC proof, so
the token is never sent to a stranger on the port) and that it serves this very database file (``store``,
compared with the file the settings name: ``--db-path``, ``--state-dir`` or the environment). Any other
store's file is opened directly, so ``search --db-path OTHER.sqlite`` answers from OTHER whatever runs.

One error mapping: an error answer becomes the ``LosslessError`` of its status, with the sidecar's message,
so a caller reports it the same way whether the sidecar or the file refused.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import httpx

from openclaw_lossless.auth_token import read_token
from openclaw_lossless.config import Settings
from openclaw_lossless.errors import (
    BadRequest,
    LosslessError,
    NotFound,
    PayloadTooLarge,
    StorageFull,
    StoreUnavailable,
    Unauthorized,
)

if TYPE_CHECKING:
    from openclaw_lossless.embed.provider import EmbeddingProvider
    from openclaw_lossless.sidecar import Sidecar

Source = Literal["sidecar", "store"]
T = TypeVar("T")
PROBE_SECONDS = 0.5  # the identity check on a loopback port: an answer takes milliseconds or never comes
REQUEST_SECONDS = 30
_BY_STATUS: dict[int, type[LosslessError]] = {
    cls.status: cls for cls in (BadRequest, Unauthorized, NotFound, PayloadTooLarge, StorageFull, StoreUnavailable)
}


def _no_store(settings: Settings) -> str:
    """What a read found instead of a store, and how to name the right one."""
    if settings.database_url is None:
        return (
            f"no store at {settings.database_path}: nothing was stored there; name the store with --state-dir"
            " or --db-path (or LOSSLESS_STATE_DIR)"
        )
    return (
        f"no store in schema {settings.database_schema!r} of the PostgreSQL database LOSSLESS_DATABASE_URL names:"
        " nothing was stored there; name the store with LOSSLESS_DATABASE_URL and LOSSLESS_DATABASE_SCHEMA"
    )


def base_url(settings: Settings) -> str:
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    return f"http://{host}:{settings.port}"


def running_sidecar(settings: Settings) -> httpx.Client | None:
    """A client for the sidecar on the configured port if it serves this store with this token, else None."""
    from openclaw_lossless.api.identity import store_id  # with the server's fastapi: only when it is needed
    from openclaw_lossless.listeners import who_serves

    store, token = store_id(settings), read_token(settings)
    if store is None or token is None:
        return None
    url = base_url(settings)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # the probe's request line is not the command's output
    peer = who_serves(url, token, timeout=PROBE_SECONDS)
    if peer is None or not peer["ours"] or peer.get("store") != store:
        return None
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=REQUEST_SECONDS)


def serves_this_store(settings: Settings) -> bool:
    """Whether a sidecar serving this store runs (its worker then embeds what a write on the file queues)."""
    client = running_sidecar(settings)
    if client is None:
        return False
    client.close()
    return True


def error_from(response: httpx.Response) -> LosslessError:
    """The error an error answer stands for: its status's class, the sidecar's code and message."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    error = error if isinstance(error, dict) else {}
    message = str(error.get("message") or response.text.strip() or f"HTTP {response.status_code}")
    status = response.status_code
    cls = _BY_STATUS.get(status) or (BadRequest if status < 500 else LosslessError)
    exc = cls(message)
    if isinstance(error.get("code"), str):
        exc.code = error["code"]
    return exc


def answer(response: httpx.Response) -> Any:
    """The JSON of a successful answer; an error answer raised as its ``LosslessError``."""
    if response.status_code >= 400:
        raise error_from(response)
    return response.json()


def sidecar_or_file(
    settings: Settings, request: Callable[[httpx.Client], httpx.Response], on_file: Callable[[], T]
) -> tuple[Source, T | Any]:
    """``request`` to the sidecar serving this store, or ``on_file`` when none does; and which one answered."""
    client = running_sidecar(settings)
    if client is None:
        return "store", on_file()
    with client:
        return "sidecar", answer(request(client))


def query(
    settings: Settings,
    path: str,
    params: dict[str, Any],
    local: Callable[[Sidecar], T],
    provider_factory: Callable[[Settings], EmbeddingProvider] | None = None,
) -> tuple[Source, T | Any]:
    """A read: ``GET path`` on the sidecar, else ``local`` on the store opened for queries (never changed)."""

    def on_file() -> T:
        from openclaw_lossless.sidecar import place_of, store_for_queries
        from openclaw_lossless.store.backend import holds_store

        if not holds_store(place_of(settings)):  # a read never creates a store
            raise NotFound(_no_store(settings))

        factory = () if provider_factory is None else (provider_factory,)
        with _quiet_embedder(), store_for_queries(settings, *factory) as sidecar:
            return local(sidecar)

    wanted = {k: v for k, v in params.items() if v is not None}
    return sidecar_or_file(settings, lambda client: client.get(path, params=wanted), on_file)


@contextmanager
def open_file_store(settings: Settings, *, embeddings: bool = False) -> Iterator[Sidecar]:
    """The store opened in this process (no worker); without embeddings it loads no model and no vectors."""
    from openclaw_lossless.sidecar import Sidecar

    if embeddings:
        sidecar = Sidecar(settings, start_worker=False)
    else:
        with _quiet_embedder():
            sidecar = Sidecar(settings.model_copy(update={"embedding_provider": "none"}), start_worker=False)
    try:
        yield sidecar
    finally:
        sidecar.close()


@contextmanager
def _quiet_embedder() -> Iterator[None]:
    """No "embedding provider 'none' configured" warning while a store is opened here without an embedder.

    Then keywords only is this process's choice (no vectors to match, or a write that needs none), not the
    user's setting nor a fault; a real reason (another model made the vectors) is logged by ``open_store``.
    """
    embed_log = logging.getLogger("openclaw_lossless.embed.service")
    level = embed_log.level
    embed_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        embed_log.setLevel(level)
