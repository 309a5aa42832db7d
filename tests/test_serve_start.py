"""What ``serve`` does between opening the store and answering its first request."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless import listeners
from openclaw_lossless.cli.main import main
from tests.helpers import schema_of


def test_serve_puts_what_start_up_made_out_of_the_collectors_reach_before_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full collection walks every tracked object: start-up's (modules, the app, the store, the model) are
    alive for the process's life, and walking them paused a turn by tens of milliseconds each time."""
    frozen_when_serving: list[int] = []

    def serve(self: listeners.Server, sockets: Any = None) -> None:
        frozen_when_serving.append(gc.get_freeze_count())

    monkeypatch.setattr(listeners.Server, "run", serve)
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(tmp_path / "openclaw"))
    state = tmp_path / "state"
    try:
        with schema_of(state):
            assert main(["serve", "--state-dir", str(state), "--port", "0"]) == 0
    finally:
        gc.unfreeze()
    assert len(frozen_when_serving) == 1
    assert frozen_when_serving[0] > 10_000  # the app's and the store's objects, not a handful
