"""The embedding provider interface every provider implements.

The recall pipeline and the backlog worker talk to this Protocol only, so the local model and the
OpenAI-compatible client are interchangeable, and the index records which one built it (``identity``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from openclaw_lossless.errors import EmbeddingUnavailable

Vectors = npt.NDArray[np.float32]


class EmbeddingRateLimited(EmbeddingUnavailable):
    """The provider asked not to be called again for ``retry_after_s`` seconds (an HTTP 429's Retry-After).

    The caller that can wait (the backlog worker) waits that long, interruptibly; one that cannot (a query
    under its deadline) falls back at once. Asking again sooner would only be refused again.
    """

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class ProviderIdentity:
    """What the vector index was built with; a change of any field means the vectors must be rebuilt."""

    provider: str
    model: str
    variant: str
    dimension: int


class EmbeddingProvider(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def identity(self) -> ProviderIdentity: ...

    def embed(self, texts: list[str]) -> Vectors:
        """Embed a batch; returns shape (len(texts), dimension), rows L2-normalised.

        Raises ``EmbeddingUnavailable`` (from ``openclaw_lossless.errors``) when the provider cannot answer;
        callers keep the work queued and retry later.
        """
        ...

    def close(self) -> None: ...
