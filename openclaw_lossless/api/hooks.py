"""The hook endpoints the plugin shim calls, one per OpenClaw context-engine method (see plugin-manifest.json).

Handlers are plain ``def``: they run in the threadpool, and all writes funnel through the store's one writer.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter

from openclaw_lossless.api import schemas
from openclaw_lossless.api.deps import IngestDep, QueriesDep, SettingsDep, recall_settings
from openclaw_lossless.capture.text import descriptor_text, descriptor_tokens, window_key
from openclaw_lossless.recall.window import Descriptor
from openclaw_lossless.service.ingest import Bootstrapped, Committed, Ended
from openclaw_lossless.store.model.snapshots import CompactionRecord

router = APIRouter(prefix="/v1/hooks", tags=["hooks"])


@router.post("/bootstrap", response_model=schemas.BootstrapResponse)
def bootstrap(body: schemas.BootstrapRequest, ingest: IngestDep) -> Bootstrapped:
    return ingest.bootstrap(body.session_id, body.session_key)


@router.post("/commit-turn", response_model=schemas.CommitTurnResponse)
def commit_turn(body: schemas.CommitTurnRequest, ingest: IngestDep, settings: SettingsDep) -> Committed:
    recall = recall_settings(settings, body.config)
    return ingest.commit_turn(
        body.advancement_key,
        body.session_id,
        body.session_key,
        body.messages,
        heartbeat=body.is_heartbeat,
        recall=recall,
    )


@router.post("/ingest", response_model=schemas.IngestResponse)
def ingest(body: schemas.IngestRequest, ingest: IngestDep, settings: SettingsDep) -> dict[str, Any]:
    stored = ingest.ingest(
        body.session_id,
        body.session_key,
        [body.message],
        heartbeat=body.is_heartbeat,
        recall=recall_settings(settings, body.config),
    )
    return {"ingested": stored > 0}


@router.post("/ingest-batch", response_model=schemas.IngestBatchResponse)
def ingest_batch(body: schemas.IngestBatchRequest, ingest: IngestDep, settings: SettingsDep) -> dict[str, Any]:
    stored = ingest.ingest(
        body.session_id,
        body.session_key,
        body.messages,
        heartbeat=body.is_heartbeat,
        recall=recall_settings(settings, body.config),
    )
    return {"ingestedCount": stored}


@router.post("/after-turn", response_model=schemas.IngestBatchResponse)
def after_turn(body: schemas.AfterTurnRequest, ingest: IngestDep, settings: SettingsDep) -> dict[str, Any]:
    stored = ingest.after_turn(
        body.session_id,
        body.session_key,
        body.messages,
        heartbeat=body.is_heartbeat,
        recall=recall_settings(settings, body.config),
    )
    return {"ingestedCount": stored}


@router.post("/assemble", response_model=schemas.AssembleResponse, response_model_exclude_none=True)
def assemble(body: schemas.AssembleRequest, queries: QueriesDep, settings: SettingsDep) -> dict[str, Any]:
    descriptors = _descriptors(body)
    now = body.now / 1000 if body.now is not None else None
    result = queries.assemble(
        body.session_id,
        body.session_key,
        descriptors,
        body.prompt,
        body.token_budget,
        recall_settings(settings, body.config),
        now=now,
    )
    response: dict[str, Any] = {
        "windowStart": result.window_start,
        "estimatedTokens": result.estimated_tokens,
        "systemPromptAddition": result.system_prompt_addition,
        "recalled": result.recalled,
        "recallSkipped": result.skipped,
    }
    if body.messages is not None:
        response["messages"] = body.messages[result.window_start :]
    if body.trace:
        response["trace"] = {
            "query": result.query,
            "windowTokens": result.window_tokens,
            "candidates": result.trace(),
            "phasesMs": result.phases,
        }
    return response


def _descriptors(body: schemas.AssembleRequest) -> list[Descriptor]:
    if body.descriptors is not None:
        return [Descriptor(d.role, d.key, d.tokens, d.timestamp, d.text) for d in body.descriptors]
    return [_describe(message) for message in body.messages or []]


def _describe(message: dict[str, Any]) -> Descriptor:
    role = str(message.get("role") or "")
    text = descriptor_text(message) if role == "user" else None
    return Descriptor(role, window_key(message), descriptor_tokens(message), None, text)


@router.post("/compact", response_model=schemas.CompactResponse)
def compact(body: schemas.CompactRequest, ingest: IngestDep) -> dict[str, Any]:
    record = CompactionRecord(
        body.tokens_before, body.tokens_after, body.compacted, body.summary, body.reason, ok=body.ok
    )
    return {"recorded": True, **asdict(ingest.compact(body.session_id, body.session_key, record))}


@router.post("/subagent-spawn", response_model=schemas.SubagentSpawnResponse)
def subagent_spawn(body: schemas.SubagentSpawnRequest, ingest: IngestDep) -> dict[str, Any]:
    return {"spawnId": ingest.subagent_spawn(body.parent_session_key, body.child_session_key, body.context_mode)}


@router.post("/subagent-spawn/rollback", response_model=schemas.SubagentRollbackResponse)
def subagent_rollback(body: schemas.SubagentRollbackRequest, ingest: IngestDep) -> dict[str, Any]:
    return {"rolledBack": ingest.subagent_rollback(body.spawn_id, body.child_session_key)}


@router.post("/subagent-ended", response_model=schemas.SubagentEndedResponse)
def subagent_ended(body: schemas.SubagentEndedRequest, ingest: IngestDep) -> Ended:
    return ingest.subagent_ended(body.child_session_key, body.reason)
