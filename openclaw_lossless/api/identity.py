"""``GET /v1/identity``: proof that this process holds the sidecar's token, without the token crossing the wire.

Public on purpose. A client (the plugin, ``doctor``) must know it talks to *its* sidecar before it sends the
conversation or the token: another program may hold the port. It sends a random challenge; only a holder of
the token can answer ``HMAC-SHA256(key=token, "openclaw-lossless identity v1\\n" + challenge)``, which the
client compares with its own. A fresh challenge per check means an answer cannot be replayed.

The answer also names the store served (``store``: a digest of the database file's device and inode, taken
when it was opened), so the CLI and the MCP server use this sidecar only for the store they were told to use,
and open any other store's file themselves (``store_access.py``). A copy of the file is another store; a hard
link, or another path to the same file, is the same one.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Query, Request

from openclaw_lossless import __version__
from openclaw_lossless.api.responses import IdentityResponse
from openclaw_lossless.auth_token import SERVICE, identity_proof
from openclaw_lossless.config import Settings
from openclaw_lossless.errors import BadRequest

router = APIRouter()

STORE_PREFIX = "openclaw-lossless store v1\n"
_CHALLENGE = re.compile(r"[0-9a-fA-F]{32,128}")


def store_id(settings: Settings) -> str | None:
    """Which store this is, whatever names it: a digest of the database file's device and inode (None: no file
    yet), or of the PostgreSQL server, database and schema the URL names (its password left out).

    A digest, not the path or URL, so the public identity answer says nothing about where the store lives.
    """
    if settings.database_url is not None:
        parts = urlsplit(settings.database_url.get_secret_value())
        where = f"pg:{parts.hostname}:{parts.port}:{parts.path}?{parts.query}#{settings.database_schema}"
        return hashlib.sha256(f"{STORE_PREFIX}{where}".encode()).hexdigest()[:32]
    return file_id(settings.database_path)


def file_id(database: Path) -> str | None:
    """A database file's digest of device and inode (None: no file): a hard link is the same store, a copy not."""
    try:
        info = database.stat()
    except OSError:
        return None
    return hashlib.sha256(f"{STORE_PREFIX}{info.st_dev}:{info.st_ino}".encode()).hexdigest()[:32]


@router.get("/v1/identity")
def identity(request: Request, challenge: Annotated[str | None, Query()] = None) -> IdentityResponse:
    """Who answers on this port: the service, its version, pid and store, and the proof for ``challenge``."""
    if challenge is None or not _CHALLENGE.fullmatch(challenge):
        raise BadRequest("challenge must be 32 to 128 hex characters (a fresh random value per check)")
    token: str = request.app.state.identity_token
    store: str | None = getattr(request.app.state, "store_id", None)
    proof = identity_proof(token, challenge)
    return IdentityResponse(service=SERVICE, version=__version__, pid=os.getpid(), store=store, proof=proof)
