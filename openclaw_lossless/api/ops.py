"""Operator endpoints: liveness/readiness for supervisors, counts and latencies for people and for Prometheus."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from openclaw_lossless.api.deps import StatusDep
from openclaw_lossless.api.responses import HealthResponse, StatsResponse
from openclaw_lossless.observe.prometheus import metrics_response

router = APIRouter(tags=["ops"])

UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {
        "description": "The store cannot take a turn now: the same document, status 'unavailable'.",
        "model": HealthResponse,
    }
}


@router.get("/healthz", responses=UNAVAILABLE)
def healthz(status: StatusDep, response: Response) -> HealthResponse:
    """Public (no token): DB writable, sqlite-vec loaded, embedder ready, backlog size.

    200 while hooks work (``ok``, or ``degraded``: keyword-only recall); 503 when ``unavailable``, because
    supervisors and the plugin's start-up wait read the status code, not the body.
    """
    health = HealthResponse.model_validate(status.health())
    if health.status == "unavailable":
        response.status_code = 503
    return health


@router.get("/stats")
def stats(status: StatusDep) -> StatsResponse:
    return StatsResponse.model_validate(status.stats())


# Not in the OpenAPI schema: its answer is Prometheus' text format, not JSON (docs/web-ui.md: Metrics).
@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    """Counters, gauges and latency histograms in the Prometheus text format, read at scrape time."""
    return metrics_response(request.app.state.exposition)
