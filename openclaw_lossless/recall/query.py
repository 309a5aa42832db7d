"""What recall looks for: the prompt on its own, and the prompt read with its recent context.

Why both: recall used to look for one vector, the mean of the prompt and the window's last three user
messages. After twenty long turns on one subject, a direct question about something else ("what is my
locker code?") was a quarter of that mean and its context three quarters, so the off-topic turns scored
~0.8 and the stored answer ~0.35: the question lost to its own context, although a plain search for it
ranked the answer first. Now:

- the **prompt alone** is searched as well (same index pass, ``VectorIndex.search_many``), and its own best
  matches get a guaranteed share of the block (``assemble.py``), whatever the recent messages are about;
- the **prompt in context** is the prompt plus the context, the prompt weighing as much as the whole
  context, and each context part weighing by what it adds to the parts before it (the prompt first, then
  the newest message first): three messages on one subject count about as much as one, so a long stretch
  on one subject cannot outweigh the question, while a short follow-up ("and what did she say then?")
  still takes its subject from the context;
- the **keyword lane** looks for the prompt's words; only a prompt with no word to look for ("ok, yes")
  falls back to the context's words. Before, the context's words filled most of the lane's 32 terms and
  its best BM25 (the scale every keyword score is relative to) went to whatever matched the context best.

With no context (an empty window, an operator's search) both are the prompt and nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openclaw_lossless.embed.provider import Vectors
from openclaw_lossless.recall.search import fts_query


@dataclass(frozen=True)
class Query:
    """The query's parts: the prompt first when there is one, then the context (newest first), each once."""

    parts: tuple[str, ...]
    has_prompt: bool

    @property
    def text(self) -> str:
        return "\n".join(self.parts)

    @property
    def prompt_lane(self) -> bool:
        """Whether the prompt is searched on its own too: it has context, and words of its own to look for."""
        return self.has_prompt and len(self.parts) > 1 and fts_query(self.parts[0]) is not None

    @property
    def keyword_text(self) -> str:
        """What the keyword lane looks for: the prompt's words, or all the parts' when the prompt has none."""
        if self.has_prompt and fts_query(self.parts[0]) is not None:
            return self.parts[0]
        return self.text


@dataclass(frozen=True)
class QueryVectors:
    context: Vectors  # the prompt read with its context (the prompt alone when there is no context)
    prompt: Vectors | None  # the prompt alone, when it is searched on its own too


def combine(query: Query, vectors: Vectors) -> QueryVectors:
    """The query's vectors from its parts' (one row per part, in ``query.parts`` order)."""
    if len(vectors) == 1:
        return QueryVectors(vectors[0], None)
    if not query.prompt_lane:
        return QueryVectors(_unit(_added(vectors, first=0)), None)
    prompt = vectors[0]
    return QueryVectors(_unit(prompt + _added(vectors, first=1)), prompt)


def _added(vectors: Vectors, first: int) -> Vectors:
    """The weighted mean of ``vectors[first:]``, each weighing by what it adds to the rows before it.

    A part's weight is 1 minus its best cosine with any row before it (0 when it repeats one), so parts
    that say the same thing share one part's weight instead of each counting in full.
    """
    similar = vectors @ vectors.T
    weights = np.array(
        [1.0 - max(0.0, float(similar[i, :i].max())) if i > 0 else 1.0 for i in range(first, len(vectors))],
        dtype=np.float32,
    )
    total = float(weights.sum())
    if total <= 0:
        return np.zeros(vectors.shape[1], dtype=np.float32)
    mean: Vectors = (weights @ vectors[first:]) / total
    return mean


def _unit(vector: Vectors) -> Vectors:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector
