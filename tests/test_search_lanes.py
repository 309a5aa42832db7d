"""A search whose keyword lane ran out of time says so, everywhere a search is answered.

By design a lane past the turn's deadline gives nothing rather than hold the turn up (a new process's first
queries on a large store, a loaded server). ``assemble`` reports it as ``recallSkipped``; a search must too, or
an operator, a page or an agent reads "no hits" as "nothing matches". The late sidecar here has a deadline
already passed when its search starts (0 ms, below what the setting accepts, as the slowest machine gives), so
its keyword lane never answers, on either backend, while its vector lane (the query's embedding has its own
deadline) still does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from openclaw_lossless.cli.main import main
from openclaw_lossless.cli.mcp_server import MemorySearch, SearchResult, hit_view, render
from openclaw_lossless.embed.provider import Vectors
from openclaw_lossless.errors import EmbeddingUnavailable
from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings

WORD = "zephyr"
FACT = "zephyr deploy to staging moved to the blue cluster"


def fill(server: LiveSidecar) -> None:
    """Enough matches that even SQLite's keyword query runs long enough to look at its clock (every 2,000
    steps of its virtual machine)."""
    for turn in range(6):
        messages = [
            {"role": "user", "content": f"{FACT}, note {turn}-{i}", "timestamp": 1767225600000 + turn * 1000 + i}
            for i in range(50)
        ]
        body = {"sessionId": "s-late", "advancementKey": f"t{turn}", "messages": messages}
        assert server.post("commit-turn", body).json()["status"] == "committed"


@pytest.fixture
def late(tmp_path: Path, embedder: HashEmbedder) -> Iterator[LiveSidecar]:
    settings = make_settings(tmp_path / "state").model_copy(update={"assemble_deadline_ms": 0})
    with live_sidecar(settings, embedder) as server:
        fill(server)
        yield server


@pytest.fixture
def on_time(tmp_path: Path, embedder: HashEmbedder) -> Iterator[LiveSidecar]:
    with live_sidecar(make_settings(tmp_path / "state", assemble_deadline_ms=20000), embedder) as server:
        fill(server)
        yield server


def search(server: LiveSidecar, mode: str) -> dict[str, object]:
    response = server.client.get("/v1/search", params={"q": WORD, "mode": mode, "k": 5})
    assert response.status_code == 200, response.text
    answer: dict[str, object] = response.json()
    return answer


class Unreachable(HashEmbedder):
    """An embedding API that fails for the queries that start with "unreachable" (an outage mid-search)."""

    def embed(self, texts: list[str]) -> Vectors:
        if any(text.startswith("unreachable") for text in texts):
            raise EmbeddingUnavailable("the embedding API did not answer")
        return super().embed(texts)


def test_a_vector_lane_without_its_model_is_said_unless_no_model_is_configured(tmp_path: Path) -> None:
    with live_sidecar(make_settings(tmp_path / "a", assemble_deadline_ms=20000), Unreachable()) as server:
        fill(server)
        answer = server.client.get("/v1/search", params={"q": f"unreachable {WORD}", "k": 5}).json()
        assert (answer["lanesRan"], answer["skipped"]) == (["keyword"], "vector_unavailable") and answer["hits"]
    missing = make_settings(tmp_path / "b", assemble_deadline_ms=20000, model_dir=tmp_path / "no-model-here")
    with live_sidecar(missing, None) as server:  # configured, but its files were never fetched
        fill(server)
        answer = server.client.get("/v1/search", params={"q": WORD, "k": 5}).json()
        assert (answer["lanesRan"], answer["skipped"]) == (["keyword"], "vector_unavailable") and answer["hits"]
    none = make_settings(tmp_path / "c", assemble_deadline_ms=20000, embedding_provider="none")
    with live_sidecar(none, None) as server:
        fill(server)
        answer = server.client.get("/v1/search", params={"q": WORD, "k": 5}).json()
        assert (answer["lanesRan"], answer["skipped"]) == (["keyword"], None) and answer["hits"]


def test_a_search_in_time_names_both_lanes_and_skips_nothing(on_time: LiveSidecar) -> None:
    answer = search(on_time, "hybrid")
    assert answer["skipped"] is None and answer["lanesRan"] == ["keyword", "vector"]
    assert isinstance(answer["hits"], list) and len(answer["hits"]) == 5


def test_a_keyword_lane_out_of_time_is_said_not_passed_off_as_no_match(late: LiveSidecar) -> None:
    keyword = search(late, "keyword")
    assert (keyword["hits"], keyword["lanesRan"], keyword["skipped"]) == ([], [], "deadline")
    hybrid = search(late, "hybrid")
    assert (hybrid["lanesRan"], hybrid["skipped"]) == (["vector"], "keyword_deadline")
    hits = hybrid["hits"]
    assert isinstance(hits, list) and hits and all(hit["lanes"] == ["vector"] for hit in hits)


def test_the_cli_says_which_lane_gave_nothing(late: LiveSidecar, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--state-dir", str(late.settings.state_dir), "--port", str(late.settings.port)]
    assert main(["search", WORD, "--mode", "keyword", *args]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == "no matches" and "ran out of time" in err and "does not mean nothing matches" in err
    assert main(["search", WORD, "--json", *args]) == 0
    out, err = capsys.readouterr()
    answer = json.loads(out)
    assert answer["skipped"] == "keyword_deadline" and answer["hits"]
    assert "vector lane's alone" in err


def test_the_cli_adds_no_note_when_every_lane_answered(
    on_time: LiveSidecar, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--state-dir", str(on_time.settings.state_dir), "--port", str(on_time.settings.port)]
    assert main(["search", WORD, "--json", *args]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["hits"] and "note" not in err


def test_the_search_page_says_it_too(late: LiveSidecar) -> None:
    with httpx.Client(base_url=late.url, timeout=30) as browser:
        login = browser.post("/ui/login", data={"token": late.token}, headers={"Origin": late.url})
        assert login.status_code in (200, 303), login.text
        page = browser.get("/ui/search", params={"q": WORD, "mode": "keyword"})
    assert page.status_code == 200
    assert 'id="lanes-missed"' in page.text and "does not mean nothing matches" in page.text


def test_the_agents_tool_does_not_tell_an_agent_nothing_is_stored(late: LiveSidecar) -> None:
    source, hits, note = MemorySearch(late.settings).search(WORD, "all", 5, "keyword")
    assert (source, hits) == ("sidecar", []) and note is not None
    text = render(SearchResult(query=WORD, scope="all", mode="keyword", source=source, hits=[], note=note))
    assert "Nothing stored matches" not in text and "does not mean nothing matches" in text
    source, hits, note = MemorySearch(late.settings).search(WORD, "all", 5, "hybrid")
    shown = render(
        SearchResult(query=WORD, scope="all", mode="hybrid", source=source, hits=[hit_view(h) for h in hits], note=note)
    )
    assert hits and "vector lane's alone" in shown
