"""What the recall-quality knobs change for a user: old facts come back, fresh ones still win ties, a question
that names a day finds that day, the reply next to a matching turn comes along, the block stays in budget, and
none of it leaks past the recall scope or repeats what the host's window already shows.

One sidecar on the real local model over real HTTP; each scenario lives in an agent of its own (recall scope
is per agent), with fixed timestamps and a fixed "now" so ages are exact.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.config import Settings
from openclaw_lossless.embed.local import LocalEmbedder
from openclaw_lossless.embed.provider import EmbeddingProvider
from openclaw_lossless.recall import render, scoring
from openclaw_lossless.recall.scoring import Candidate
from tests.helpers import LiveSidecar, live_sidecar, make_settings

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
NOW_MS = 1_685_577_600_000  # 1 June 2023 00:00 UTC
SEED = {"recencyFloor": 0.0, "neighbourRadius": 0, "recallTokenBudget": 0}

_SUBJECTS = ["the garden", "my bike", "the new job", "our flat", "the book club", "the football match",
             "my guitar lessons", "the bakery downtown", "the car repair", "the hiking trip"]  # fmt: skip
_REMARKS = ["was fun this week", "needs more work than I thought", "made me laugh", "is going slowly",
            "surprised everyone", "took the whole afternoon"]  # fmt: skip


def filler(count: int, *, speaker: str = "Sam", long: bool = False) -> list[str]:
    """Everyday chat that shares no content words with the scenarios' questions."""
    lines = []
    for subject, remark in itertools.islice(itertools.cycle(itertools.product(_SUBJECTS, _REMARKS)), count):
        line = f"{speaker}: {subject.capitalize()} {remark}."
        lines.append(line + (" Anyway, more on that later, it is a long story about " + subject) * 8 if long else line)
    return lines


def commit(server: LiveSidecar, agent: str, session: str, texts: list[str], start_ms: int) -> None:
    """One message per turn, 30 s apart, speakers alternating user/assistant."""
    key = f"agent:{agent}:main"
    for n, text in enumerate(texts):
        message = {"role": "user" if n % 2 == 0 else "assistant", "content": text, "timestamp": start_ms + n * 30_000}
        body = {"sessionId": session, "sessionKey": key, "advancementKey": f"{session}:{n}", "messages": [message]}
        assert server.post("commit-turn", body).json()["status"] == "committed"


def ask(server: LiveSidecar, agent: str, prompt: str, **extra: Any) -> dict[str, Any]:
    body = {"sessionId": f"{agent}-now", "sessionKey": f"agent:{agent}:main", "messages": [], "prompt": prompt}
    response = server.post("assemble", body | {"now": NOW_MS, "trace": True} | extra)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


PET_FACT = "Caroline: I finally adopted a puppy from the animal shelter last week!"
PET_ANSWER = "Caroline: Biscuit, because she is the colour of shortbread."
PET_QUESTION = "What kind of pet did Caroline adopt from the animal shelter?"
DIET_LINE = "Mia: Luna's diet starts Monday, my sister swears no more cake."
VET_LINE = "Mia: The vet said Luna should eat less kibble and more wet food."


@pytest.fixture(scope="module")
def embedder(model_dir: Path) -> EmbeddingProvider:
    """The real local model, this module's own: a sidecar closes its provider when it stops, so the
    session-wide ``local_embedder`` is unusable after another module's sidecar has stopped."""
    return LocalEmbedder(model_dir, variant=Settings().local_variant, threads=1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, embedder: EmbeddingProvider) -> Iterator[LiveSidecar]:
    with live_sidecar(make_settings(tmp_path_factory.mktemp("quality") / "state"), embedder) as live:
        # ages: a fact from four months ago, then a busy last week of chat about other weddings
        commit(live, "ages", "ages-old", [*filler(6), "Priya: My sister's wedding will be in Porto, by the river."],
               NOW_MS - 120 * DAY_MS)  # fmt: skip
        fresh = [f"Sam: {thing} at the wedding {when} was lovely." for thing in
                 ["The music", "The food", "The dancing", "The speech", "The cake", "The flowers", "The photos",
                  "The venue", "The weather", "The dress", "The band", "The toast"]
                 for when in ("on Saturday", "yesterday")]  # fmt: skip
        commit(live, "ages", "ages-fresh", fresh, NOW_MS - DAY_MS)
        # ties: the same sentence, once four months ago and once yesterday
        tie = "Jo: The team offsite is booked at the lake lodge."
        commit(live, "ties", "ties-old", [*filler(4), tie], NOW_MS - 120 * DAY_MS)
        commit(live, "ties", "ties-fresh", [*filler(4), tie], NOW_MS - DAY_MS)
        # dates: the same remark on five different days, stored newest first; the question names the oldest
        # day, which both recency and the id tie-break disfavour: only its date can bring it first
        days = [1676000000000, 1674000000000, 1672000000000, 1670000000000, 1667952000000]
        for number, day_ms in enumerate(days):
            commit(live, "dates", f"dates-{number}", ["Nate: I tried a new recipe tonight.", *filler(2)], day_ms)
        # pets: the answer is two turns after the turn that matches the question's words
        pets = [*filler(8), PET_FACT, "Melanie: Congratulations! What did you decide to call her?", PET_ANSWER]
        commit(live, "pets", "pets-old", [*pets, *filler(8, speaker="Mel")], NOW_MS - 60 * DAY_MS)
        commit(live, "pets", "pets-long", filler(60, long=True), NOW_MS - 30 * DAY_MS)
        # agree: one line shares the question's rarest words, the other shares fewer of them and its meaning
        commit(live, "agree", "agree-old", [*filler(6), DIET_LINE, "Sam: The harbour is quiet today.", VET_LINE,
                                            *filler(4)], NOW_MS - 30 * DAY_MS)  # fmt: skip
        live.wait_for_backlog(timeout=300)
        yield live


