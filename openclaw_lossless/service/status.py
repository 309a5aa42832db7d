"""What the sidecar reports about itself: ``/healthz`` (can a turn be stored now?) and ``/stats``.

Why apart from the reads of the conversation: these describe the process (embedder, index, worker, catch-up,
latencies) more than the store, and they must answer exactly when something is broken, so a failing store
is reported here, never raised.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from openclaw_lossless import __version__
from openclaw_lossless.config import Settings
from openclaw_lossless.embed.index import Nearest
from openclaw_lossless.embed.openai_compat import EmbedderStats
from openclaw_lossless.embed.service import EmbeddingService
from openclaw_lossless.embed.worker import EmbeddingWorker
from openclaw_lossless.errors import LosslessError
from openclaw_lossless.observe.activity import Activity, AgentTimes
from openclaw_lossless.observe.last_hour import MinuteBacklog, MinuteLatency
from openclaw_lossless.observe.metrics import Latency, Metrics
from openclaw_lossless.service.size_cap import Archiving, SizeCap
from openclaw_lossless.store.backend import Store
from openclaw_lossless.store.model.snapshots import COMPACTED, FAILED
from openclaw_lossless.store.model.store_errors import StoreError
from openclaw_lossless.store.statements.keyword_pairs import PairsProgress
from openclaw_lossless.transcripts.catchup import CatchUp
from openclaw_lossless.transcripts.catchup_report import CatchUpBrief, CatchUpReport


@dataclass(frozen=True)
class Rebuild:
    """Whether the vectors are being made again at start-up, and with what they had been made (for /stats)."""

    rebuilding: bool = False
    rebuilt_from: str | None = None


@dataclass(frozen=True)
class Parts:
    """What the report reads: the sidecar's parts, as ``sidecar.py`` wired them."""

    settings: Settings
    store: Store
    embedding: EmbeddingService
    index: Nearest | None
    worker: EmbeddingWorker | None
    activity: Activity
    catch_up: CatchUp
    metrics: Metrics
    size_cap: SizeCap
    rebuild: Rebuild


@dataclass(frozen=True)
class DatabaseHealth:
    writable: bool
    problem: str | None  # why a turn cannot be stored now
    backend: str  # "sqlite" or "postgresql": which store the sidecar is on, never guessed from the settings
    vector_extension: str | None  # "sqlite-vec v0.1.6" or "pgvector 0.8.1"; None when it cannot be read


@dataclass(frozen=True)
class WorkerState:
    embedded: int
    failures: int
    last_error: str | None
    backoff_s: float
    drain_rate_per_s: float


@dataclass(frozen=True)
class EmbedderState:
    configured: str
    active: str | None
    model: str | None
    variant: str | None
    dimension: int | None
    ready: bool
    reason: str | None
    fallbacks: dict[str, int]
    rebuilding: bool
    rebuilt_from: str | None
    worker: WorkerState | None
    api: dict[str, object] | None  # an API provider's requests, retries and failures by kind


@dataclass(frozen=True)
class IndexState:
    loaded: bool
    vectors: int
    searches_while_loading: int


@dataclass(frozen=True)
class Health:
    """``/healthz``: ``ok``, ``degraded`` (hooks work, recall is keyword-only) or ``unavailable``."""

    status: str
    version: str
    pid: int
    database: DatabaseHealth
    sqlite_vec: str | None
    embedder: EmbedderState
    backlog: int | None
    vector_index: IndexState | None
    agents: dict[str, AgentTimes]
    catch_up: CatchUpBrief


@dataclass(frozen=True)
class DatabaseSize:
    path: str
    bytes: int
    used_bytes: int
    max_db_size_mb: float


@dataclass(frozen=True)
class ArchiveState:
    archived_messages: int
    archives: int
    last: Archiving | None


@dataclass(frozen=True)
class Stats:
    """``/stats``: counts, sizes, the embedder, latencies and catch-up."""

    version: str
    uptime_s: float
    messages: int
    sessions: int
    agents: int
    turns: int
    compactions: int  # only those that did compact
    compaction_failures: int
    compaction_outcomes: dict[str, int]  # every status, failed and skipped (nothing to compact) too
    snapshots: int
    forgotten: int  # tombstones: messages forgotten on request
    subagents: int
    vectors: int
    vector_index: IndexState | None
    backlog: int
    embedder: EmbedderState
    database: DatabaseSize
    archive: ArchiveState
    latency: dict[str, Latency]
    recall_skips: dict[str, int]
    counters: dict[str, int]
    agent_activity: dict[str, AgentTimes]
    catch_up: CatchUpReport
    keyword_pairs: PairsProgress | None  # the backfill of older messages' pairs, while it has work


@dataclass(frozen=True)
class LastHour:
    """The status page's charts: each operation's latency and the backlog, per minute of the last hour."""

    latency: dict[str, list[MinuteLatency]]
    backlog: list[MinuteBacklog]


