"""The sidecar's bearer token (not LLM tokens): generated on first start into a user-only file the plugin reads.

An explicit ``LOSSLESS_TOKEN`` wins (and is never written to disk; ``Settings`` refuses one shorter than
``MIN_TOKEN_CHARS``). The file is created with mode 0600 in one ``open`` call, so the token is never readable
by others even for an instant; a file holding a guessable token (too short) is replaced by a fresh one, which
the plugin reads from the same file.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

from openclaw_lossless.config import MIN_TOKEN_CHARS, Settings

SERVICE = "openclaw-lossless"
PROOF_PREFIX = "openclaw-lossless identity v1\n"


def identity_proof(token: str, challenge: str) -> str:
    """The answer only the token holder can give: hex HMAC-SHA256 keyed with the token (UTF-8); the sidecar
    gives it at ``GET /v1/identity``, the plugin, ``serve`` and ``doctor`` check it."""
    message = (PROOF_PREFIX + challenge).encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def load_or_create_token(settings: Settings) -> str:
    """The token the server requires: ``LOSSLESS_TOKEN``, else the token file's, else a fresh one written there."""
    if settings.token is not None:
        return settings.token.get_secret_value()
    path = settings.token_path
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    try:
        token = path.read_text().strip()
        if len(token) >= MIN_TOKEN_CHARS:
            os.chmod(path, 0o600)
            return token
    except FileNotFoundError:
        pass
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return token


def read_token(settings: Settings) -> str | None:
    """This store's token (``LOSSLESS_TOKEN`` or the token file), or None when there is none to read.

    A client's read: it never creates the file, so a command run without a server leaves no token behind.
    """
    if settings.token is not None:
        return settings.token.get_secret_value()
    try:
        return settings.token_path.read_text().strip() or None
    except OSError:
        return None
