"""Importance grading: labels at their thresholds, unknown is neutral, and the grade moves recall's ranking."""

from __future__ import annotations

import pytest

from openclaw_lossless.capture import importance
from openclaw_lossless.recall.scoring import Candidate, score

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it


def test_labels_follow_the_documented_thresholds() -> None:
    assert importance.grade("user", "Remember that we decided to deploy on 2026-03-01.").label == "must_remember"
    assert importance.grade("user", "I prefer tabs over spaces in this repo.").label == "nice_to_have"
    assert importance.grade("assistant", "thanks!").label == "ignore"
    assert importance.grade("user", "").score == 0.0
    assert [importance.label_for(s) for s in (0.8, 0.79, 0.5, 0.49)] == [
        "must_remember", "nice_to_have", "nice_to_have", "ignore",
    ]  # fmt: skip


def test_an_unknown_grade_is_neutral_and_grades_weigh_from_three_quarters_to_five_quarters() -> None:
    assert importance.weight(None) == 1.0
    assert (importance.weight(0.0), importance.weight(1.0)) == (0.75, 1.25)


def test_of_two_equally_similar_messages_the_notable_one_ranks_first() -> None:
    ranked = []
    for ident, text in [(1, "the deploy window is friday i think"), (2, "we decided the deploy window is friday")]:
        candidate = Candidate(ident, cosine=0.6)
        grade = importance.grade("assistant", text)
        score(candidate, role="assistant", importance_score=grade.score, age_hours=5, half_life_hours=168,
              recency_floor=0.9)  # fmt: skip
        ranked.append(candidate)
    ranked.sort(key=lambda c: -c.score)
    assert [c.message_id for c in ranked] == [2, 1]
