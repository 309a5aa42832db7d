"""Dependencies shared by the routers: the process's Sidecar and its three jobs, typed for injection.

A router asks for the job it does (``IngestDep`` for the write hooks, ``QueriesDep`` for reads, ``StatusDep``
for the reports) and for the whole ``SidecarDep`` only when it needs the parts themselves.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from openclaw_lossless.config import RecallOverrides, RecallSettings
from openclaw_lossless.service.ingest import Ingest
from openclaw_lossless.service.queries import Queries
from openclaw_lossless.service.status import Status
from openclaw_lossless.sidecar import Sidecar


def get_sidecar(request: Request) -> Sidecar:
    sidecar: Sidecar = request.app.state.sidecar
    return sidecar


SidecarDep = Annotated[Sidecar, Depends(get_sidecar)]


def get_ingest(sidecar: SidecarDep) -> Ingest:
    return sidecar.ingest


def get_queries(sidecar: SidecarDep) -> Queries:
    return sidecar.queries


def get_status(sidecar: SidecarDep) -> Status:
    return sidecar.status


IngestDep = Annotated[Ingest, Depends(get_ingest)]
QueriesDep = Annotated[Queries, Depends(get_queries)]
StatusDep = Annotated[Status, Depends(get_status)]


def recall_settings(sidecar: Sidecar, overrides: RecallOverrides | None) -> RecallSettings:
    """The recall settings for one request: the sidecar's, with the plugin's per-request overrides laid on."""
    base = sidecar.settings.recall
    return overrides.apply(base) if overrides is not None else base
