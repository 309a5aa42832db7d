"""Scoring a candidate: relevance × recency × importance, with every part kept for the trace.

score = relevance × recency × role_weight × importance_weight
recency = recencyFloor + (1 − recencyFloor) × 0.5^(age_hours / recencyDecayHours)

Two measures of a match, for two jobs:
- ``similarity``, the better of the two lanes' evidence (the cosine of the query and message vectors, and the
  keyword lane's BM25 normalised by the best keyword hit of the same query), decides whether a candidate is
  relevant at all: below minSimilarity it is dropped.
- ``relevance``, the mean of the lanes' scores (CombSUM, the fusion that IR evaluations have long found
  better than taking the maximum), orders the rest. Why not the maximum: the keyword score is relative, so
  the best keyword hit of any prompt scores 1.0, and under the maximum it led the block however weak its
  match ("thanks, see you next week" recalled whichever line shared the most of those words). Under the
  mean a line leads when words and meaning agree. A lane that did not run for the query (no vector: the
  embedder is down or the message is still in the backlog; no keyword terms) is left out of the mean rather
  than counted as zero, so a fresh message waiting for its vector is not pushed down.

Why a floor on recency: the seed's pure half-life (168 h) makes a three-month-old fact worth 2^-13 of a fresh
one, so on long histories recall returned only last week, whatever the question (LoCoMo any-hit 0.23). With
the floor at 0.9 an old message keeps 90 % of its score: fresh material still wins ties and near-ties (up to
~11 % better relevance), but a clearly better old match is no longer buried. ``recencyFloor`` 0 is the seed.

When the prompt is also searched on its own (``query.py``), each candidate gets the same parts for it:
``prompt_cosine``, ``prompt_similarity`` and ``prompt_score`` (its keyword score is the prompt's already:
the keyword lane looks for the prompt's words). The block takes the best of both rankings (``assemble.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openclaw_lossless.capture import importance

ROLE_WEIGHTS = {"user": 1.2, "assistant": 1.0, "toolResult": 0.8}


@dataclass
class Candidate:
    message_id: int
    lanes: set[str] = field(default_factory=set)
    cosine: float | None = None  # against the prompt read with its context
    prompt_cosine: float | None = None  # against the prompt alone, when it was searched on its own
    bm25: float | None = None
    keyword: float | None = None
    similarity: float = 0.0
    relevance: float = 0.0
    age_hours: float = 0.0
    recency: float = 1.0
    weight: float = 1.0
    score: float = 0.0
    prompt_similarity: float | None = None
    prompt_score: float | None = None
    decision: str = "considered"
    chosen_by: str | None = None  # "prompt" or "context": which ranking took it into the block
    neighbour_of: str | None = None
    time_match: str | None = None  # how it matches the question's time (recall/when.py), if it does
    keyword_coverage: float = 1.0  # share of the query's pairs of characters it holds (search.pair_coverage)


def recency(age_hours: float, half_life_hours: float, floor: float) -> float:
    """The recency factor: ``floor`` plus the decaying rest (1 when new, ``floor`` when very old)."""
    decay: float = 0.5 ** (max(age_hours, 0.0) / half_life_hours)
    return floor + (1.0 - floor) * decay


def score(
    candidate: Candidate,
    *,
    role: str,
    importance_score: float | None,
    age_hours: float,
    half_life_hours: float,
    recency_floor: float,
    lanes: frozenset[str] = frozenset({"vector", "keyword"}),
) -> None:
    """Fill in the candidate's score parts; ``lanes`` are the lanes that ran for the query."""
    candidate.similarity = max(candidate.cosine or 0.0, candidate.keyword or 0.0)
    candidate.relevance = relevance(candidate, lanes)
    candidate.age_hours = max(age_hours, 0.0)
    candidate.recency = recency(candidate.age_hours, half_life_hours, recency_floor)
    candidate.weight = ROLE_WEIGHTS.get(role, 0.9) * importance.weight(importance_score)
    candidate.score = candidate.relevance * candidate.recency * candidate.weight
    if candidate.prompt_cosine is not None:
        candidate.prompt_similarity = max(candidate.prompt_cosine, candidate.keyword or 0.0)
        prompt_relevance = _mean(
            candidate.prompt_cosine, candidate.keyword, lanes, candidate.prompt_similarity, candidate.keyword_coverage
        )
        candidate.prompt_score = prompt_relevance * candidate.recency * candidate.weight


def relevance(candidate: Candidate, lanes: frozenset[str]) -> float:
    """The mean of the lane scores that exist for this query and message (missing from a lane's top: 0)."""
    return _mean(candidate.cosine, candidate.keyword, lanes, candidate.similarity, candidate.keyword_coverage)


def _mean(
    cosine: float | None, keyword: float | None, lanes: frozenset[str], otherwise: float, coverage: float = 1.0
) -> float:
    """Beside a cosine, the keyword score counts by the share of the query's pairs of characters the message
    holds (``coverage``); a lane alone is its own score, so keyword search ranks by BM25 as before."""
    parts: list[float] = []
    if "vector" in lanes and cosine is not None:
        parts.append(max(cosine, 0.0))
    if "keyword" in lanes:
        parts.append((keyword or 0.0) * (coverage if parts else 1.0))
    return sum(parts) / len(parts) if parts else otherwise
