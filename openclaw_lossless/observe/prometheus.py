"""Prometheus metrics: ``GET /metrics`` in the text exposition format, for the monitoring people already run.

Nothing here adds work to a turn beyond observing a histogram. Three sources feed one registry per app (never
the library's global one: a process may hold several apps, as the tests do):

- the latency histograms the sidecar's ``Metrics`` observes (assemble, commit-turn, search);
- ``RequestMetrics``, plain ASGI around everything (the token check included, so a 401 is counted): a
  latency histogram and a response counter per route, and the reason each refused commit-turn was refused;
- ``SidecarCollector``, which reads at scrape time what ``/stats`` reads: counters the sidecar keeps anyway,
  the backlog, the file's size, the vector index, catch-up and the agents' last commit and assemble.

``/metrics`` is under the token like every route. Scrapers often cannot send a bearer token, so ``serve
--metrics-port N`` also listens on a port of its own (loopback unless ``--allow-remote``) that answers
``/metrics`` without it, and nothing else: counts and timings only, never message text, ids or tokens.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import prometheus_client as prom
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openclaw_lossless import __version__
from openclaw_lossless.config import Settings
from openclaw_lossless.embed.openai_compat import EmbedderStats
from openclaw_lossless.errors import BadRequest, LosslessError
from openclaw_lossless.observe.metrics import LATENCY_BUCKETS, Metrics
from openclaw_lossless.store.model.store_errors import StoreError

if TYPE_CHECKING:
    from fastapi import FastAPI

    from openclaw_lossless.embed.index import Nearest
    from openclaw_lossless.embed.service import EmbeddingService
    from openclaw_lossless.embed.worker import EmbeddingWorker
    from openclaw_lossless.observe.activity import Activity
    from openclaw_lossless.sidecar import Sidecar
    from openclaw_lossless.store.backend import Store
    from openclaw_lossless.transcripts.catchup import CatchUp

log = logging.getLogger(__name__)

COMMIT_TURN_PATH = "/v1/hooks/commit-turn"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Present from the start (at 0), so a rate() or an alert on them works before the first one happens.
FALLBACK_REASONS = ("no_provider", "provider_unavailable", "query_deadline", "query_failed")
RECALL_SKIP_REASONS = ("no_query", "no_room", "deadline", "keyword_deadline", "excluded_session")
STORE_SOURCES = ("commit-turn", "ingest")
CATCH_UP_STATES = ("idle", "running", "off")
MIB = 1024 * 1024


class Exposition:
    """One app's registry: its request metrics, and the sidecar's state read when Prometheus asks."""

    def __init__(self, sidecar: Callable[[], Sidecar | None]) -> None:
        prom.disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series: noise here
        self.registry = prom.CollectorRegistry()
        self.refused: Counter[str] = Counter()  # refused commit-turns, by error code
        self.requests = prom.Histogram(
            "lossless_http_request_duration_seconds",
            "Time from request to response, per route template and method (the token check included).",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.responses = prom.Counter(
            "lossless_http_responses",
            "Responses sent, per route template, method and HTTP status.",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.registry.register(SidecarCollector(sidecar, self.refused))
        prom.ProcessCollector(registry=self.registry)  # memory, CPU, open files of this process

    def render(self) -> bytes:
        return prom.generate_latest(self.registry)


def metrics_response(exposition: Exposition) -> Response:
    return Response(exposition.render(), media_type=prom.CONTENT_TYPE_LATEST)


# -- requests ----------------------------------------------------------------------------------------------


class RequestMetrics:
    """Times every request and counts its status; remembers why a commit-turn was refused (its error code).

    The error code is read from the body only of a commit-turn answered with an error, which is small JSON.
    """

    def __init__(self, app: ASGIApp, exposition: Exposition) -> None:
        self.app = app
        self.exposition = exposition
        self._fixed_paths: frozenset[str] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.perf_counter()
        status = 500  # unless a response starts: an exception is answered 500 outside this layer
        reason: str | None = None
        is_commit = scope["path"] == COMMIT_TURN_PATH

        async def observed(message: Message) -> None:
            nonlocal status, reason
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif is_commit and status >= 400 and reason is None and message["type"] == "http.response.body":
                reason = error_code(message.get("body", b""), status)
            await send(message)

        try:
            await self.app(scope, receive, observed)
        finally:
            route, method = self._route(scope), _method(scope)
            self.exposition.requests.labels(route, method).observe(time.perf_counter() - began)
            self.exposition.responses.labels(route, method, str(status)).inc()
            if is_commit and status >= 400:
                self.exposition.refused[reason or error_code(b"", status)] += 1

    def _route(self, scope: Scope) -> str:
        """The route template (``/v1/messages/{message_id}``), never the raw path: the label set stays small."""
        route = getattr(scope.get("route"), "path", None)
        if isinstance(route, str):
            return route
        if self._fixed_paths is None:  # refused before routing (401, 413): a route without parameters is known
            routes = getattr(scope.get("app"), "routes", [])
            self._fixed_paths = frozenset(str(r.path) for r in routes if "{" not in str(getattr(r, "path", "{")))
        path = str(scope["path"])
        return path if path in self._fixed_paths else "unmatched"


def _method(scope: Scope) -> str:
    method = str(scope.get("method", ""))
    return method if method in METHODS else "other"


def error_code(body: bytes, status: int) -> str:
    """The stable code of an error body (``{"error": {"code": ...}}``), else one made of the status."""
    try:
        code = json.loads(body)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        code = None
    if isinstance(code, str) and code.replace("_", "").isalnum() and len(code) <= 40:
        return code
    return "internal" if status >= 500 else f"http_{status}"


# -- the sidecar's state, read at scrape time ----------------------------------------------------------------


class SidecarCollector(Collector):
    """Builds the counters and gauges from what the sidecar already keeps, when Prometheus asks."""

    def __init__(self, sidecar: Callable[[], Sidecar | None], refused: Counter[str]) -> None:
        self.sidecar = sidecar
        self.refused = refused

    def collect(self) -> Iterable[Metric]:
        info = InfoMetricFamily("lossless_build", "The sidecar's version.")
        info.add_metric([], {"version": __version__})
        yield info
        sidecar = self.sidecar()
        if sidecar is None:  # not started yet
            return
        metrics, embedding = sidecar.metrics, sidecar.embedding
        yield from metrics.durations.collect()
        yield _gauge("lossless_start_time_seconds", "When this sidecar started (Unix time).", metrics.started_at)
        yield self._turns(metrics)
        yield from _messages(metrics)
        yield from _embedder(embedding, sidecar.worker, metrics)
        yield from _recall(embedding, metrics)
        yield from _vector_index(sidecar.index, metrics)
        yield from _activity(sidecar.activity)
        yield from _catch_up(sidecar.catch_up)
        yield from _store(sidecar.store, sidecar.settings)

    def _turns(self, metrics: Metrics) -> Metric:
        turns = CounterMetricFamily(
            "lossless_turns",
            "Turns sent to commit-turn: outcome committed, duplicate (a replayed key, nothing written) or"
            " refused (reason: the error code answered).",
            labels=["outcome", "reason"],
        )
        for outcome in ("committed", "duplicate"):
            turns.add_metric([outcome, ""], metrics.counters[f"turns_{outcome}"])
        for reason, count in sorted(self.refused.items()):
            turns.add_metric(["refused", reason], count)
        return turns


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)


def _by(
    family: CounterMetricFamily | GaugeMetricFamily, counts: Counter[str] | dict[str, int], known: Iterable[str] = ()
) -> CounterMetricFamily | GaugeMetricFamily:
    for key in sorted(set(known) | set(counts)):
        family.add_metric([key], counts.get(key, 0))
    return family


def _messages(metrics: Metrics) -> Iterator[Metric]:
    counters = metrics.counters
    stored = CounterMetricFamily(
        "lossless_messages_stored", "Messages stored by the hooks, by hook (catch-up: see catch_up).", labels=["source"]
    )
    yield _by(stored, metrics.stored, STORE_SOURCES)
    yield _counter("lossless_messages_forgotten", "Messages forgotten on request.", counters["messages_forgotten"])
    yield _counter(
        "lossless_messages_archived", "Messages archived to stay under maxDbSizeMb.", counters["messages_archived"]
    )


def _embedder(embedding: EmbeddingService, worker: EmbeddingWorker | None, metrics: Metrics) -> Iterator[Metric]:
    status = embedding.status
    yield _gauge("lossless_embedder_ready", "1 when the embedder is ready (else recall is keyword-only).", status.ready)
    stats = worker.stats if worker is not None else None
    yield _counter("lossless_embed_batches", "Backlog batches embedded.", stats.batches if stats else 0)
    yield _counter("lossless_embed_messages", "Messages embedded from the backlog.", stats.embedded if stats else 0)
    yield _counter(
        "lossless_embed_failures", "Backlog batches that failed (the worker backs off).", stats.failures if stats else 0
    )
    yield _gauge("lossless_embed_drain_rate", "Messages embedded per second over the last minute.", _drain_rate(worker))
    yield _gauge("lossless_embed_backoff_seconds", "The worker's current backoff.", stats.backoff_s if stats else 0)
    yield _counter(
        "lossless_vector_rebuilds",
        "Vector sets dropped for another model.",
        metrics.counters["vector_rebuilds"],
    )
    api = getattr(embedding.provider, "stats", None)
    if isinstance(api, EmbedderStats):  # the openai-compatible provider's requests and failures by kind
        yield _counter("lossless_embedder_api_requests", "Requests sent to the embedding API.", api.requests)
        yield _counter("lossless_embedder_api_retries", "Requests to the embedding API retried.", api.retries)
        failures = CounterMetricFamily(
            "lossless_embedder_api_failures", "Embedding API failures, by kind.", labels=["kind"]
        )
        yield _by(failures, dict(api.failures))


def _drain_rate(worker: EmbeddingWorker | None) -> float:
    return worker.stats.drain_rate() if worker is not None else 0.0


def _recall(embedding: EmbeddingService, metrics: Metrics) -> Iterator[Metric]:
    fallbacks = CounterMetricFamily(
        "lossless_keyword_fallbacks",
        "Recalls that ran on keyword search alone because the query could not be embedded, by reason.",
        labels=["reason"],
    )
    yield _by(fallbacks, embedding.status.fallbacks, FALLBACK_REASONS)
    skips = CounterMetricFamily(
        "lossless_recall_skips", "Assembles that recalled nothing or stopped early, by reason.", labels=["reason"]
    )
    yield _by(skips, metrics.recall_skips, RECALL_SKIP_REASONS)


def _vector_index(index: Nearest | None, metrics: Metrics) -> Iterator[Metric]:
    loaded = index is not None and index.loaded.is_set()
    yield _gauge(
        "lossless_vector_index_vectors",
        "Vectors in the index (on PostgreSQL beyond 100,000: the server's estimate).",
        index.estimated_len() if index else 0,
    )
    yield _gauge("lossless_vector_index_loaded", "1 once the vector index is loaded (until then: keyword).", loaded)
    yield _gauge("lossless_vector_index_bytes", "Memory the vector index holds.", index.nbytes if index else 0)
    yield _gauge(
        "lossless_vector_index_load_seconds",
        "How long loading the vector index took at start.",
        metrics.counters["index_load_ms"] / 1000,
    )
    yield _counter(
        "lossless_vector_searches_while_loading",
        "Vector searches answered by keyword search because the index was still loading.",
        index.searches_while_loading if index is not None else 0,
    )


def _activity(activity: Activity) -> Iterator[Metric]:
    commits = GaugeMetricFamily(
        "lossless_last_commit_timestamp_seconds", "When each agent's last turn was stored.", labels=["agent"]
    )
    assembles = GaugeMetricFamily(
        "lossless_last_assemble_timestamp_seconds", "When each agent last assembled (since start).", labels=["agent"]
    )
    for agent in activity.times():
        committed, assembled, _ = activity.agent(agent)
        if committed is not None:
            commits.add_metric([agent], committed)
        if assembled is not None:
            assembles.add_metric([agent], assembled)
    yield commits
    yield assembles


def _catch_up(catch_up: CatchUp) -> Iterator[Metric]:
    view = catch_up.brief()
    state = GaugeMetricFamily("lossless_catch_up_state", "1 for catch-up's current state.", labels=["state"])
    for name in CATCH_UP_STATES:
        state.add_metric([name], view.state == name)
    yield state
    yield _gauge("lossless_catch_up_pending", "Sessions and agents queued for catch-up.", view.pending)
    yield _gauge("lossless_catch_up_error", "1 when catch-up's last run failed.", view.last_error is not None)
    yield _counter("lossless_catch_up_runs", "Catch-up runs.", catch_up.runs)
    yield _counter(
        "lossless_catch_up_imported", "Messages catch-up stored from the host's transcripts.", catch_up.total_imported
    )
    if catch_up.last_run_at is not None:
        yield _gauge("lossless_catch_up_last_run_timestamp_seconds", "When catch-up last ran.", catch_up.last_run_at)


def _store(store: Store, settings: Settings) -> Iterator[Metric]:
    """What the database holds (a count and two PRAGMAs); ``lossless_store_readable`` 0 when it cannot be read."""
    db, ops = store.db, store.ops
    yield _gauge("lossless_database_bytes", "Bytes of the database file and its WAL on disk.", db.file_bytes())
    yield _gauge(
        "lossless_database_max_bytes", "maxDbSizeMb in bytes (0: no limit).", max(settings.max_db_size_mb, 0) * MIB
    )
    try:
        with db.translated():
            conn = db.reader()
            backlog = ops.backlog.size(conn)
            stored = ops.messages.count(conn)
            used = ops.archive.used_bytes(conn)
    except (LosslessError, StoreError) as exc:
        log.warning("metrics: the store could not be read: %s", getattr(exc, "message", exc))
        yield _gauge("lossless_store_readable", "1 when the store could be read for this scrape.", 0)
        return
    yield _gauge("lossless_store_readable", "1 when the store could be read for this scrape.", 1)
    yield _gauge("lossless_backlog_messages", "Messages waiting to be embedded.", backlog)
    yield _gauge("lossless_messages", "Messages in the store (archived and forgotten ones excluded).", stored)
    yield _gauge("lossless_database_used_bytes", "Bytes of the database holding data (free pages excluded).", used)


# -- the metrics port --------------------------------------------------------------------------------------


@dataclass
class MetricsListener:
    """The sockets of ``--metrics-port``, bound before the store is opened, as the main port's are."""

    sockets: list[socket.socket]

    @property
    def addresses(self) -> frozenset[tuple[str, int]]:
        return frozenset((str(s.getsockname()[0]), int(s.getsockname()[1])) for s in self.sockets)

    @property
    def url(self) -> str:
        host, port = sorted(self.addresses)[0]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"

    def attach(self, app: FastAPI) -> None:
        """Requests arriving on these sockets get ``/metrics`` without the token; no other route is there."""
        if self.sockets:
            app.add_middleware(MetricsPort, exposition=app.state.exposition, addresses=self.addresses)
            log.info("serving /metrics without the token on %s", self.url)

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


