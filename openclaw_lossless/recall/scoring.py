"""Scoring a candidate: similarity × recency × importance, with every part kept for the trace.

score = similarity × 0.5^(age_hours / recencyDecayHours) × role_weight × importance_weight

similarity is the better of the two lanes' evidence: the cosine of the query and message vectors, and the
keyword lane's BM25 normalised by the best keyword hit of the same query. Candidates below minSimilarity
are dropped before anything else.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from openclaw_lossless.capture import importance

ROLE_WEIGHTS = {"user": 1.2, "assistant": 1.0, "toolResult": 0.8}


@dataclass
class Candidate:
    message_id: int
    lanes: set[str] = field(default_factory=set)
    cosine: float | None = None
    bm25: float | None = None
    keyword: float | None = None
    similarity: float = 0.0
    age_hours: float = 0.0
    recency: float = 1.0
    weight: float = 1.0
    score: float = 0.0
    decision: str = "considered"


def score(
    candidate: Candidate, *, role: str, importance_score: float | None, age_hours: float, half_life_hours: float
) -> None:
    """Fill in the candidate's score parts."""
    candidate.similarity = max(candidate.cosine or 0.0, candidate.keyword or 0.0)
    candidate.age_hours = max(age_hours, 0.0)
    candidate.recency = 0.5 ** (candidate.age_hours / half_life_hours)
    candidate.weight = ROLE_WEIGHTS.get(role, 0.9) * importance.weight(importance_score)
    candidate.score = candidate.similarity * candidate.recency * candidate.weight
