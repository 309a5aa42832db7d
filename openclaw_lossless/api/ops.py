"""Operator endpoints: liveness/readiness for supervisors, counts and latencies for people."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from openclaw_lossless.api.deps import SidecarDep

router = APIRouter(tags=["ops"])

UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"description": "The store cannot take a turn now: the same document, status 'unavailable'."}
}


@router.get("/healthz", responses=UNAVAILABLE)
def healthz(sidecar: SidecarDep, response: Response) -> dict[str, Any]:
    """Public (no token): DB writable, sqlite-vec loaded, embedder ready, backlog size.

    200 while hooks work (``ok``, or ``degraded``: keyword-only recall); 503 when ``unavailable``, because
    supervisors and the plugin's start-up wait read the status code, not the body.
    """
    health = sidecar.health()
    if health["status"] == "unavailable":
        response.status_code = 503
    return health


@router.get("/stats")
def stats(sidecar: SidecarDep) -> dict[str, Any]:
    return sidecar.stats()
