"""The composition root: one ``Sidecar`` per process opens the store, the embedder, the vector index, the
worker and the assembler, wires them into the three jobs (``service/``), and closes them again.

Why nothing else lives here: every hook, query and report is a method of ``ingest`` (writes), ``queries``
(reads) or ``status`` (``/healthz``, ``/stats``), so a feature touches the room it belongs to; this file only
says which part each of them is given. The routers, the CLI (on the database file) and the MCP server use
the same object.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from openclaw_lossless.capture.injected import InjectedText
from openclaw_lossless.capture.records import CaptureOptions
from openclaw_lossless.capture.redact import build_redactor
from openclaw_lossless.config import Settings
from openclaw_lossless.embed.in_flight import InFlight
from openclaw_lossless.embed.index import Nearest, VectorIndex, prepare_table, recorded_identity
from openclaw_lossless.embed.provider import EmbeddingProvider, ProviderIdentity
from openclaw_lossless.embed.service import EmbeddingService, build_provider
from openclaw_lossless.embed.worker import EmbeddingWorker
from openclaw_lossless.errors import LosslessError, StorageFull, StoreCorrupt, StoreUnavailable
from openclaw_lossless.memory_files.indexer import MemoryIndexer
from openclaw_lossless.observe.activity import Activity
from openclaw_lossless.observe.metrics import Metrics
from openclaw_lossless.recall.assemble import Assembler
from openclaw_lossless.selection import SessionSelection
from openclaw_lossless.service.ingest import Ingest
from openclaw_lossless.service.queries import Queries
from openclaw_lossless.service.size_cap import SizeCap
from openclaw_lossless.service.status import Parts, Rebuild, Status
from openclaw_lossless.store.backend import SQLITE, Place, Store, connect, read_file
from openclaw_lossless.store.model.store_errors import StoreError

log = logging.getLogger(__name__)

BACKFILL_PAUSE_S = 0.02  # between backfill batches, so turns' writes come first


class Sidecar:
    """The process's parts (``db``, ``embedding``, ``index``, ``worker``, ``assembler``, ``activity``,
    ``metrics``, ``catch_up``, ``size_cap``, ``memory_files``) and its jobs (``ingest``, ``queries``, ``status``)."""

    def __init__(
        self,
        settings: Settings,
        *,
        start_worker: bool = True,
        provider: EmbeddingProvider | None = None,
        background_load: bool = False,
    ) -> None:
        """Open the store; with ``background_load`` (the server) the vector index loads in a thread of its own.

        Why in the background: at a million messages reading the vectors takes seconds, and a turn must not
        wait for them. Until loaded, recall runs on keyword search (``/healthz`` shows ``vectorIndex``); the
        worker starts after the load so no vector can be added to a half-read index.
        """
        self.settings = settings
        self.started = time.monotonic()
        self.metrics = Metrics()
        self._closing = threading.Event()
        self._threads: list[threading.Thread] = []  # start-up's own threads: close() waits for each
        self.store = _open_store(settings)
        # The backend's Database, typed Any: a test or tool that knows the backend hands it to that backend's
        # modules; the package itself goes through ``self.store`` (``store.db`` + ``store.ops``).
        self.db: Any = self.store.db
        self.ops = self.store.ops
        self.activity = Activity.from_store(self.store)  # per agent: last commit, assemble and recall
        self.capture_options = CaptureOptions(
            redactor=build_redactor(settings.redact_patterns),
            redact_originals=settings.redact_originals,
            include_thinking=settings.include_thinking,
            injected=InjectedText.from_entries(settings.injected_blocks),
        )
        self.embedding = EmbeddingService(settings, provider)
        self.in_flight = InFlight()  # the turn's requests running now: the drain's extra threads wait for none
        self.index: Nearest | None = None
        self.worker: EmbeddingWorker | None = None
        self.rebuild = Rebuild()
        if self.embedding.provider is not None:
            self._open_vectors(self.embedding.provider, start_worker=start_worker, background=background_load)
        terms = self.ops.term_stats(settings.keyword_term_limit)
        clean = self.capture_options.injected.strip
        self.assembler = Assembler(self.ops, self.index, self.embedding, terms, clean=clean)
        self.size_cap = SizeCap(self.store, settings, self.metrics, self.index, terms)
        # The workspace memory files: its thread starts with the server (app.py), like catch-up's.
        self.memory_files = MemoryIndexer(settings, self.store, self.capture_options, self.index, terms, self.worker)
        self._wire_jobs()
        if background_load:
            self._read_days_in_new_languages()
        if background_load and self._backfills_pending():
            backfill = threading.Thread(target=self._backfill, name="lossless-backfill", daemon=True)
            self._threads.append(backfill)
            backfill.start()

    def _wire_jobs(self) -> None:
        """Give each job the parts it uses, and no more."""
        selection = SessionSelection.of(self.settings.include_sessions, self.settings.exclude_sessions)
        self.ingest = Ingest(
            self.settings,
            self.store,
            selection=selection,
            capture_options=self.capture_options,
            activity=self.activity,
            metrics=self.metrics,
            worker=self.worker,
            size_cap=self.size_cap,
            in_flight=self.in_flight,
        )
        self.catch_up = self.ingest.catch_up  # its thread starts with the server (app.py)
        self.queries = Queries(
            self.settings,
            self.store,
            selection=selection,
            assembler=self.assembler,
            activity=self.activity,
            metrics=self.metrics,
            catch_up=self.catch_up,
            in_flight=self.in_flight,
        )
        parts = Parts(
            settings=self.settings,
            store=self.store,
            embedding=self.embedding,
            index=self.index,
            worker=self.worker,
            activity=self.activity,
            catch_up=self.catch_up,
            metrics=self.metrics,
            size_cap=self.size_cap,
            rebuild=self.rebuild,
        )
        self.status = Status(parts, started=self.started)

    def _open_vectors(self, provider: EmbeddingProvider, *, start_worker: bool, background: bool) -> None:
        """The vector table for this embedder (rebuilt when another made it), the index and its worker."""
        identity = provider.identity
        built_with = recorded_identity(self.ops, self.db.reader())
        rebuilding = prepare_table(self.store, identity)
        if rebuilding and built_with is not None:
            rebuilt_from = f"{built_with.model}/{built_with.variant}/{built_with.dimension}-d"
            self.rebuild = Rebuild(rebuilding=True, rebuilt_from=rebuilt_from)
            self.metrics.counters["vector_rebuilds"] += 1
            log.warning(
                "the vectors were built with %s, not the configured %s/%s/%d-d: dropped them and queued"
                " every message to be embedded again (recall uses keyword search until then)",
                rebuilt_from,
                identity.model,
                identity.variant,
                identity.dimension,
            )
        else:
            self.rebuild = Rebuild(rebuilding=rebuilding)
        self.index = self._index(identity.dimension)
        self.worker = EmbeddingWorker(
            self.store,
            provider,
            self.index,
            batch_size=self.settings.embed_batch_size,
            in_flight=self.in_flight,
            drain_threads=self.settings.drain_threads,
            backlog_history=self.metrics.backlog,
        )
        loader = threading.Thread(
            target=self._load_index, args=(start_worker,), name="lossless-index-load", daemon=True
        )
        if background:
            self._threads.append(loader)
            loader.start()
        else:
            loader.run()

    def _index(self, dimension: int) -> Nearest:
        """The vectors searched: a copy in memory beside a SQLite file; the store itself on PostgreSQL, where
        other sidecars write vectors this process would never see in a copy."""
        if self.store.backend == "postgresql":
            from openclaw_lossless.embed.database_index import DatabaseIndex  # needs the PostgreSQL driver

            return DatabaseIndex(self.db, dimension)
        return VectorIndex(dimension, shortlist=self.settings.vector_shortlist)

    def _read_days_in_new_languages(self) -> None:
        """After an upgrade whose date reader knows more languages, queue every message to be read again (a
        marker in ``meta``, one short write at start-up; the reading is the background backfill's)."""
        try:
            self.db.write(self.ops.message_days.read_again_in_new_languages)
        except Exception:  # start-up goes on: recall works without those days, and the log says why
            log.exception("the days older messages refer to could not be queued to be read again")

    def _backfills_pending(self) -> bool:
        conn = self.db.reader()
        return self.ops.message_days.backfill_pending(conn) or self.ops.keyword_pairs.progress(conn) is not None

    def _backfill(self) -> None:
        """Complete what migrations left to the server, a batch per write, in the background, taking turns:
        the days that messages stored before m008 (or before the date reader knew all its languages) refer
        to (``store/sqlite/message_days.py``), and the keyword pairs of messages stored before the index held
        them (``store/sqlite/keyword_pairs.py``). Start-up never waits on them, and turns queue behind one
        batch; each batch commits with its cursor, so a process stopped half-way goes on at its next start."""
        steps = {"days": self.ops.message_days.backfill_step, "keyword pairs": self.ops.keyword_pairs.step}
        while steps and not self._closing.is_set():
            for name, step in list(steps.items()):
                try:
                    if not self.db.write(step):
                        del steps[name]
                except Exception:  # the thread's edge: recall goes on without them, and the log says why
                    if not self._closing.is_set():
                        log.exception("the %s of older messages could not be read", name)
                    del steps[name]
            self._closing.wait(BACKFILL_PAUSE_S)

    def _load_index(self, start_worker: bool) -> None:
        """Read the stored vectors into the index, then start the worker (never before: see ``__init__``)."""
        assert self.index is not None and self.worker is not None
        began = time.monotonic()
        try:
            with self.db.translated():
                self.index.load(self.ops, self.db.reader(), stop=self._closing)
        except (StoreError, StorageFull, StoreCorrupt, StoreUnavailable) as exc:  # keyword search goes on
            log.error("the vector index could not be loaded, recall uses keyword search only: %s", exc)
            return
        except Exception:  # the thread's edge: keyword search goes on, and the log says why
            log.exception("vector index could not be loaded, recall uses keyword search only")
            return
        if self._closing.is_set():  # stopped part-way: close() is under way and stops the worker
            return
        self.metrics.counters["index_load_ms"] = round((time.monotonic() - began) * 1000)
        if start_worker:
            self.worker.start()

    def close(self) -> None:
        """Stop the threads, then close the embedder and the store; a size check under way finishes first.

        Start-up's threads are waited for before anything closes: the index load reads on a connection of
        its own, and closing that connection while it reads crashed the process (a server stopped during
        its first seconds); the load stops at its next block once ``_closing`` is set.
        """
        self._closing.set()
        for thread in self._threads:
            thread.join()
        stopped = {
            "archiving": self.size_cap.close(),
            "catch-up": self.catch_up.close(),
            "memory-file indexing": self.memory_files.close(),
        }
        if self.worker is not None:
            stopped["embedding"] = self.worker.stop()
        if self.index is not None:
            stopped["vector index upkeep"] = self.index.close()
        self.assembler.close()
        running = [name for name, done in stopped.items() if not done]
        if running:  # closing the store (or the embedder) under a thread still using it would crash the process
            log.warning(
                "%s still running at close: the store and the embedder are left open until the process exits"
                " (what was committed stays committed; what that work had not committed is done again at the"
                " next start)",
                " and ".join(running),
            )
            return
        self.embedding.close()
        with contextlib.suppress(LosslessError):
            self.db.close()


def _open_store(settings: Settings) -> Store:
    """The state dir (0700: the token, archives and by default the database live there) and the migrated store."""
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(settings.state_dir, 0o700)
    return connect(place_of(settings))


def place_of(settings: Settings) -> Place:
    """Where the settings put the store: the SQLite file, or the PostgreSQL server ``database_url`` names."""
    url = settings.database_url.get_secret_value() if settings.database_url is not None else None
    return Place(
        settings.database_path,
        synchronous=settings.synchronous,
        url=url,
        schema=settings.database_schema,
        connections=settings.database_connections,
    )


ProviderFactory = Callable[[Settings], EmbeddingProvider]


def open_store(settings: Settings, provider_factory: ProviderFactory = build_provider) -> Sidecar:
    """The store opened in this process for queries (a ``Sidecar`` without its worker), never at the cost of
    its vectors: a provider whose identity differs from the one recorded with them would have them dropped
    and rebuilt (a CLI search run with another model's settings would wipe a million vectors), so then (or
    with no vectors, or no provider) search runs on keywords alone. When it is left out for a reason (another
    model's vectors, a model that cannot load), the store's embedder status keeps the user's setting and that
    reason, so a search that asked for vectors answers ``vector_unavailable`` instead of finding nothing."""
    provider: EmbeddingProvider | None = None
    withheld: str | None = None  # why the configured embedder is left out, when it is
    recorded = _recorded_identity(settings)
    if recorded is not None and settings.embedding_provider != "none":
        try:
            candidate = provider_factory(settings)
        except LosslessError as exc:
            withheld = exc.message
            log.warning("embeddings unavailable, keyword search only: %s", exc.message)
        else:
            if candidate.identity == recorded:
                provider = candidate
            else:
                withheld = (
                    f"the configured embedder {candidate.identity} is not the one the stored vectors were made"
                    f" with ({recorded})"
                )
                log.warning("%s: keyword search only", withheld)
                candidate.close()
    configured = settings.embedding_provider
    if provider is None:
        settings = settings.model_copy(update={"embedding_provider": "none"})
    sidecar = Sidecar(settings, start_worker=False, provider=provider)
    if withheld is not None:
        sidecar.embedding.withheld(configured, withheld)
    return sidecar


@contextlib.contextmanager
def store_for_queries(settings: Settings, provider_factory: ProviderFactory = build_provider) -> Iterator[Sidecar]:
    """``open_store`` for one piece of work, closed after it with the provider built for it."""
    sidecar = open_store(settings, provider_factory)
    try:
        yield sidecar
    finally:
        provider = sidecar.embedding.provider
        sidecar.close()
        if provider is not None:  # handed to the store, so not closed by it
            provider.close()


def _recorded_identity(settings: Settings) -> ProviderIdentity | None:
    """The embedder the store's vectors were made with (read only; None when there are none).

    A SQLite file is opened read-only (a missing one is not created); a PostgreSQL store is opened (and
    migrated, which a server shared with running sidecars has already done) and read.
    """
    if settings.database_url is not None:
        store = connect(place_of(settings))
        try:
            return recorded_identity(store.ops, store.db.reader())
        finally:
            store.db.close()
    return read_file(settings.database_path, partial(recorded_identity, SQLITE))  # None: no file, or no meta yet
