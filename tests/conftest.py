"""Shared fixtures: a live sidecar over real HTTP with a real SQLite store in a temp dir, and the real model."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from openclaw_lossless.config import Settings
from openclaw_lossless.embed.local import LocalEmbedder
from openclaw_lossless.embed.model_files import fetch_model
from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def sidecar(tmp_path: Path, embedder: HashEmbedder) -> Iterator[LiveSidecar]:
    with live_sidecar(make_settings(tmp_path / "state"), embedder) as server:
        yield server


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The local model as the install command leaves it (fetched here if missing; idempotent)."""
    directory = Settings().model_dir
    fetch_model(directory)
    return directory


@pytest.fixture(scope="session")
def local_embedder(model_dir: Path) -> Iterator[LocalEmbedder]:
    """The real all-MiniLM-L6-v2 on onnxruntime: what users run by default."""
    embedder = LocalEmbedder(model_dir, variant=Settings().local_variant, threads=1)
    yield embedder
    embedder.close()
