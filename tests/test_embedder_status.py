"""Operators can see which embedder is in use and every fallback taken, in /healthz and /stats."""

from __future__ import annotations

from pathlib import Path

from tests.conversation import QUESTION, commit_body, conversation
from tests.helpers import live_sidecar, make_settings


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
