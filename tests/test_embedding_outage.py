"""An embedding API outage costs vectors for a while, never messages, and never blocks a commit.

The API is faked at the network edge with respx; the sidecar itself is reached over real HTTP (passed through).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from openclaw_lossless.embed.openai_compat import OpenAIEmbedder
from tests.conversation import QUESTION, commit_body, conversation
from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings

API = "http://127.0.0.1:9/v1"


class FakeEmbeddingApi:
    """An OpenAI-compatible /embeddings endpoint that can be switched down (500s and refused connections)."""

    def __init__(self) -> None:
        self.vectors = HashEmbedder(dimension=64)
        self.down = False
        self.calls = 0
        self.failures = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.down:
            self.failures += 1
            if self.failures % 2:
                raise httpx.ConnectError("connection refused", request=request)
            return httpx.Response(500, json={"error": {"message": "upstream exploded"}})
        inputs = json.loads(request.content)["input"]
        data = [{"index": i, "embedding": v.tolist()} for i, v in enumerate(self.vectors.embed(inputs))]
        return httpx.Response(200, json={"data": data[::-1], "model": "text-embedding-3-small"})


@pytest.fixture
def api() -> FakeEmbeddingApi:
    return FakeEmbeddingApi()


@pytest.fixture
def server(tmp_path: Path, api: FakeEmbeddingApi) -> Iterator[LiveSidecar]:
    settings = make_settings(tmp_path / "state", embedding_provider="openai-compatible", query_embed_deadline_ms=300)
    provider = OpenAIEmbedder(
        base_url=API,
        api_key="sk-test-not-real-000000000000",
        dimensions=64,
        max_retries=1,
        backoff_base_s=0.01,
        backoff_max_s=0.05,
        timeout_s=1.0,
    )
    with respx.mock(assert_all_called=False) as mock:
        mock.route(host="127.0.0.1", port=settings.port).pass_through()
        mock.post(f"{API}/embeddings").mock(side_effect=api)
        with live_sidecar(settings, provider) as live:
            yield live


def stats(server: LiveSidecar) -> dict[str, Any]:
    result: dict[str, Any] = server.client.get("/stats").json()
    return result


def test_outage_keeps_commits_and_keyword_recall_then_the_backlog_drains(
    server: LiveSidecar, api: FakeEmbeddingApi
) -> None:
    api.down = True
    turns = conversation(12)
    for turn in turns:
        assert server.post("commit-turn", commit_body(turn)).json()["status"] == "committed"
    deadline = time.monotonic() + 20
    while stats(server)["embedder"]["worker"]["failures"] == 0:
        assert time.monotonic() < deadline, "the worker never tried the API"
        time.sleep(0.05)
    during = stats(server)
    assert during["messages"] == 24 and during["backlog"] == 24
    assert during["embedder"]["worker"]["lastError"]

    body = {"sessionId": "s-new", "sessionKey": "agent:main:main", "messages": [], "prompt": QUESTION}
    recalled = server.post("assemble", body).json()
    assert "rotates every Tuesday" in recalled["systemPromptAddition"]
    assert sum(stats(server)["embedder"]["fallbacks"].values()) >= 1

    api.down = False
    server.wait_for_backlog(timeout=90)
    after = stats(server)
    assert after["vectors"] == 24 and after["messages"] == 24
    assert "sk-test-not-real" not in json.dumps(after)


class SizedEmbeddingApi:
    """An OpenAI-compatible /embeddings endpoint that answers in the size the request asks for (``dimensions``),
    as text-embedding-3 models do, and records every text it embedded."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.texts += body["input"]
        vectors = HashEmbedder(dimension=body.get("dimensions", 64)).embed(body["input"])
        data = [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
        return httpx.Response(200, json={"data": data, "model": body["model"]})


def _run_with_dimensions(
    state: Path, api: SizedEmbeddingApi, dimensions: int, turns: int = 0
) -> tuple[dict[str, Any], list[str]]:
    """Start the sidecar on the same store with EMBEDDING_DIMENSIONS=``dimensions``, commit and drain.

    Returns its /stats and the texts the API embedded for the backlog (the search's own query left out)."""
    api.texts.clear()
    settings = make_settings(state, embedding_provider="openai-compatible")
    provider = OpenAIEmbedder(base_url=API, api_key="sk-test-not-real-000000000000", dimensions=dimensions)
    with respx.mock(assert_all_called=False) as mock:
        mock.route(host="127.0.0.1", port=settings.port).pass_through()
        mock.post(f"{API}/embeddings").mock(side_effect=api)
        with live_sidecar(settings, provider) as live:
            for turn in conversation(turns):
                live.post("commit-turn", commit_body(turn))
            live.wait_for_backlog(timeout=20)
            embedded = list(api.texts)
            hits = live.client.get("/v1/search", params={"q": QUESTION, "mode": "vector"}).json()["hits"]
            assert hits, "recall has no vectors to search"
            return stats(live), embedded


def test_changing_only_the_dimension_rebuilds_the_vectors_and_reuses_none_of_the_old_size(tmp_path: Path) -> None:
    """The cache once handed 64-d vectors to a 32-d index: every batch failed, the backlog never drained."""
    api = SizedEmbeddingApi()
    first, embedded = _run_with_dimensions(tmp_path / "state", api, 64, turns=5)
    assert (first["vectors"], first["embedder"]["dimension"], len(embedded)) == (10, 64, 10)

    resized, embedded = _run_with_dimensions(tmp_path / "state", api, 32)
    assert resized["embedder"]["rebuilding"] and resized["embedder"]["dimension"] == 32
    assert resized["vectors"] == 10 and resized["embedder"]["worker"]["failures"] == 0
    assert len(embedded) == 10  # every message embedded again, at the new size

    back, embedded = _run_with_dimensions(tmp_path / "state", api, 64)
    assert back["vectors"] == 10 and back["embedder"]["dimension"] == 64
    assert embedded == []  # the 64-d vectors stayed cached under their own size: nothing is paid for twice
