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
