"""The backlog worker: embeds committed messages in the background, and survives provider outages.

Commits only queue message ids in ``embedding_backlog``; this thread drains it in batches. When the
provider is down the batch stays queued, the failure is counted, and the worker backs off (up to a minute)
before trying again, so an outage costs vectors for a while, never messages. A provider that asks to be left
alone for a while (an API's 429 with ``Retry-After``) is left alone exactly that long. Every wait is on the
stop event, so stopping the sidecar never waits for it. For paid API providers the
worker consults ``embedding_cache`` first, so a rebuild never pays twice for the same text. The cache is
keyed by the provider's whole identity (provider, model, variant, dimension): a vector is reused only by
the configuration that made it, so changing ``EMBEDDING_DIMENSIONS`` alone re-embeds instead of reusing
vectors of the old shape.

With the local model, a batch is shared with ``drain_threads - 1`` extra threads while no request is running
(``in_flight.py``): each takes ``SHARED_PIECE`` messages at a time and stops taking as soon as a turn
arrives, so the drain uses the machine's idle cores and a turn competes with at most one piece.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from openclaw_lossless.embed.in_flight import InFlight
from openclaw_lossless.embed.index import Nearest, store_vectors
from openclaw_lossless.embed.provider import EmbeddingProvider, EmbeddingRateLimited, ProviderIdentity, Vectors
from openclaw_lossless.errors import EmbeddingUnavailable, LosslessError
from openclaw_lossless.store.api import ModelKey
from openclaw_lossless.store.backend import Backend, Store

log = logging.getLogger(__name__)


class BacklogSampler(Protocol):
    """Where the backlog's size goes once a minute (``observe/last_hour.py``'s ``BacklogWindow``): named here
    so the worker, below the operator's instruments, needs no import of them."""

    def due(self) -> bool: ...

    def sample(self, size: int, embedded: int | None) -> None: ...


MAX_BACKOFF_S = 60.0
WINDOW_BATCHES = 8  # batches of the backlog read at once and regrouped by length: see _next_batch
STOP_WAIT_S = 10.0  # stop() waits this long at most for a batch under way (an embedding API's request)
SHARED_PIECE = 2  # messages an extra drain thread embeds between its checks that no request is running


@dataclass
class WorkerStats:
    embedded: int = 0
    batches: int = 0
    failures: int = 0
    last_error: str | None = None
    last_error_at: float | None = None
    backoff_s: float = 0.0
    rates: list[tuple[float, int]] = field(default_factory=list)

    def drain_rate(self) -> float:
        """Messages per second over the last minute of work."""
        cutoff = time.monotonic() - 60
        recent = [(t, n) for t, n in self.rates if t >= cutoff]
        self.rates = recent
        if len(recent) < 2:
            return 0.0
        span = recent[-1][0] - recent[0][0]
        return sum(n for _, n in recent[1:]) / span if span > 0 else 0.0


