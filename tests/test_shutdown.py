"""What closing a sidecar waits for, and what it leaves to the process's exit.

A server is stopped at any moment (a supervisor's restart, a deploy): closing the store under a thread that
still reads or writes it crashed the process, or lost that thread's work. Each thread is stopped first; one
that does not stop in time keeps the store open and finishes what it was doing.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from openclaw_lossless.embed import worker as embedding_worker
from openclaw_lossless.embed.provider import Vectors
from openclaw_lossless.sidecar import Sidecar
from tests.helpers import HashEmbedder, make_settings


class HeldEmbedder(HashEmbedder):
    """An embedder whose first batch waits until released: an embedding API answering slowly at shutdown."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.closed = False

    def embed(self, texts: list[str]) -> Vectors:
        self.entered.set()
        assert self.release.wait(30)
        return super().embed(texts)

    def close(self) -> None:
        self.closed = True


def _threads(name: str) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == name]


def test_a_batch_still_embedding_at_close_is_stored_once_it_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(embedding_worker, "STOP_WAIT_S", 0.2)
    settings = make_settings(tmp_path / "state")
    provider = HeldEmbedder()
    before = set(_threads("lossless-embed"))
    sidecar = Sidecar(settings, provider=provider)
    try:
        sidecar.ingest.commit_turn(
            "t1", "s1", "agent:main:s1", [{"role": "user", "content": "the hangar lease ends in March"}],
            heartbeat=False, recall=settings.recall,
        )  # fmt: skip
        assert provider.entered.wait(30)
        sidecar.close()  # the batch is still with the embedder
        assert "embedding still running at close" in caplog.text
        assert not provider.closed  # the batch still needs it
        provider.release.set()
        for thread in set(_threads("lossless-embed")) - before:
            thread.join(30)
            assert not thread.is_alive()
    finally:
        provider.release.set()
        sidecar.db.close()
    reopened = Sidecar(settings, start_worker=False, provider=HashEmbedder())
    try:
        stats = reopened.status.stats()
        assert (stats.messages, stats.vectors, stats.backlog) == (1, 1, 0)  # the batch's vector, stored
    finally:
        reopened.close()
