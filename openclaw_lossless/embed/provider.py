"""The embedding provider interface every provider implements.

The recall pipeline and the backlog worker talk to this Protocol only, so the local model and the
OpenAI-compatible client are interchangeable, and the index records which one built it (``identity``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


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
