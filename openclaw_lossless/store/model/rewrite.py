"""The rescan's shared rule: the embedding cache's key for a text, by which both backends drop a rewritten one."""

from __future__ import annotations

import hashlib


def cache_key(text: str) -> bytes:
    """The ``embedding_cache`` key of a text (its SHA-256, lone surrogates kept), as the embedder files it: both
    backends' rewrites drop the old text's cached vector by it, so a redacted text's embedding does not stay."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
