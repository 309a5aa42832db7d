"""Operator endpoints: liveness/readiness for supervisors, counts and latencies for people."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from openclaw_lossless.api.deps import SidecarDep

router = APIRouter(tags=["ops"])


@router.get("/healthz")
def healthz(sidecar: SidecarDep) -> dict[str, Any]:
    """Public (no token): DB writable, sqlite-vec loaded, embedder ready, backlog size."""
    return sidecar.health()


@router.get("/stats")
def stats(sidecar: SidecarDep) -> dict[str, Any]:
    return sidecar.stats()
