"""A direct question finds what it asks for, whatever the recent turns are about.

The case from a real gateway run: a fact in turn 1, then twenty long turns on another subject, then a direct
question about the fact. The fact is stored and a plain search ranks it first, but the query recall used
was the prompt averaged with the last three user messages (long, and all about the other subject), so the
off-topic turns outranked the fact and filled the block. Here the host's side is played as the plugin plays
it: every turn committed through ``commit-turn``, then ``assemble`` with the whole history as descriptors
(text on the last three user messages only) and the question as the prompt, on the real local model over
real HTTP. The facts, questions and subjects vary, so no one sentence is what passes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.capture.text import descriptor_text, descriptor_tokens, window_key
from openclaw_lossless.config import Settings
from openclaw_lossless.embed.local import LocalEmbedder
from openclaw_lossless.embed.provider import EmbeddingProvider
from tests.helpers import LiveSidecar, live_sidecar, make_settings

START_MS = 1_700_000_000_000
TURN_MS = 90_000
STRETCH_TURNS = 20
RECENT_USER_TEXTS = 3  # the plugin sends the text of this many last user messages (plugin/descriptors.js)
TOKEN_BUDGET = 4000  # the window (60 %) holds the last few turns; the rest of the stretch competes with the fact


class Subject:
    """A subject of long everyday talk: what it is about, and the things and doings it names."""

    def __init__(self, name: str, things: str, doings: str) -> None:
        self.name = name
        self.things = things.split(", ")
        self.doings = doings.split(", ")


SUBJECTS = {
    "gardening": Subject(
        "the garden",
        "tomato seedlings, raised beds, compost heap, rose bushes, clay soil, mulch, runner beans, greenhouse,"
        " aphids, watering can, hedge, lavender",
        "prune, water, repot, feed, weed, plant out, stake, cover",
    ),
    "running": Subject(
        "my marathon training",
        "long run, interval session, running shoes, hamstring, tempo pace, hill repeats, energy gels, recovery"
        " week, heart rate zones, race bib, foam roller, split times",
        "stretch, taper, fuel, pace, rest, warm up, log, ice",
    ),
    "kitchen": Subject(
        "the kitchen renovation",
        "cabinet doors, worktop, tiling, extractor fan, plumber, sink, floor joists, paint samples, cooker hood,"
        " skirting boards, electrician, splashback",
        "sand, measure, seal, order, fit, grout, level, replace",
    ),
}


@dataclass(frozen=True)
class Fact:
    said: str
    question: str
    marker: str  # a word of the fact that no other message holds


FACTS = [
    Fact(
        "Quick note before I forget: my gym locker code is 4471 and my cat is called Miso.",
        "What is my locker code, and what is my cat called?",
        "Miso",
    ),
    Fact(
        "Just so you know, my dentist is Dr Okafor and the check-up is booked for Thursday at 3pm.",
        "Who is my dentist, and when is my check-up?",
        "Okafor",
    ),
    Fact(
        "Remember that my sister Lena flies in on Friday, landing at gate B12 around six in the evening.",
        "When does my sister land, and at which gate?",
        "B12",
    ),
    Fact(
        "We signed for the flat on Elm Street in the end: the rent is 950 a month, paid to Mr Halvorsen.",
        "How much is my rent, and who do I pay it to?",
        "Halvorsen",
    ),
    Fact(
        "Ugh, my bike was stolen outside the library on Tuesday; the police gave me reference PX-5531.",
        "What was the crime number they gave me?",
        "PX-5531",
    ),
]
CASES = list(zip(FACTS, itertools.cycle(SUBJECTS.values())))


OPENERS = ("Another update on {name}.", "Back to {name} again, sorry.", "More on {name}, day {day}.",
           "So, {name}: where we are now.")  # fmt: skip
USER_LINES = ("Today I had to {doing} the {thing} again, and it took longer than I had hoped.",
              "I keep wondering whether the {thing} needs me to {doing} it every week or only now and then.",
              "My neighbour says you should never {doing} the {thing} before the weekend, is that true?",
              "The {thing} looked much better after I took the time to {doing} it properly.")  # fmt: skip
REPLY_LINES = ("It may help to {doing} the {thing} a little earlier, so it is ready for next week.",
               "Most people {doing} the {thing} once a fortnight; more often rarely pays off.",
               "If the {thing} still gives you trouble, {doing} it in two smaller steps.",
               "That is normal for the {thing}; {doing} it gently and give it a few days.")  # fmt: skip


def long_message(subject: Subject, turn: int, *, reply: bool) -> str:
    """Talk about ``subject``, different every turn: one to fourteen sentences (its things and doings in
    rotation), so the stretch holds lines of every length, as a real one does."""
    sentences = 1 + (turn * 5 + (3 if reply else 0)) % 14
    lines = REPLY_LINES if reply else USER_LINES
    out = [OPENERS[turn % len(OPENERS)].format(name=subject.name, day=turn + 1)]
    for n in range(sentences):
        thing = subject.things[(turn * 3 + n) % len(subject.things)]
        doing = subject.doings[(turn + n * 3) % len(subject.doings)]
        out.append(lines[(turn + n) % len(lines)].format(thing=thing, doing=doing))
    return " ".join(out)


def history(fact: Fact, subject: Subject) -> list[dict[str, Any]]:
    """The host's messages: the fact and its acknowledgement, then the long stretch on ``subject``."""
    texts = [fact.said, "Noted, I will keep that in mind."]
    for turn in range(STRETCH_TURNS):
        texts += [long_message(subject, turn, reply=False), long_message(subject, turn, reply=True)]
    return conversation(texts, START_MS)


