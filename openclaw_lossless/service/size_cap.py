"""Keeping the store under ``maxDbSizeMb``: the oldest messages move to a JSONL archive, never lost.

Why a thread of its own and a rate limit: archiving can take seconds, and a write only asks for a check
(``check_soon``), at most every ``CHECK_EVERY_S``; the turn that asks never waits for it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from openclaw_lossless.config import Settings
from openclaw_lossless.embed.index import Nearest
from openclaw_lossless.errors import LosslessError
from openclaw_lossless.observe.metrics import Metrics
from openclaw_lossless.store.api import TermStats
from openclaw_lossless.store.backend import Store
from openclaw_lossless.store.model.archive import Pruned

log = logging.getLogger(__name__)

CHECK_EVERY_S = 30.0
CLOSE_WAIT_S = 10.0  # close waits this long at most for a size check (archiving) under way


@dataclass(frozen=True)
class Archiving:
    """The last archiving since the start, for ``/stats``: what ``archive.prune`` did, and when (epoch seconds)."""

    pruned: int
    archives: list[str]
    last_message_id: int | None
    at: float


class SizeCap:
    """Archives the oldest messages when the store grows past the cap; ``last`` is what it did last."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        metrics: Metrics,
        index: Nearest | None,
        terms: TermStats[Any] | None,
    ) -> None:
        self.db, self.ops = store.db, store.ops
        self.archive_dir = settings.archive_dir
        self.max_db_size_mb = settings.max_db_size_mb
        self.metrics = metrics
        self.index = index
        self.terms = terms
        self.last: Archiving | None = None
        self._last_check = 0.0
        self._lock = threading.Lock()
        self._closing = threading.Event()

    def check_soon(self) -> None:
        """After a write: start a check in the background, unless one started within ``CHECK_EVERY_S``."""
        if time.monotonic() - self._last_check >= CHECK_EVERY_S:
            self._last_check = time.monotonic()  # archiving can take a while: never on the turn's path
            threading.Thread(target=self.check, args=(True,), name="lossless-prune", daemon=True).start()

    def check(self, force: bool = False) -> None:
        """Archive what is over the cap; at most every ``CHECK_EVERY_S`` unless forced, one at a time."""
        now = time.monotonic()
        if not force and now - self._last_check < CHECK_EVERY_S:
            return
        if not self._lock.acquire(blocking=False):
            return
        try:
            self._last_check = now
            self._archive()
        except LosslessError as exc:
            log.warning("archiving to stay under maxDbSizeMb failed: %s", exc.message)
        except Exception:
            if not self._closing.is_set():
                raise
            # closed under it: the archive is written before anything is removed, so nothing is lost; the
            # next start archives again
            log.info("archiving stopped: the sidecar is closing")
        finally:
            self._lock.release()

    def _archive(self) -> None:
        """Archive, then forget the archived messages' vectors and the keyword statistics they counted in."""
        result = self.ops.archive.prune(self.db, self.archive_dir, self.max_db_size_mb)
        if not isinstance(result, Pruned) or not result.pruned or result.last_message_id is None:
            return
        self.last = Archiving(result.pruned, result.archives, result.last_message_id, time.time())
        self.metrics.counters["messages_archived"] += result.pruned
        if self.index is not None:
            self.index.forget_through(result.last_message_id)
        if self.terms is not None:
            self.terms.clear()

    def close(self) -> bool:
        """A check under way finishes first (bounded): its thread must not reopen the closed store; whether
        none is under way now."""
        self._closing.set()
        if self._lock.acquire(timeout=CLOSE_WAIT_S):
            self._lock.release()
            return True
        return False