def texts_of(result: dict[str, Any]) -> str:
    return str(result["systemPromptAddition"])


def test_an_old_fact_is_recalled_despite_its_age(server: LiveSidecar) -> None:
    question = "Where will Priya's sister's wedding be?"
    assert "Porto" not in texts_of(ask(server, "ages", question, config=SEED))  # the seed's decay buries it
    assert "Porto" in texts_of(ask(server, "ages", question))


def test_fresh_material_still_wins_a_tie(server: LiveSidecar) -> None:
    result = ask(
        server, "ties", "Where is the team offsite booked?", config={"retrievalCount": 1, "neighbourRadius": 0}
    )
    assert [item["createdAt"] for item in result["recalled"]] == [pytest.approx((NOW_MS - DAY_MS) / 1000 + 120)]


def test_a_line_that_matches_in_words_and_meaning_leads(server: LiveSidecar) -> None:
    """The best keyword hit always has keyword score 1.0 (BM25 relative to the best): ranked by the better
    lane alone it would lead whatever its meaning. Ranked by the lanes' mean, the line that agrees with the
    question in both leads, and the other is still recalled after it."""
    question = "What did the vet say about Luna's diet?"
    result = ask(server, "agree", question, config={"retrievalCount": 2, "neighbourRadius": 0})
    considered = [c for c in result["trace"]["candidates"] if c["decision"] == "kept"]
    lines = [_line(texts_of(result), c) for c in considered]
    assert [VET_LINE in lines[0], DIET_LINE in lines[1]] == [True, True], lines
    vet, diet = considered
    assert diet["keyword"] == 1.0 and diet["similarity"] > vet["similarity"]  # the better lane favours diet
    assert vet["relevance"] > diet["relevance"]  # words and meaning together favour the vet


def test_a_lane_that_did_not_run_is_left_out_of_the_mean() -> None:
    """A message still waiting for its vector, or a query the embedder could not serve, is ranked by its
    keyword score alone, not halved by a missing cosine; one that is simply absent from a lane scores 0 there."""
    both = frozenset({"vector", "keyword"})
    assert scoring.relevance(Candidate(1, cosine=None, keyword=0.8), both) == 0.8
    assert scoring.relevance(Candidate(1, cosine=0.6, keyword=None), both) == pytest.approx(0.3)
    assert scoring.relevance(Candidate(1, cosine=0.6, keyword=0.8), frozenset({"keyword"})) == 0.8
    assert scoring.relevance(Candidate(1, cosine=0.6, keyword=None), frozenset({"vector"})) == 0.6
    assert scoring.relevance(Candidate(1, cosine=-0.2, keyword=0.4), both) == pytest.approx(0.2)


def test_a_question_naming_a_day_finds_that_days_turn(server: LiveSidecar) -> None:
    result = ask(server, "dates", "What did Nate try on 9 November, 2022?", config={"retrievalCount": 1})
    hits = [item for item in result["recalled"] if "neighbourOf" not in item]
    assert [item["createdAt"] for item in hits] == [1667952000.0]  # the oldest of five identical remarks
    assert "[2022-11-09 00:00 UTC | user]: Nate: I tried a new recipe tonight." in texts_of(result)


def test_the_turn_next_to_a_hit_is_recalled_with_it(server: LiveSidecar) -> None:
    alone = ask(server, "pets", PET_QUESTION, config={"retrievalCount": 1, "neighbourRadius": 0})
    assert PET_FACT in texts_of(alone) and "Biscuit" not in texts_of(alone)

    result = ask(server, "pets", PET_QUESTION, config={"retrievalCount": 1})
    block = texts_of(result)
    assert PET_FACT in block and "Biscuit" in block
    assert block.index(PET_FACT) < block.index("Biscuit")  # in time order, next to its hit
    hit = next(item for item in result["recalled"] if "neighbourOf" not in item)
    answer = next(c for c in result["trace"]["candidates"] if c["citation"] in block and "Biscuit" in _line(block, c))
    assert answer["decision"] == "neighbour" and answer["neighbour_of"] == hit["citation"]
    assert "neighbour" in answer["lanes"]
    citations = [item["citation"] for item in result["recalled"]]
    assert len(citations) == len(set(citations)) == 5  # the hit and its two neighbours either side, once each