class EmbeddingWorker:
    def __init__(
        self,
        store: Store,
        provider: EmbeddingProvider,
        index: Nearest,
        *,
        batch_size: int = 32,
        in_flight: InFlight | None = None,
        drain_threads: int = 1,
        backlog_history: BacklogSampler | None = None,
    ) -> None:
        self.db = store.db
        self.ops = store.ops
        self.provider = provider
        self.index = index
        self.batch_size = batch_size
        self.in_flight = in_flight or InFlight()
        self.backlog_history = backlog_history  # the status page's last hour: sampled here once a minute
        # Extra threads only for the local model, the only provider whose work is this machine's cores.
        extra = min(drain_threads, os.cpu_count() or 1) - 1 if provider.identity.provider == "local" else 0
        self._extra = extra
        self._helpers = ThreadPoolExecutor(extra, thread_name_prefix="lossless-embed-extra") if extra > 0 else None
        self.stats = WorkerStats()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lossless-embed", daemon=True)
        self._use_cache = provider.identity.provider != "local"
        self._pending: list[list[tuple[int, str, str, int]]] = []
        self._pending_lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def notify(self) -> None:
        """Wake the worker: new messages are on the backlog."""
        self._wake.set()

    def stop(self) -> bool:
        """Stop the thread, waiting up to ``STOP_WAIT_S`` for a batch under way; whether it has ended."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(STOP_WAIT_S)
        if self._helpers is not None:
            self._helpers.shutdown(wait=False, cancel_futures=True)
        return not self._thread.is_alive()

    def _run(self) -> None:
        delay = 0.0
        while not self._stop.is_set():
            if delay:
                self._stop.wait(delay)
            try:
                self._sample_backlog()
                worked = self.drain_once()
                delay = 0.0
                self.stats.backoff_s = 0.0
            except EmbeddingUnavailable as exc:
                delay = _next_delay(delay, exc)
                self._record_failure(exc.message, delay)
                continue
            except LosslessError as exc:  # e.g. disk full while storing vectors: keep the backlog, retry later
                delay = min(MAX_BACKOFF_S, max(1.0, delay * 2))
                self._record_failure(exc.message, delay)
                continue
            except Exception as exc:  # the thread's edge: a bug must not silently stop all embedding
                log.exception("embedding worker error")
                delay = min(MAX_BACKOFF_S, max(1.0, delay * 2))
                self._record_failure(f"{type(exc).__name__}: see the sidecar log", delay)
                continue
            if not worked:
                self._wake.wait(1.0)
                self._wake.clear()

    def _sample_backlog(self) -> None:
        """The backlog's size for the status page's last hour, once a minute: one count, on this thread."""
        if self.backlog_history is not None and self.backlog_history.due():
            self.backlog_history.sample(self.ops.backlog.size(self.db.reader()), self.stats.embedded)

    def _record_failure(self, message: str, delay: float) -> None:
        self.stats.failures += 1
        self.stats.last_error = message
        self.stats.last_error_at = time.time()
        self.stats.backoff_s = delay
        log.warning("embedding backlog paused %.0fs: %s", delay, message)

    def drain_once(self) -> int:
        """Embed one batch of the backlog; returns how many messages it embedded (0 when empty)."""
        rows = self._next_batch()
        if not rows:
            return 0
        ids = [int(r[0]) for r in rows]
        texts = [str(r[1]) for r in rows]
        vectors = self._embed(texts)
        sessions = [int(r[3]) for r in rows]
        kept = self.db.write(lambda conn: self._persist(conn, ids, texts, vectors, sessions))
        if kept:
            self.index.add(
                [ids[k] for k in kept], vectors[kept], [str(rows[k][2]) for k in kept], [sessions[k] for k in kept]
            )
        self.stats.embedded += len(ids)
        self.stats.batches += 1
        self.stats.rates.append((time.monotonic(), len(ids)))
        return len(ids)

    def _next_batch(self) -> list[tuple[int, str, str, int]]:
        """The next batch: from the oldest ``WINDOW_BATCHES`` batches of the backlog, texts of similar length.

        A batch is padded to its longest text, so a backlog read in id order (a short reply, a pasted log, a
        short reply...) spends much of the model's time on padding. The window is read once, sorted by length
        and handed out a batch at a time; every message of a window is embedded before the next window is read,
        so nothing old waits behind newer messages for more than one window. A message changed or forgotten
        meanwhile is caught by ``_persist``.
        """
        with self._pending_lock:
            if not self._pending:
                window = sorted(self._read_window(), key=lambda row: len(row[1]))
                self._pending = [window[k : k + self.batch_size] for k in range(0, len(window), self.batch_size)]
                self._pending.reverse()  # popped from the end: shortest first
            return self._pending.pop() if self._pending else []

    def _read_window(self) -> list[tuple[int, str, str, int]]:
        rows = self.ops.backlog.oldest(self.db.reader(), self.batch_size * WINDOW_BATCHES)
        orphans = [r[0] for r in rows if r[1] is None]
        if orphans:  # messages pruned while queued
            self.db.write(lambda conn: self.ops.backlog.remove(conn, orphans))
        return [(r[0], str(r[1]), str(r[2]), int(r[3] or 0)) for r in rows if r[1] is not None]

    def _embed(self, texts: list[str]) -> Vectors:
        if not self._use_cache:
            return self._embed_shared(texts)
        identity = self.provider.identity
        hashes = [hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest() for t in texts]
        cached = _cached_vectors(self.ops, self.db.reader(), identity, hashes)
        missing = [k for k, h in enumerate(hashes) if h not in cached]
        vectors = np.zeros((len(texts), identity.dimension), dtype=np.float32)
        if missing:
            fresh = self.provider.embed([texts[k] for k in missing])
            for k, vector in zip(missing, fresh, strict=True):
                vectors[k] = vector
                cached[hashes[k]] = vector
        for k, digest in enumerate(hashes):
            vectors[k] = cached[digest]
        return vectors

    def _embed_shared(self, texts: list[str]) -> Vectors:
        """``texts`` embedded, in pieces taken by this thread and, while no request runs, the extra ones.

        The vectors are those of one call: the local model embeds each text on its own (``local.py``), so
        which thread embedded a text changes nothing. A failure in any thread stops the others taking pieces
        and is raised here, after every thread has finished its piece, so the batch stays queued as a whole.
        """
        if self._helpers is None or len(texts) <= SHARED_PIECE or not self.in_flight.idle():
            return self.provider.embed(texts)
        out = np.zeros((len(texts), self.provider.identity.dimension), dtype=np.float32)
        pieces = deque(range(0, len(texts), SHARED_PIECE))
        lock = threading.Lock()

        def take(only_when_idle: bool) -> int | None:
            with lock:
                if not pieces or (only_when_idle and not self.in_flight.idle()):
                    return None
                return pieces.popleft()

        def run(only_when_idle: bool) -> None:
            try:
                while (start := take(only_when_idle)) is not None:
                    out[start : start + SHARED_PIECE] = self.provider.embed(texts[start : start + SHARED_PIECE])
            except BaseException:
                with lock:
                    pieces.clear()
                raise

        extra = [self._helpers.submit(run, True) for _ in range(self._extra)]
        try:
            run(False)
        finally:
            errors = [error for future in extra if (error := future.exception()) is not None]
        if errors:
            raise errors[0]
        return out

    def _persist(self, conn: Any, ids: list[int], texts: list[str], vectors: Vectors, sessions: list[int]) -> list[int]:
        """Store the batch's vectors; returns the positions kept.

        A message whose text changed while it was being embedded (``redact --rescan`` redacted it, ``forget``
        removed it) keeps no vector of its old text: it is skipped here, and stays queued if it is still stored.
        """
        kept = _unchanged(self.ops, conn, ids, texts)
        if not kept:
            return kept
        if len(kept) < len(ids):
            ids, vectors, sessions = [ids[k] for k in kept], vectors[kept], [sessions[k] for k in kept]
            texts = [texts[k] for k in kept]
        store_vectors(self.ops, conn, ids, vectors, sessions)
        if self._use_cache:
            self.ops.backlog.cache_vectors(
                conn,
                _model_key(self.provider.identity),
                [
                    (hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest(), v.astype(np.float32).tobytes())
                    for t, v in zip(texts, vectors, strict=True)
                ],
            )
        return kept


def _unchanged(ops: Backend, conn: Any, ids: list[int], texts: list[str]) -> list[int]:
    """The positions of the messages still stored with the text that was embedded."""
    current = ops.messages.texts(conn, ids)
    return [k for k, (ident, text) in enumerate(zip(ids, texts, strict=True)) if current.get(ident) == text]


def _next_delay(delay: float, exc: EmbeddingUnavailable) -> float:
    """The provider's own wait when it named one (already capped by its ceiling), else doubling backoff."""
    if isinstance(exc, EmbeddingRateLimited):
        return max(exc.retry_after_s, 0.1)
    return min(MAX_BACKOFF_S, max(1.0, delay * 2))


def _cached_vectors(ops: Backend, conn: Any, identity: ProviderIdentity, hashes: list[bytes]) -> dict[bytes, Vectors]:
    """The vectors ``identity`` already made for these texts; one of another size is a miss, never a result.

    The size check is the last line of defence: a wrong-sized vector would fail the whole batch on every
    retry and stop the backlog for good.
    """
    rows = ops.backlog.cached_vectors(conn, _model_key(identity), hashes)
    size = identity.dimension * np.dtype(np.float32).itemsize
    return {digest: np.frombuffer(vector, dtype=np.float32) for digest, vector in rows if len(vector) == size}


def _model_key(identity: ProviderIdentity) -> ModelKey:
    return (identity.provider, identity.model, identity.variant, identity.dimension)
