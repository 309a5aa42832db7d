"""Dependencies shared by the routers: the process's Sidecar and its three jobs, typed for injection.

A router asks for the job it does (``IngestDep`` for the write hooks, ``QueriesDep`` for reads, ``StatusDep``
for the reports) and for the parts it reads (``StoreDep``, ``SettingsDep``, ``ActivityDep``, ...); the whole
``SidecarDep`` only where one function reads many parts. Nothing here reaches through the sidecar twice
(``tests/test_sidecar_reach.py``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from openclaw_lossless.config import RecallOverrides, RecallSettings, Settings
from openclaw_lossless.embed.index import Nearest
from openclaw_lossless.embed.service import EmbeddingService
from openclaw_lossless.memory_files.indexer import MemoryIndexer
from openclaw_lossless.observe.activity import Activity
from openclaw_lossless.observe.metrics import Metrics
from openclaw_lossless.service.ingest import Ingest
from openclaw_lossless.service.queries import Queries
from openclaw_lossless.service.status import Status
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.backend import Store


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


def get_store(sidecar: SidecarDep) -> Store:
    return sidecar.store


def get_settings(sidecar: SidecarDep) -> Settings:
    return sidecar.settings


def get_activity(sidecar: SidecarDep) -> Activity:
    return sidecar.activity


def get_metrics(sidecar: SidecarDep) -> Metrics:
    return sidecar.metrics


def get_embedding(sidecar: SidecarDep) -> EmbeddingService:
    return sidecar.embedding


def get_index(sidecar: SidecarDep) -> Nearest | None:
    return sidecar.index


def get_memory_files(sidecar: SidecarDep) -> MemoryIndexer:
    return sidecar.memory_files


IngestDep = Annotated[Ingest, Depends(get_ingest)]
QueriesDep = Annotated[Queries, Depends(get_queries)]
StatusDep = Annotated[Status, Depends(get_status)]
StoreDep = Annotated[Store, Depends(get_store)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
ActivityDep = Annotated[Activity, Depends(get_activity)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
EmbeddingDep = Annotated[EmbeddingService, Depends(get_embedding)]
IndexDep = Annotated[Nearest | None, Depends(get_index)]
MemoryFilesDep = Annotated[MemoryIndexer, Depends(get_memory_files)]


def recall_settings(settings: Settings, overrides: RecallOverrides | None) -> RecallSettings:
    """The recall settings for one request: the sidecar's, with the plugin's per-request overrides laid on."""
    base = settings.recall
    return overrides.apply(base) if overrides is not None else base
