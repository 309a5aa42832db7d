"""The workspace memory files as indexed: ``GET /v1/memory-files`` lists them, ``POST /v1/memory-files/reindex``
runs a pass now (after an edit, rather than waiting for ``memoryFilesIntervalS``). Both need the token."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from anyio import to_thread
from fastapi import APIRouter

from openclaw_lossless.api.deps import SidecarDep
from openclaw_lossless.sidecar import Sidecar

router = APIRouter(prefix="/v1/memory-files", tags=["memory-files"])


def listing(sidecar: Sidecar) -> dict[str, Any]:
    """Every indexed file (agent, path, workspace, chunks, size, when indexed) and the last pass's report."""
    files = sidecar.ops.memory_files.files(sidecar.db.reader())
    last = sidecar.memory_files.last
    return {
        "enabled": sidecar.settings.memory_files,
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
        "lastError": sidecar.memory_files.last_error,
    }


@router.get("")
def memory_files(sidecar: SidecarDep) -> dict[str, Any]:
    return listing(sidecar)


@router.post("/reindex")
async def reindex(sidecar: SidecarDep) -> dict[str, Any]:
    report = await to_thread.run_sync(sidecar.memory_files.run_once)
    return asdict(report)