def _line(block: str, candidate: dict[str, Any]) -> str:
    return next(line for line in block.splitlines() if line.endswith(f"[{candidate['citation']}]"))


def test_the_block_keeps_to_its_token_budget_and_says_what_it_cut(server: LiveSidecar) -> None:
    question = "How is the hiking trip and the garden going?"
    default = ask(server, "pets", question)
    assert 1000 < render.estimate_tokens(texts_of(default)) <= 2000  # long messages: the 2,000 cap binds
    small = ask(server, "pets", question, config={"recallTokenBudget": 400})
    assert 0 < render.estimate_tokens(texts_of(small)) <= 400
    cut = [c for c in small["trace"]["candidates"] if c["decision"] == "over_budget"]
    assert cut and all(c["citation"] not in texts_of(small) for c in cut)
    hits = {item["citation"] for item in small["recalled"] if "neighbourOf" not in item}
    assert all(c["neighbour_of"] in hits for c in cut if "neighbour" in c["lanes"])


def test_neighbours_stay_inside_the_recall_scope(server: LiveSidecar) -> None:
    # a session first used without a key (agent "main"), then claimed by agent "scoped": its early
    # messages belong to "main" and must not reach "scoped" as neighbours of its hit
    early = ["Sam: The vault combination is 4417, keep it secret.", "Sam: The harbour is quiet today."]
    for n, text in enumerate(early):
        message = {"role": "user", "content": text, "timestamp": NOW_MS - 10 * DAY_MS + n}
        body = {"sessionId": "shared-session", "advancementKey": f"early:{n}", "messages": [message]}
        assert server.post("commit-turn", body).json()["status"] == "committed"
    body = {"sessionId": "shared-session", "advancementKey": "late", "sessionKey": "agent:scoped:main"}
    message = {"role": "user", "content": "Ana: The harbour ferry leaves at noon on Fridays.", "timestamp": NOW_MS}
    assert server.post("commit-turn", body | {"messages": [message]}).json()["status"] == "committed"
    server.wait_for_backlog()
    result = ask(server, "scoped", "When does the harbour ferry leave?")
    assert "harbour ferry" in texts_of(result)
    assert "4417" not in texts_of(result)
    assert all("4417" not in str(c) for c in result["trace"]["candidates"])


def test_a_neighbour_in_the_hosts_window_is_not_repeated(server: LiveSidecar) -> None:
    session = [*filler(6), PET_FACT, PET_ANSWER]
    history = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": text, "timestamp": NOW_MS - 3600_000 + n * 30_000}
        for n, text in enumerate(session)
    ]
    for n, message in enumerate(history):
        turn = {"sessionId": "win-s", "sessionKey": "agent:win:main", "advancementKey": f"win:{n}"}
        assert server.post("commit-turn", turn | {"messages": [message]}).json()["status"] == "committed"
    server.wait_for_backlog()
    body = {"sessionId": "win-s", "sessionKey": "agent:win:main", "messages": history, "prompt": PET_QUESTION}
    result = server.post("assemble", body | {"trace": True, "tokenBudget": 4000, "config": {"windowShare": 0.005}})
    answer = result.json()
    assert answer["windowStart"] == len(history) - 1  # the window is the last message: the answer
    assert PET_FACT in texts_of(answer)
    assert "Biscuit" not in texts_of(answer)
    in_window = [c for c in answer["trace"]["candidates"] if c["decision"] == "in_window"]
    assert in_window and all(c["citation"] not in texts_of(answer) for c in in_window)


def test_a_window_full_of_matches_does_not_crowd_out_the_older_one(server: LiveSidecar) -> None:
    """Each lane keeps its best 100: when the host's window held more than that many messages matching the
    question better than the old fact, the window took every place and nothing older was recalled."""
    fact = "Dana: The billing service release train leaves every second Thursday at ten, from the ops channel."
    commit(server, "crowd", "crowd-old", [*filler(4), fact], NOW_MS - 30 * DAY_MS)
    window = [f"Sam: billing service release train leave? ({n})" for n in range(150)]
    commit(server, "crowd", "crowd-now", window, NOW_MS - HOUR_MS)
    server.wait_for_backlog()
    history = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": text, "timestamp": NOW_MS - HOUR_MS + n * 30_000}
        for n, text in enumerate(window)
    ]
    body = {"sessionId": "crowd-now", "sessionKey": "agent:crowd:main", "messages": history}
    answer = server.post("assemble", body | {"prompt": "When does the billing service release train leave?",
                                             "now": NOW_MS, "trace": True}).json()  # fmt: skip
    assert answer["windowStart"] == 0
    assert "every second Thursday" in texts_of(answer)
    assert not any(line in texts_of(answer) for line in window)
