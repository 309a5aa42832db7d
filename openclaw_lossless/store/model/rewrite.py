"""The rescan's shared pieces: a message row as it is rewritten, and the embedding cache's key for a text."""

from __future__ import annotations

import hashlib
from typing import Any

Row = tuple[Any, ...]


def cache_key(text: str) -> bytes:
    """The ``embedding_cache`` key of a text (its SHA-256, lone surrogates kept), as the embedder files it: both
    backends' rewrites drop the old text's cached vector by it, so a redacted text's embedding does not stay."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
