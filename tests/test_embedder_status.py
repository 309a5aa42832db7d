"""Operators can see which embedder is in use and every fallback taken, in /healthz and /stats."""

from __future__ import annotations

import threading
from pathlib import Path

from openclaw_lossless.embed.provider import Vectors
from openclaw_lossless.embed.service import EmbeddingService
from tests.conversation import QUESTION, commit_body, conversation
from tests.helpers import HashEmbedder, live_sidecar, make_settings


def test_the_default_local_model_is_reported_ready(tmp_path: Path, model_dir: Path) -> None:
    settings = make_settings(tmp_path / "state", model_dir=model_dir)
    with live_sidecar(settings, None) as server:
        health = server.client.get("/healthz").json()
        assert health["status"] == "ok"
        embedder = health["embedder"]
        assert (embedder["configured"], embedder["active"], embedder["model"]) == ("local", "local", "all-MiniLM-L6-v2")
        assert embedder["variant"] == settings.local_variant and embedder["dimension"] == 384
        for turn in conversation(3):
            server.post("commit-turn", commit_body(turn))
        server.wait_for_backlog()
        assert server.client.get("/stats").json()["vectors"] == 6


def test_a_missing_model_falls_back_to_keyword_recall_and_says_how_to_fix_it(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state", model_dir=tmp_path / "no-model-here")
    with live_sidecar(settings, None) as server:
        health = server.client.get("/healthz").json()
        assert health["status"] == "degraded" and health["database"]["writable"]
        assert not health["embedder"]["ready"] and "model fetch" in health["embedder"]["reason"]
        for turn in conversation(6):
            assert server.post("commit-turn", commit_body(turn)).json()["status"] == "committed"
        body = {"sessionId": "s-new", "sessionKey": "agent:main:main", "messages": [], "prompt": QUESTION}
        assert "rotates every Tuesday" in server.post("assemble", body).json()["systemPromptAddition"]
        fallbacks = server.client.get("/stats").json()["embedder"]["fallbacks"]
        assert fallbacks["provider_unavailable"] == 1 and fallbacks["no_provider"] >= 1


class SlowEmbedder(HashEmbedder):
    """Takes longer than any query deadline, and counts what it was asked to embed."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self.release = release

    def embed(self, texts: list[str]) -> Vectors:
        self.release.wait(10)
        return super().embed(texts)


def test_queries_past_their_deadline_are_withdrawn_not_queued(tmp_path: Path) -> None:
    """Under load every query used to stay queued after its deadline: memory grew without bound and every
    later query missed its deadline too. Now the queue holds only what can still be used."""
    release = threading.Event()
    slow = SlowEmbedder(release)
    service = EmbeddingService(make_settings(tmp_path / "state", query_embed_deadline_ms=1), slow)
    try:
        assert all(service.embed_query(f"question {n}") is None for n in range(100))
        release.set()
        service._pool.shutdown(wait=True)  # run whatever is still queued (close() would cancel it)
        assert len(slow.texts) <= 4, f"{len(slow.texts)} abandoned queries were embedded anyway"
        assert service.status.fallbacks["query_deadline"] == 100
    finally:
        release.set()
        service.close()
