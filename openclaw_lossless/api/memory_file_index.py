"""The workspace memory files as indexed: ``GET /v1/memory-files`` lists them, ``POST /v1/memory-files/reindex``
runs a pass now (after an edit, rather than waiting for ``memoryFilesIntervalS``). Both need the token."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from anyio import to_thread
from fastapi import APIRouter

from openclaw_lossless.api.deps import MemoryFilesDep, SettingsDep, StoreDep
from openclaw_lossless.config import Settings
from openclaw_lossless.memory_files.indexer import MemoryIndexer
from openclaw_lossless.store.backend import Store

router = APIRouter(prefix="/v1/memory-files", tags=["memory-files"])


def listing(store: Store, settings: Settings, indexer: MemoryIndexer) -> dict[str, Any]:
    """Every indexed file (agent, path, workspace, chunks, size, when indexed) and the last pass's report."""
    files = store.ops.memory_files.files(store.db.reader())
    last = indexer.last
    return {
        "enabled": settings.memory_files,
        "files": [
            {
                "agentId": f.agent_id,
                "path": f.path,
                "workspace": f.workspace,
                "chunks": f.chunks,
                "size": f.size,
                "indexedAt": f.indexed_at,
            }
            for f in files
        ],
        "lastPass": None if last is None else asdict(last),
        "lastError": indexer.last_error,
    }


@router.get("")
def memory_files(store: StoreDep, settings: SettingsDep, indexer: MemoryFilesDep) -> dict[str, Any]:
    return listing(store, settings, indexer)


@router.post("/reindex")
async def reindex(indexer: MemoryFilesDep) -> dict[str, Any]:
    report = await to_thread.run_sync(indexer.run_once)
    return asdict(report)
