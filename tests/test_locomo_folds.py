"""The benchmark's leave-one-conversation-out choice of the recall defaults (``benchmarks/locomo_folds.py``):
a knob's value is chosen on the training questions only, a tie or a block over the token target keeps the
default, and a default changes only on a gain larger than chance."""

from __future__ import annotations

import pytest

from benchmarks.locomo_folds import (
    DEFAULT,
    GRID,
    Answers,
    Block,
    choose,
    config_key,
    configurations,
    knob_verdicts,
    paired_test,
)
from openclaw_lossless.config import RecallSettings

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

HIT, MISS = Block(True, True, 1000), Block(False, False, 1000)
DEFAULTS = RecallSettings()


def answers_where(changes: dict[str, list[Block | None]], n: int) -> Answers:
    """Every configuration answers like the defaults (all misses) unless ``changes`` says otherwise."""
    answers: Answers = {key: [MISS] * n for key in configurations(DEFAULTS)}
    return answers | changes


def test_every_knob_of_the_grid_is_a_recall_setting_with_its_default_among_the_values() -> None:
    assert set(GRID) <= set(RecallSettings.model_fields)
    assert len(configurations(DEFAULTS)) == 1 + sum(len(values) - 1 for values in GRID.values())


def test_a_value_is_chosen_on_the_training_questions_only() -> None:
    # floor 1.0 wins questions 0-1 (training), loses nothing; floor 0.8 wins only question 3 (held out)
    answers = answers_where(
        {
            config_key("recency_floor", 1.0): [HIT, HIT, MISS, MISS],
            config_key("recency_floor", 0.8): [MISS, MISS, MISS, HIT],
        },
        4,
    )
    chosen = choose(answers, [0, 1, 2], DEFAULTS, p95_limit=2000)
    assert chosen["recency_floor"] == 1.0
    assert chosen["neighbour_radius"] == DEFAULTS.neighbour_radius  # a tie keeps the default
    held_out_only = choose(
        answers_where({config_key("recency_floor", 0.8): [MISS, MISS, HIT]}, 3), [0, 1], DEFAULTS, 2000
    )
    assert held_out_only["recency_floor"] == DEFAULTS.recency_floor


def test_a_block_over_the_token_target_is_never_chosen() -> None:
    big = Block(True, True, 2500)
    answers = answers_where({config_key("recall_token_budget", 2500): [big, big]}, 2)
    assert choose(answers, [0, 1], DEFAULTS, p95_limit=2000)["recall_token_budget"] == DEFAULTS.recall_token_budget


def test_a_default_changes_only_on_a_gain_larger_than_chance() -> None:
    n = 40
    few = [HIT, HIT] + [MISS] * (n - 2)  # two questions gained: chance
    many = [HIT] * 12 + [MISS] * (n - 12)  # twelve gained, none lost
    folds = [{"chosen": {"recency_floor": 0.95}} for _ in range(5)]
    categories = ["single-hop"] * n
    for blocks, verdict in ((few, "keep the default"), (many, "change to 0.95")):
        per_knob: dict[str, list[Block | None]] = {"recency_floor": list(blocks)}
        answers = answers_where({}, n)
        assert knob_verdicts(per_knob, answers, folds, categories, DEFAULTS)["recency_floor"]["verdict"] == verdict
    seed_folds = [{"chosen": {"min_similarity": 0.35}}] * 5
    seed = knob_verdicts({"min_similarity": list(many)}, answers_where({}, n), seed_folds, categories, DEFAULTS)
    assert seed["min_similarity"]["verdict"].startswith("wins out of fold at 0.35; a seed setting")
    assert paired_test([MISS, HIT, MISS], [HIT, MISS, MISS]) == {"gained": 1, "lost": 1, "p": 1.0}
    assert answers_where({}, 1)[DEFAULT] == [MISS]
