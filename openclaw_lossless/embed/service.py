"""The embedding service: builds the configured provider, embeds queries under a deadline, counts fallbacks.

The fallback is explicit: when the provider cannot be built (model files missing, bad configuration) or a
query cannot be embedded in time (API down, too slow), recall runs on keyword search alone, and the reason
is counted and shown in ``/stats`` and ``/healthz``. Messages are never lost to it: they stay on the backlog.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import logging
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from openclaw_lossless.capture.redact import build_redactor
from openclaw_lossless.config import Settings
from openclaw_lossless.embed.provider import EmbeddingProvider, Vectors
from openclaw_lossless.errors import EmbeddingUnavailable, LosslessError

log = logging.getLogger(__name__)

QUERY_CACHE_SIZE = 512


def build_provider(settings: Settings) -> EmbeddingProvider:
    """The provider the settings name; raises a LosslessError saying what to fix when it cannot start."""
    if settings.embedding_provider == "openai-compatible":
        from openclaw_lossless.embed.openai_compat import OpenAIEmbedder

        key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
        return OpenAIEmbedder(
            base_url=settings.embedding_base_url,
            api_key=key,
            model=settings.embedding_model,
            dimensions=settings.embedding_dimensions,
            timeout_s=settings.embedding_timeout_s,
            retry_after_max_s=settings.embedding_retry_after_max_s,
        )
    if settings.embedding_provider == "local":
        from openclaw_lossless.embed.local import LocalEmbedder

        return LocalEmbedder(
            settings.model_dir,
            variant=settings.local_variant,
            threads=settings.embed_threads,
            model=settings.local_model,
        )
    raise EmbeddingUnavailable("embedding provider 'none' configured: recall uses keyword search only")


@dataclass
class EmbedderStatus:
    configured: str
    active: str | None = None
    model: str | None = None
    variant: str | None = None
    dimension: int | None = None
    ready: bool = False
    reason: str | None = None
    fallbacks: Counter[str] = field(default_factory=Counter)


class EmbeddingService:
    """Owns the provider for the process; ``embed_query`` never blocks the turn past its deadline."""

    def __init__(self, settings: Settings, provider: EmbeddingProvider | None = None) -> None:
        self.status = EmbedderStatus(configured=settings.embedding_provider)
        self.provider: EmbeddingProvider | None = None
        self._deadline_s = settings.query_embed_deadline_ms / 1000
        # A prompt or a search may hold a pasted key just like a stored message: redacted before it is sent
        # anywhere (and then it also matches the stored text, which was redacted the same way).
        self._redactor = build_redactor(settings.redact_patterns)
        self._cache: OrderedDict[bytes, Vectors] = OrderedDict()  # by the part's SHA-256: small keys
        self._cache_lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="lossless-query")
        # A provider handed in belongs to the caller (it may serve other stores after this one closes).
        self._owns_provider = provider is None
        try:
            self.provider = provider or build_provider(settings)
        except LosslessError as exc:
            self.status.reason = exc.message
            self.status.fallbacks["provider_unavailable"] += 1
            log.warning("embeddings unavailable, keyword search only: %s", exc.message)
            return
        identity = self.provider.identity
        self.status.active = identity.provider
        self.status.model = identity.model
        self.status.variant = identity.variant
        self.status.dimension = identity.dimension
        self.status.ready = True

    def withheld(self, configured: str, reason: str) -> None:
        """Record that this process searches without the user's configured embedder, and why.

        A store opened for one query (``sidecar.open_store``) leaves the model out when the stored vectors are
        another model's or the model cannot load: its settings then say ``none``, yet the user asked for a
        model, so a search that wanted vectors must say the lane was unavailable rather than find nothing.
        """
        self.status.configured = configured
        self.status.reason = reason

    def embed_query(self, parts: str | Sequence[str]) -> Vectors | None:
        """The query's vector, or None (counted as a fallback) when it cannot be had within the deadline.

        A query of several parts is the normalised mean of its parts' vectors (``embed_parts``).
        """
        vectors = self.embed_parts([parts] if isinstance(parts, str) else parts)
        if vectors is None or len(vectors) == 1:
            return None if vectors is None else vectors[0]
        mean: Vectors = np.mean(vectors, axis=0, dtype=np.float32)
        norm = float(np.linalg.norm(mean))
        return mean / norm if norm > 0 else mean

    def embed_parts(self, parts: Sequence[str]) -> Vectors | None:
        """Each part's vector (one row per part), or None (counted as a fallback) past the deadline.

        Each part (the prompt, the window's recent user messages) is embedded on its own and cached by its
        digest. The window's user messages were the prompts of earlier turns, so a turn embeds only its new
        prompt instead of up to 256 tokens of text (docs/decisions/0009); how the
        parts are weighed is recall's business (``recall/query.py``).
        """
        if self.provider is None:
            self.status.fallbacks["no_provider"] += 1
            return None
        texts = [self._redactor.redact(part) for part in parts]
        keys = [hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest() for text in texts]
        if not keys:
            return None
        vectors = self._cached(keys)
        missing = {key: text for key, text in zip(keys, texts, strict=True) if key not in vectors}
        if missing:
            embedded = self._embed_within_deadline(list(missing.values()))
            if embedded is None:
                return None
            fresh = dict(zip(missing, embedded, strict=True))
            self._remember(fresh)
            vectors |= fresh
        return np.stack([vectors[key] for key in keys])

    def _cached(self, keys: Sequence[bytes]) -> dict[bytes, Vectors]:
        found: dict[bytes, Vectors] = {}
        with self._cache_lock:
            for key in keys:
                if key in self._cache:
                    self._cache.move_to_end(key)
                    found[key] = self._cache[key]
        return found

    def _remember(self, vectors: dict[bytes, Vectors]) -> None:
        with self._cache_lock:
            self._cache.update(vectors)
            while len(self._cache) > QUERY_CACHE_SIZE:
                self._cache.popitem(last=False)

    def _embed_within_deadline(self, texts: list[str]) -> Vectors | None:
        assert self.provider is not None
        # A model trained with a question prefix (e5) embeds queries apart from the passages it stores.
        embed = getattr(self.provider, "embed_queries", self.provider.embed)
        future = self._pool.submit(embed, texts)
        try:
            return np.asarray(future.result(timeout=self._deadline_s), dtype=np.float32)
        except concurrent.futures.TimeoutError:
            # Withdraw it if it has not started: under load, abandoned queries would otherwise queue up
            # without bound, each costing memory and making every later query miss its deadline too.
            future.cancel()
            self.status.fallbacks["query_deadline"] += 1
        except EmbeddingUnavailable as exc:
            self.status.fallbacks["query_failed"] += 1
            self.status.reason = exc.message
        return None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.provider is not None and self._owns_provider:
            self.provider.close()