class Status:
    """``health()`` for ``/healthz``, ``stats()`` for ``/stats``; the response models name them on the wire."""

    def __init__(self, parts: Parts, *, started: float) -> None:
        self.parts = parts
        self.started = started  # monotonic, for the uptime

    def health(self) -> Health:
        """Liveness and readiness: ``ok``; ``degraded`` (hooks work, recall is keyword-only); ``unavailable``.

        ``unavailable`` means a turn cannot be stored now (the database takes no write lock or cannot be
        read); the route answers it with 503, so a supervisor or the plugin's start-up wait sees it. A store
        that fails is reported here, never raised: the operator needs this document most exactly then.
        """
        p = self.parts
        problem = self._write_problem()
        vector_extension: str | None = None
        backlog: int | None = None
        try:
            with p.store.db.translated():
                conn = p.store.db.reader()
                vector_extension = p.store.ops.counts.vector_extension(conn)
                backlog = p.store.ops.backlog.size(conn)
            self._sample_backlog(backlog)
        except LosslessError as exc:
            problem = problem or exc.message
        except StoreError as exc:
            problem = problem or str(exc)
        writable = problem is None
        return Health(
            status="unavailable" if not writable else ("ok" if p.embedding.status.ready else "degraded"),
            version=__version__,
            pid=os.getpid(),
            database=DatabaseHealth(writable, problem, p.store.ops.name, vector_extension),
            sqlite_vec=_bare_sqlite_vec(vector_extension),
            embedder=self._embedder_view(),
            backlog=backlog,
            vector_index=self._index_view(),
            agents=p.activity.times(),
            catch_up=p.catch_up.brief(),
        )

    def _write_problem(self) -> str | None:
        """Why the store cannot take a write now, or None: takes the write lock, as a commit would."""
        try:
            self.parts.store.db.write(self.parts.store.ops.counts.probe)
        except LosslessError as exc:
            return exc.message
        except StoreError as exc:  # not one of ours: e.g. "attempt to write a readonly database"
            return str(exc)
        return None

    def _index_view(self) -> IndexState | None:
        index = self.parts.index
        if index is None:
            return None
        return IndexState(index.loaded.is_set(), index.estimated_len(), index.searches_while_loading)

    def _embedder_view(self) -> EmbedderState:
        p = self.parts
        status = p.embedding.status
        api = getattr(p.embedding.provider, "stats", None)  # an API provider's requests and failures by kind
        return EmbedderState(
            configured=status.configured,
            active=status.active,
            model=status.model,
            variant=status.variant,
            dimension=status.dimension,
            ready=status.ready,
            reason=status.reason,
            fallbacks=dict(status.fallbacks),
            rebuilding=p.rebuild.rebuilding,
            rebuilt_from=p.rebuild.rebuilt_from,
            worker=self._worker_view(),
            api=api.as_dict() if isinstance(api, EmbedderStats) else None,
        )

    def _worker_view(self) -> WorkerState | None:
        if self.parts.worker is None:
            return None
        worker = self.parts.worker.stats
        return WorkerState(
            worker.embedded, worker.failures, worker.last_error, worker.backoff_s, round(worker.drain_rate(), 2)
        )

    def last_hour(self) -> LastHour:
        """The last hour per minute, the backlog sampled now so its last minute is current."""
        self._sample_backlog(self.parts.store.ops.backlog.size(self.parts.store.db.reader()))
        return LastHour(self.parts.metrics.last_hour(), self.parts.metrics.backlog.minutes())

    def _sample_backlog(self, size: int) -> None:
        """Record the backlog just counted, with the worker's running count: the last hour's drain rate."""
        worker = self.parts.worker
        self.parts.metrics.backlog.sample(size, worker.stats.embedded if worker is not None else None)

    def stats(self) -> Stats:
        """Counts, sizes, the embedder, latencies and catch-up: what docs/http-api.md says ``/stats`` shows."""
        p = self.parts
        conn = p.store.db.reader()
        rows = p.store.ops.counts.count_rows(conn)
        backlog = p.store.ops.backlog.size(conn)
        self._sample_backlog(backlog)
        compactions = p.store.ops.snapshots.compaction_counts(conn)
        return Stats(
            version=__version__,
            uptime_s=round(time.monotonic() - self.started, 1),
            messages=rows.messages,
            sessions=rows.sessions,
            agents=rows.agents,
            turns=rows.turns,
            compactions=compactions[COMPACTED],
            compaction_failures=compactions[FAILED],
            compaction_outcomes=compactions,
            snapshots=rows.snapshots,
            forgotten=rows.forgotten,
            subagents=rows.subagents,
            vectors=len(p.index) if p.index is not None else 0,
            vector_index=self._index_view(),
            backlog=backlog,
            embedder=self._embedder_view(),
            database=DatabaseSize(
                str(p.store.db.path),
                p.store.db.file_bytes(),
                p.store.ops.archive.used_bytes(conn),
                p.settings.max_db_size_mb,
            ),
            archive=ArchiveState(rows.archived_messages, rows.archives, p.size_cap.last),
            latency=p.metrics.latency(),
            recall_skips=dict(p.metrics.recall_skips),
            counters=dict(p.metrics.counters),
            agent_activity=p.activity.times(),
            catch_up=p.catch_up.view(),
            keyword_pairs=p.store.ops.keyword_pairs.progress(conn),
        )


def _bare_sqlite_vec(vector_extension: str | None) -> str | None:
    """``sqliteVec``: sqlite-vec's bare version, kept for the scripts that read it; null on PostgreSQL."""
    if vector_extension is None or not vector_extension.startswith("sqlite-vec "):
        return None
    return vector_extension.removeprefix("sqlite-vec ")
