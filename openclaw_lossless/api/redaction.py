"""``POST /v1/redact/rescan``: the current redaction rules applied to what the store already holds.

Under the token like every endpoint but the health check. The CLI's ``redact --rescan`` comes here when this
sidecar serves the store, so the rescan runs in the one process that writes it: page by page, each page its
own transaction, with the hooks' commits in between, and the in-memory vector index told of every message
whose vector it drops.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from openclaw_lossless.api.deps import SidecarDep
from openclaw_lossless.api.responses import RescanResponse
from openclaw_lossless.rescan import rescan_store

router = APIRouter(prefix="/v1", tags=["redaction"])


class RescanRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dry_run: StrictBool = Field(
        default=False, alias="dryRun", description="Report what would change and change nothing."
    )


@router.post("/redact/rescan")
def redact_rescan(sidecar: SidecarDep, body: RescanRequest | None = None) -> RescanResponse:
    """Rescan messages, originals, summaries, reasons, snapshot names and archives; report the changes by
    placeholder kind and by place. 409 ``rescan_running`` while another rescan runs."""
    return RescanResponse.model_validate(rescan_store(sidecar, dry_run=body.dry_run if body is not None else False))
