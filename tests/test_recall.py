"""Recall across compaction: a fact from turn 5 of 200 comes back when the host's window no longer holds it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from openclaw_lossless.embed.provider import EmbeddingProvider
from tests.conversation import FACT_TURN, QUESTION, Turn, commit_body, conversation, history
from tests.helpers import LiveSidecar, live_sidecar, make_settings

FACT_WORDS = "rotates every Tuesday"


@pytest.fixture(scope="module")
def turns() -> list[Turn]:
    return conversation(200)


@pytest.fixture(scope="module")
def loaded(
    tmp_path_factory: pytest.TempPathFactory, local_embedder: EmbeddingProvider, turns: list[Turn]
) -> Iterator[LiveSidecar]:
    """A sidecar on the real local model with the 200-turn conversation committed over HTTP."""
    with live_sidecar(make_settings(tmp_path_factory.mktemp("recall") / "state"), local_embedder) as server:
        for turn in turns:
            assert server.post("commit-turn", commit_body(turn)).json()["status"] == "committed"
        server.wait_for_backlog()
        yield server


def assemble(server: LiveSidecar, messages: list[dict[str, object]], **extra: object) -> dict[str, object]:
    body = {"sessionId": "s-main", "sessionKey": "agent:main:main", "messages": messages, "prompt": QUESTION}
    response = server.post("assemble", body | extra)
    assert response.status_code == 200, response.text
    result: dict[str, object] = response.json()
    return result


def test_fact_from_turn_five_is_recalled_after_compaction(loaded: LiveSidecar, turns: list[Turn]) -> None:
    compacted = [
        {
            "role": "compactionSummary",
            "summary": "Earlier turns discussed many projects.",
            "tokensBefore": 9000,
            "timestamp": turns[-11].messages[0]["timestamp"],
        }
    ]
    result = assemble(loaded, compacted + history(turns[-10:]), tokenBudget=8000)
    addition = str(result["systemPromptAddition"])
    assert FACT_WORDS in addition
    assert addition.startswith("## Recalled Context")
    assert not any(FACT_WORDS in str(m) for m in history(turns[-10:]))


def test_fact_in_the_window_is_not_recalled_again(loaded: LiveSidecar, turns: list[Turn]) -> None:
    everything = history(turns)
    result = assemble(loaded, everything, tokenBudget=200_000)
    assert result["windowStart"] == 0
    assert FACT_WORDS not in str(result["systemPromptAddition"])
    assert len(result["messages"]) == len(everything)  # type: ignore[arg-type]


def test_fact_is_recalled_from_another_session_of_the_agent(loaded: LiveSidecar) -> None:
    body = {"sessionId": "s-after-new", "sessionKey": "agent:main:main", "messages": [], "prompt": QUESTION}
    assert FACT_WORDS in loaded.post("assemble", body).json()["systemPromptAddition"]


def test_other_agents_do_not_see_it(loaded: LiveSidecar) -> None:
    body = {"sessionId": "s-other", "sessionKey": "agent:ops:main", "messages": [], "prompt": QUESTION}
    assert FACT_WORDS not in loaded.post("assemble", body).json()["systemPromptAddition"]


def test_recalled_lines_are_cited_dated_and_fit_the_budget(loaded: LiveSidecar, turns: list[Turn]) -> None:
    result = assemble(loaded, history(turns[-10:]), tokenBudget=4000, trace=True)
    addition = str(result["systemPromptAddition"])
    lines = [line for line in addition.splitlines() if line.startswith("[")]
    assert lines and all(re.match(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC \| \w+\]: .* \[msg:\d+\]$", x) for x in lines)
    hits = [item for item in result["recalled"] if "neighbourOf" not in item]  # type: ignore[attr-defined]
    assert 0 < len(hits) <= 20
    hit_citations = {item["citation"] for item in hits}
    assert all(item["neighbourOf"] in hit_citations for item in result["recalled"] if item not in hits)  # type: ignore[attr-defined]
    assert len(lines) == len(result["recalled"])  # type: ignore[arg-type]
    assert int(result["estimatedTokens"]) <= 4000  # type: ignore[call-overload]
    stamps = [line[1:17] for line in lines]
    assert stamps == sorted(stamps)
    decisions = {c["decision"] for c in result["trace"]["candidates"]}  # type: ignore[index]
    assert "kept" in decisions
    phases = result["trace"]["phasesMs"]  # type: ignore[index]
    assert list(phases) == ["setup", "lanes", "choose", "neighbours", "render"]
    assert all(ms >= 0 for ms in phases.values()) and phases["lanes"] > 0


def test_window_share_and_retrieval_count_are_honoured(loaded: LiveSidecar, turns: list[Turn]) -> None:
    from openclaw_lossless.capture.text import descriptor_tokens

    result = assemble(loaded, history(turns), tokenBudget=2000, config={"retrievalCount": 3, "windowShare": 0.5})
    kept = result["messages"]
    assert isinstance(kept, list) and 0 < len(kept) < len(history(turns))
    assert sum(descriptor_tokens(m) for m in kept) <= 1000
    assert kept[0]["role"] != "toolResult"
    recalled = result["recalled"]
    assert isinstance(recalled, list)
    assert 0 < len([item for item in recalled if "neighbourOf" not in item]) <= 3


def test_turn_five_is_found_by_search(loaded: LiveSidecar) -> None:
    hits = loaded.client.get("/v1/search", params={"q": "staging password rotation", "k": 3}).json()["hits"]
    assert any(FACT_WORDS in hit["text"] for hit in hits)
    assert all(hit["citation"].startswith("msg:") for hit in hits)


def test_assemble_takes_descriptors_and_answers_the_window_start(loaded: LiveSidecar, turns: list[Turn]) -> None:
    from openclaw_lossless.capture.text import descriptor_text, descriptor_tokens, window_key

    recent = history(turns[-10:])
    descriptors = [
        {
            "role": m["role"],
            "key": window_key(m),
            "tokens": descriptor_tokens(m),
            "timestamp": m["timestamp"],
            "text": descriptor_text(m) if m["role"] == "user" else None,
        }
        for m in recent
    ]
    body = {"sessionId": "s-main", "sessionKey": "agent:main:main", "descriptors": descriptors, "prompt": QUESTION}
    result = loaded.post("assemble", body).json()
    assert result["windowStart"] == 0 and "messages" not in result
    assert FACT_WORDS in result["systemPromptAddition"]
    assert FACT_TURN == 5


def test_recall_scope_session_keeps_to_the_session(tmp_path: Path, local_embedder: EmbeddingProvider) -> None:
    with live_sidecar(make_settings(tmp_path / "state"), local_embedder) as server:
        for turn in conversation(8, session="s-old"):
            server.post("commit-turn", commit_body(turn, session="s-old"))
        server.wait_for_backlog()
        body = {"sessionId": "s-new", "sessionKey": "agent:main:main", "messages": [], "prompt": QUESTION}
        assert FACT_WORDS in server.post("assemble", body).json()["systemPromptAddition"]
        scoped = body | {"config": {"recallScope": "session"}}
        assert FACT_WORDS not in server.post("assemble", scoped).json()["systemPromptAddition"]
