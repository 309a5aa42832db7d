"""``GET /v1/identity``: proof that this process holds the sidecar's token, without the token crossing the wire.

Public on purpose. A client (the plugin, ``doctor``) must know it talks to *its* sidecar before it sends the
conversation or the token: another program may hold the port. It sends a random challenge; only a holder of
the token can answer ``HMAC-SHA256(key=token, "openclaw-lossless identity v1\\n" + challenge)``, which the
client compares with its own. A fresh challenge per check means an answer cannot be replayed.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from openclaw_lossless import __version__
from openclaw_lossless.errors import BadRequest

router = APIRouter()

SERVICE = "openclaw-lossless"
PROOF_PREFIX = "openclaw-lossless identity v1\n"
_CHALLENGE = re.compile(r"[0-9a-fA-F]{32,128}")


def identity_proof(token: str, challenge: str) -> str:
    """The answer only the token holder can give: hex HMAC-SHA256 keyed with the token (UTF-8)."""
    message = (PROOF_PREFIX + challenge).encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


@router.get("/v1/identity")
def identity(request: Request, challenge: Annotated[str | None, Query()] = None) -> dict[str, Any]:
    """Who answers on this port: the service, its version and pid, and the proof for ``challenge``."""
    if challenge is None or not _CHALLENGE.fullmatch(challenge):
        raise BadRequest("challenge must be 32 to 128 hex characters (a fresh random value per check)")
    token: str = request.app.state.identity_token
    return {"service": SERVICE, "version": __version__, "pid": os.getpid(), "proof": identity_proof(token, challenge)}
