"""Shared fixtures: a live sidecar over real HTTP with a real SQLite store in a temp dir."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def sidecar(tmp_path: Path, embedder: HashEmbedder) -> Iterator[LiveSidecar]:
    with live_sidecar(make_settings(tmp_path / "state"), embedder) as server:
        yield server
