"""What the history import writes through: the sidecar's ingest side, as little of it as the import needs.

Why a protocol and not the class: the ingest side runs the import (``bootstrap`` imports an unseen session,
catch-up imports what the host never delivered), so naming its class here would make the two packages
import each other. ``service.ingest.Ingest`` is the one implementation; the import captures, redacts and
selects sessions exactly as the hooks do because it uses the same parts.
"""

from __future__ import annotations

from typing import Protocol

from openclaw_lossless.capture.records import CaptureOptions
from openclaw_lossless.selection import SessionSelection
from openclaw_lossless.store.backend import Store


class Sink(Protocol):
    """The store to write into, how to capture and which sessions to take, and what follows a write."""

    @property
    def store(self) -> Store: ...

    @property
    def selection(self) -> SessionSelection: ...

    @property
    def capture_options(self) -> CaptureOptions: ...

    def after_write(self, stored: int) -> None:
        """Messages were stored: wake the embedding worker and, now and then, check the size cap."""

    def wake_worker(self) -> None:
        """Messages were stored: wake the embedding worker (and nothing else)."""