def conversation(texts: list[str], start_ms: int) -> list[dict[str, Any]]:
    """Host messages, user and assistant in turn, ``TURN_MS`` apart."""
    roles = itertools.cycle(["user", "assistant"])
    return [
        {"role": role, "content": [{"type": "text", "text": text}], "timestamp": start_ms + n * TURN_MS}
        for n, (role, text) in enumerate(zip(roles, texts, strict=False))
    ]


def descriptors(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the plugin sends for the host's history (``describeMessages``)."""
    users = [n for n, m in enumerate(messages) if m["role"] == "user"][-RECENT_USER_TEXTS:]
    out = []
    for n, message in enumerate(messages):
        described = {"role": message["role"], "key": window_key(message), "tokens": descriptor_tokens(message)}
        described["timestamp"] = message["timestamp"]
        out.append(described | ({"text": descriptor_text(message)} if n in users else {}))
    return out


@pytest.fixture(scope="module")
def embedder(model_dir: Path) -> EmbeddingProvider:
    """The real local model, this module's own (a sidecar closes its provider when it stops)."""
    return LocalEmbedder(model_dir, variant=Settings().local_variant, threads=1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, embedder: EmbeddingProvider) -> Iterator[LiveSidecar]:
    """Each case in an agent of its own, every turn (user and reply) committed as the host commits it."""
    with live_sidecar(make_settings(tmp_path_factory.mktemp("question-first") / "state"), embedder) as live:
        for number, (fact, subject) in enumerate(CASES):
            messages = history(fact, subject)
            identity = {"sessionId": f"s{number}", "sessionKey": f"agent:case{number}:main"}
            for turn in range(0, len(messages), 2):
                body = identity | {"advancementKey": f"s{number}:{turn}", "messages": messages[turn : turn + 2]}
                assert live.post("commit-turn", body).json()["status"] == "committed"
        live.wait_for_backlog(timeout=300)
        yield live


@pytest.mark.parametrize(("number", "case"), list(enumerate(CASES)), ids=[f.marker for f, _ in CASES])
def test_a_direct_question_recalls_its_fact_after_a_long_stretch_on_another_subject(
    server: LiveSidecar, number: int, case: tuple[Fact, Subject]
) -> None:
    fact, subject = case
    messages = history(fact, subject)
    body = {
        "sessionId": f"s{number}",
        "sessionKey": f"agent:case{number}:main",
        "descriptors": descriptors(messages),
        "prompt": fact.question,
        "tokenBudget": TOKEN_BUDGET,
        "now": START_MS + len(messages) * TURN_MS,
        "trace": True,
    }
    search: dict[str, str | int] = {"q": fact.question, "scope": f"agent:case{number}", "k": 1}
    assert server.client.get("/v1/search", params=search).json()["hits"][0]["text"] == fact.said  # findable
    answer = server.post("assemble", body).json()
    assert answer["windowStart"] > 2, "the fact must be outside the window for recall to matter"
    block = answer["systemPromptAddition"]
    assert subject.things[0] in block or subject.things[1] in block, "the stretch outside the window competes"
    assert fact.said in block, _first(answer)


def _first(answer: dict[str, Any]) -> dict[str, Any] | None:
    """The trace of the agent's first message (the fact), if it was a candidate at all: for the failure message."""
    candidates = answer["trace"]["candidates"]
    return min(candidates, key=lambda c: c["message_id"], default=None)


def test_a_follow_up_that_names_nothing_takes_its_subject_from_the_recent_turns(server: LiveSidecar) -> None:
    """The other side of the same design: a prompt that says little itself ("and where was it again?") still
    finds what the conversation is about, because the prompt read with its context is searched too."""
    decided = "Decision made: the team offsite is at the Brienz lake lodge, two nights, twelve of us."
    kitchen = SUBJECTS["kitchen"]
    older = [long_message(kitchen, turn, reply=turn % 2 == 1) for turn in range(12)] + [decided, "Great, noted."]
    recent = [
        "Let's get back to planning the team offsite.",
        "Sure, what is left to plan for the offsite?",
        "The agenda for the offsite, and who gives the talks.",
        "I can draft an agenda for the offsite.",
        "Also the travel to the offsite for the whole team.",
        "Trains work best for a group that size.",
    ]
    sessions = {"f-old": conversation(older, START_MS), "f-now": conversation(recent, START_MS + 86_400_000)}
    for session, messages in sessions.items():
        for turn in range(0, len(messages), 2):
            body = {"sessionId": session, "sessionKey": "agent:followup:main", "advancementKey": f"{session}:{turn}"}
            assert server.post("commit-turn", body | {"messages": messages[turn : turn + 2]}).json()["status"] == (
                "committed"
            )
    server.wait_for_backlog(timeout=120)
    ask: dict[str, Any] = {
        "sessionId": "f-now",
        "sessionKey": "agent:followup:main",
        "descriptors": descriptors(sessions["f-now"]),
        "prompt": "And where was it going to be again?",
        "trace": True,
    }
    answer = server.post("assemble", ask).json()
    assert answer["windowStart"] == 0
    assert decided in answer["systemPromptAddition"]
