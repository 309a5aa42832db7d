"""A block that is not the same fact five times: with ``recall_duplicate_cosine`` below 1, a hit that
near-repeats one already kept is left out, so the second fact a two-part question needs gets the place.

Two sidecars on the real local model over real HTTP, one with the step off (the default) and one with it on,
each holding the same history: five near-identical statements of one fact, one statement of another, and
everyday chat around them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openclaw_lossless.config import Settings
from openclaw_lossless.embed.local import LocalEmbedder
from tests.helpers import LiveSidecar, live_sidecar, make_settings
from tests.test_recall_quality import DAY_MS, NOW_MS, ask, commit, filler

LOCKER = [
    "Dana: My locker code at the gym is 4471.",
    "Dana: The code for my gym locker is 4471.",
    "Dana: Remember, my gym locker code is 4471.",
    "Dana: My gym locker code? It is 4471.",
    "Dana: Note that my locker code at the gym is 4471.",
]
CAT = "Dana: Our cat is called Miso, she loves the windowsill."
QUESTION = "What is my gym locker code, and what is our cat called?"
SMALL = {"retrievalCount": 3, "neighbourRadius": 0}  # room for three lines: the fact, the other fact, one more


def recalled(tmp_path: Path, model_dir: Path, name: str, **settings: Any) -> dict[str, Any]:
    embedder = LocalEmbedder(model_dir, variant=Settings().local_variant, threads=1)
    with live_sidecar(make_settings(tmp_path / name / "state", **settings), embedder) as live:
        fill(live)
        return ask(live, "dana", QUESTION, config=SMALL)


def fill(live: LiveSidecar) -> None:
    history = [*filler(6), *LOCKER[:2], *filler(3), CAT, *filler(3), *LOCKER[2:], *filler(4)]
    commit(live, "dana", "dana-old", history, NOW_MS - 20 * DAY_MS)
    live.wait_for_backlog(timeout=120)


def lines_of(result: dict[str, Any]) -> str:
    return str(result["systemPromptAddition"])


def test_the_second_fact_gets_the_place_a_repeat_would_take(tmp_path: Path, model_dir: Path) -> None:
    off = recalled(tmp_path, model_dir, "off")
    assert CAT.split(": ")[1] not in lines_of(off), "the scenario must crowd the second fact out without the step"
    assert sum(line.split(": ")[1] in lines_of(off) for line in LOCKER) == SMALL["retrievalCount"]

    on = recalled(tmp_path, model_dir, "on", recall_duplicate_cosine=0.9)
    block = lines_of(on)
    assert CAT.split(": ")[1] in block
    assert sum(line.split(": ")[1] in block for line in LOCKER) == 1, "one statement of the locker code is enough"
    repeats = [c for c in on["trace"]["candidates"] if c["decision"] == "near_duplicate"]
    assert len(repeats) == len(LOCKER) - 1
