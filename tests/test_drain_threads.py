"""The backlog drain uses the idle cores with the local model, and gives them back the moment a turn arrives.

What a user would notice if this went wrong: a different vector for a message depending on which thread
embedded it (recall would change with the machine's load), a turn slowed by a whole batch of background
embedding, or a failure in one thread leaving half a batch stored. The real local model embeds here; the
only addition is a spy that notes which thread ran each call.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.embed.local import LocalEmbedder
from openclaw_lossless.embed.provider import ProviderIdentity, Vectors
from openclaw_lossless.errors import EmbeddingUnavailable
from openclaw_lossless.sidecar import Sidecar
from tests.helpers import make_settings

TOPICS = ("the staging deploy", "my sister's wedding", "the garden beds", "a flaky test", "the tax return")


class Spy:
    """The real local model, noting the thread of every call; fails on a chosen text when asked to."""

    def __init__(self, model: LocalEmbedder, fail_on: str | None = None) -> None:
        self.model = model
        self.fail_on = fail_on
        self.threads: list[str] = []
        self._lock = threading.Lock()

    @property
    def identity(self) -> ProviderIdentity:
        return self.model.identity

    def embed(self, texts: list[str]) -> Vectors:
        with self._lock:
            self.threads.append(threading.current_thread().name)
        if self.fail_on is not None and self.fail_on in texts:
            raise EmbeddingUnavailable("the model failed on this text")
        return self.model.embed(texts)

    def close(self) -> None:
        pass


def _messages(count: int) -> list[dict[str, Any]]:
    return [
        {
            "role": "user" if n % 2 == 0 else "assistant",
            "content": [{"type": "text", "text": f"Note {n} about {TOPICS[n % len(TOPICS)]}: " + "detail " * (n % 9)}],
            "timestamp": 1_763_000_000_000 + n,
        }
        for n in range(count)
    ]


@pytest.fixture
def open_sidecar(tmp_path: Path) -> Iterator[Any]:
    opened: list[Sidecar] = []

    def open_one(name: str, provider: Spy, threads: int) -> Sidecar:
        settings = make_settings(tmp_path / name, embedding_provider="local", drain_threads=threads)
        sidecar = Sidecar(settings, provider=provider, start_worker=False)
        opened.append(sidecar)
        recall = sidecar.settings.recall
        sidecar.ingest.commit_turn("t-1", "s-1", "agent:main:main", _messages(40), heartbeat=False, recall=recall)
        return sidecar

    yield open_one
    for sidecar in opened:
        sidecar.close()


def _codes(sidecar: Sidecar) -> dict[int, bytes]:
    """Each stored vector as the store holds it (its int8 codes and scale), read through the store's backend."""
    provider = sidecar.embedding.provider
    assert provider is not None
    dimension = provider.identity.dimension
    codes: dict[int, bytes] = {}
    for block in sidecar.ops.vectors.read_all(sidecar.db.reader(), dimension):
        for i, message_id in enumerate(block.ids):
            codes[int(message_id)] = block.codes[i].tobytes() + block.scales[i].tobytes()
    return codes


def _drain(sidecar: Sidecar) -> None:
    assert sidecar.worker is not None
    while sidecar.worker.drain_once():
        pass


def test_two_drain_threads_store_the_same_vectors_as_one(open_sidecar: Any, local_embedder: LocalEmbedder) -> None:
    shared, alone = Spy(local_embedder), Spy(local_embedder)
    two, one = open_sidecar("two", shared, 2), open_sidecar("one", alone, 1)

    _drain(two)
    _drain(one)

    assert len(_codes(two)) == 40
    assert _codes(two) == _codes(one)  # bit for bit: which thread embedded a message changes nothing
    assert any(name.startswith("lossless-embed-extra") for name in shared.threads)
    assert not any(name.startswith("lossless-embed-extra") for name in alone.threads)


def test_the_extra_thread_takes_no_work_while_a_request_runs(open_sidecar: Any, local_embedder: LocalEmbedder) -> None:
    spy = Spy(local_embedder)
    sidecar = open_sidecar("busy", spy, 2)

    with sidecar.in_flight.busy():  # a turn is running for the whole drain
        _drain(sidecar)

    assert len(_codes(sidecar)) == 40
    assert spy.threads and all(name == threading.current_thread().name for name in spy.threads)


def test_a_failure_in_either_thread_keeps_the_whole_batch_queued(
    open_sidecar: Any, local_embedder: LocalEmbedder
) -> None:
    failing = _messages(40)[27]["content"][0]["text"]
    spy = Spy(local_embedder, fail_on=failing)
    sidecar = open_sidecar("fails", spy, 2)
    assert sidecar.worker is not None

    with pytest.raises(EmbeddingUnavailable):
        sidecar.worker.drain_once()

    assert _codes(sidecar) == {}
    assert sidecar.ops.backlog.size(sidecar.db.reader()) == 40
    spy.fail_on = None
    _drain(sidecar)
    assert len(_codes(sidecar)) == 40