def bind_metrics_port(settings: Settings) -> MetricsListener:
    """The metrics port's sockets (none unless asked for); a bad host or a taken port is one line."""
    from openclaw_lossless import listeners

    port, host = settings.metrics_port, settings.metrics_host
    if port is None:
        return MetricsListener([])
    if not listeners.is_loopback(host) and not settings.allow_remote:
        raise BadRequest(f"refusing to serve metrics on {host}: it is not loopback; pass --allow-remote to mean it")
    if port != 0 and port == settings.port:
        raise BadRequest(f"--metrics-port {port} is the main port; pick another (the main port has /metrics already)")
    try:
        return MetricsListener(listeners.bind_tcp(host, port))
    except OSError as exc:
        if listeners.port_in_use(exc):
            raise LosslessError(f"metrics port {port} on {host} is in use; pick another --metrics-port") from exc
        raise


class MetricsPort:
    """Outermost ASGI layer: a request that came in on the metrics port is answered here, all others pass on."""

    def __init__(self, app: ASGIApp, exposition: Exposition, addresses: frozenset[tuple[str, int]]) -> None:
        self.app = app
        self.exposition = exposition
        self.addresses = addresses

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        server = scope.get("server")
        if scope["type"] != "http" or server is None or (str(server[0]), server[1]) not in self.addresses:
            await self.app(scope, receive, send)
            return
        response: Response
        if scope["path"] != "/metrics":
            response = _error(404, "not_found", "this port serves only GET /metrics; the API is on the main port")
        elif scope["method"] not in ("GET", "HEAD"):
            response = _error(405, "method_not_allowed", "GET /metrics")
        else:
            response = await run_in_threadpool(metrics_response, self.exposition)
        await response(scope, receive, send)


def _error(status: int, code: str, message: str) -> JSONResponse:
    body: dict[str, Any] = {"error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status)
